// Share consumers (KIP-932) for compat-tests/test_share_groups.py: N KafkaShareConsumers of one
// share group, in explicit acknowledgement mode, each acknowledging by the rule in ackFor() and
// printing one JSON line per record it got. Arguments:
//   bootstrap group topic consumers warmupMs idleMs maxMs
// After warmupMs of polling it prints {"ready":true}; it stops once no consumer got a record for
// idleMs after the first record, or after maxMs.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareDriver {
    static final AtomicLong lastRecord = new AtomicLong(0);

    /** The rule every consumer of the test follows (the Python consumers too). */
    static String ackFor(String value, int deliveryCount) {
        int i = Integer.parseInt(value.substring(value.indexOf('-') + 1));
        if (i % 100 == 50) return "RELEASE";              // released every time: archived at the limit
        if (i % 10 == 7) return "REJECT";                 // never comes back
        if (i % 10 == 3 && deliveryCount == 1) return "RELEASE";  // comes back once, count 2
        return "ACCEPT";
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int consumers = Integer.parseInt(args[3]);
        long warmupMs = Long.parseLong(args[4]), idleMs = Long.parseLong(args[5]), maxMs = Long.parseLong(args[6]);
        long start = System.currentTimeMillis();
        List<Thread> threads = new ArrayList<>();
        List<KafkaShareConsumer<String, String>> all = new ArrayList<>();
        for (int n = 0; n < consumers; n++) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("client.id", "java-" + n);
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            p.put("share.acknowledgement.mode", "explicit");
            p.put("max.poll.records", "100");
            KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
            c.subscribe(List.of(topic));
            all.add(c);
        }
        for (int n = 0; n < consumers; n++) {
            final KafkaShareConsumer<String, String> c = all.get(n);
            final String name = "java-" + n;
            Thread t = new Thread(() -> {
                while (true) {
                    long now = System.currentTimeMillis();
                    long last = lastRecord.get();
                    if (now - start > maxMs || (last > 0 && now - last > idleMs)) break;
                    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : records) {
                        int dc = r.deliveryCount().map(Short::intValue).orElse(-1);
                        String ack = ackFor(r.value(), dc);
                        c.acknowledge(r, AcknowledgeType.valueOf(ack));
                        emit(String.format("{\"c\":\"%s\",\"p\":%d,\"o\":%d,\"v\":\"%s\",\"dc\":%d,\"ack\":\"%s\"}",
                                name, r.partition(), r.offset(), r.value(), dc, ack));
                        lastRecord.set(System.currentTimeMillis());
                    }
                    if (!records.isEmpty()) c.commitSync();
                }
                c.close();
            });
            threads.add(t);
            t.start();
        }
        Thread.sleep(warmupMs);
        emit("{\"ready\":true}");
        for (Thread t : threads) t.join();
        emit("{\"done\":true}");
    }
}
