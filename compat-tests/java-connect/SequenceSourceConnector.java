// A tiny deterministic source connector for the Connect tests of issue 27 (connect-file 4.4.0 is
// not on Maven Central): one task writes "s-0", "s-1", ... to `topic`, each record's source offset
// its sequence number, and resumes after the last offset Connect committed. It declares
// exactly-once support, so a worker with exactly.once.source.support=enabled writes its records
// and offsets in one transaction per boundary.

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

public class SequenceSourceConnector extends SourceConnector {
    static final Map<String, String> PARTITION = Map.of("source", "sequence");
    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SequenceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef()
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "Where the sequence goes.")
            .define("batch.size", ConfigDef.Type.INT, 20, ConfigDef.Importance.LOW, "Records per poll.")
            .define("poll.interval.ms", ConfigDef.Type.LONG, 20L, ConfigDef.Importance.LOW, "Pause between polls.");
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    @Override
    public String version() {
        return "1.0";
    }

    /** The task: the next sequence numbers, one batch per poll. */
    public static class SequenceTask extends SourceTask {
        private String topic;
        private int batchSize;
        private long pauseMs;
        private long next;

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            batchSize = Integer.parseInt(props.getOrDefault("batch.size", "20"));
            pauseMs = Long.parseLong(props.getOrDefault("poll.interval.ms", "20"));
            Map<String, Object> offset = context.offsetStorageReader().offset(PARTITION);
            next = offset == null ? 0 : ((Number) offset.get("seq")).longValue() + 1;
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            Thread.sleep(pauseMs);
            List<SourceRecord> out = new ArrayList<>(batchSize);
            for (int i = 0; i < batchSize; i++, next++) {
                out.add(new SourceRecord(PARTITION, Map.of("seq", next), topic, null, null, null,
                    Schema.STRING_SCHEMA, "s-" + next));
            }
            return out;
        }

        @Override
        public void stop() {
        }

        @Override
        public String version() {
            return "1.0";
        }
    }
}
