// Lock timeout with Java KafkaShareConsumers (compat-tests/test_share_groups_locks.py): member
// "stalled" polls until it holds records and then never acknowledges them (it stays in the group,
// its background thread keeps heartbeating); once it holds records, member "other" joins and
// accepts whatever it gets. One JSON line per record each member got. Arguments:
//   bootstrap group topic maxMs wanted
// It stops when "other" got `wanted` records, or after maxMs.
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class LockDriver {
    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String name) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        return new KafkaShareConsumer<>(p);
    }

    static void emit(String name, ConsumerRecord<String, String> r, long sinceMs) {
        int dc = r.deliveryCount().map(Short::intValue).orElse(-1);
        System.out.printf("{\"c\":\"%s\",\"o\":%d,\"dc\":%d,\"ms\":%d}%n", name, r.offset(), dc, sinceMs);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        long maxMs = Long.parseLong(args[3]);
        int wanted = Integer.parseInt(args[4]);
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> stalled = consumer(bootstrap, group, "stalled");
             KafkaShareConsumer<String, String> other = consumer(bootstrap, group, "other")) {
            stalled.subscribe(List.of(topic));
            ConsumerRecords<String, String> held = ConsumerRecords.empty();
            while (held.isEmpty() && System.currentTimeMillis() - start < maxMs) {
                held = stalled.poll(Duration.ofMillis(200));
            }
            long acquired = System.currentTimeMillis();
            for (ConsumerRecord<String, String> r : held) emit("stalled", r, 0);
            other.subscribe(List.of(topic));
            int got = 0;
            while (got < wanted && System.currentTimeMillis() - start < maxMs) {
                ConsumerRecords<String, String> records = other.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    emit("other", r, System.currentTimeMillis() - acquired);
                    other.acknowledge(r, AcknowledgeType.ACCEPT);
                    got++;
                }
                if (!records.isEmpty()) other.commitSync();
            }
        }
        System.out.println("{\"done\":true}");
    }
}
