// One transactional producer of the stock Java client running several transactions in a row, for
// compat-tests/test_transactions_v2.py: with transaction.version 2 finalized every commit/abort
// bumps the producer epoch and the next transaction continues under the new one.
//
// Usage: TxnSequence BOOTSTRAP TOPIC TRANSACTIONAL_ID PLAN
//        PLAN: comma-separated steps "commit:N" / "abort:N" (N records spread over partitions
//        0 and 1, values "<step>-<i>"); N may be 0 (a transaction with nothing sent).
// Prints one JSON line per step {"step","result","records"}, then {"done":true}.

import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnSequence {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        String topic = args[1];
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            int step = 0;
            for (String item : args[3].split(",")) {
                String[] kv = item.split(":");
                int n = Integer.parseInt(kv[1]);
                producer.beginTransaction();
                for (int i = 0; i < n; i++) {
                    byte[] value = (step + "-" + i).getBytes(StandardCharsets.UTF_8);
                    // get(): every batch is written (and its partition added) in order before the end
                    producer.send(new ProducerRecord<>(topic, i % 2, null, value)).get();
                }
                if (kv[0].equals("abort")) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                System.out.println("{\"step\":" + step + ",\"result\":\"" + kv[0] + "\",\"records\":" + n + "}");
                step++;
            }
        }
        System.out.println("{\"done\":true}");
    }
}
