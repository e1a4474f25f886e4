import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/**
 * One Kafka Streams instance of the streams-group compat test: counts words.
 * "line-id word" records are re-keyed by word (a repartition topic) and counted in a store
 * (a changelog topic); every count goes to the output topic (the record cache is off).
 *
 * Args: bootstrap application-id group-protocol state-dir input-topic output-topic.
 * Prints one JSON line per state change and, every 500 ms, the instance's tasks when they
 * changed. Closes cleanly when stdin closes.
 */
public class WordCountApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], protocol = args[2], stateDir = args[3];
        String input = args[4], output = args[5];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // the classic protocol's rebalances: quick enough for a test
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.PROBING_REBALANCE_INTERVAL_MS_CONFIG, 60000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .map((k, v) -> KeyValue.pair(v.substring(v.indexOf(' ') + 1), v))
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count()
            .toStream()
            .mapValues(Object::toString)
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> emit("{\"state\":\"" + now + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"error\":" + quote(String.valueOf(e)) + "}");
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        Thread watcher = new Thread(() -> {
            String last = "";
            while (!Thread.currentThread().isInterrupted()) {
                TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
                try {
                    for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                        for (TaskMetadata m : t.activeTasks()) active.add(m.taskId().toString());
                        for (TaskMetadata m : t.standbyTasks()) standby.add(m.taskId().toString());
                    }
                } catch (RuntimeException e) {
                    // not running yet
                }
                String line = "{\"active\":" + list(active) + ",\"standby\":" + list(standby)
                    + ",\"state\":\"" + streams.state() + "\"}";
                if (!line.equals(last)) {
                    emit(line);
                    last = line;
                }
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) {
            // stdin open: keep running
        }
        watcher.interrupt();
        streams.close(Duration.ofSeconds(30));
        emit("{\"closed\":true}");
    }

    static String list(TreeSet<String> s) {
        StringBuilder b = new StringBuilder("[");
        for (String x : s) {
            if (b.length() > 1) b.append(',');
            b.append('"').append(x).append('"');
        }
        return b.append(']').toString();
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
