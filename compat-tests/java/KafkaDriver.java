// Command-line driver for the stock Java Kafka client (kafka-clients), used by Odradek's
// compatibility tests through compat-tests/kafka_oracle.py (class JavaClient).
//
// Usage: KafkaDriver <command> [options] --bootstrap HOST:PORT
//        KafkaDriver serve   (commands from stdin, one per line, tab-separated; see serve())
//   produce  --topic T --count N [--acks all|1|0] [--compression none|gzip|snappy|lz4|zstd]
//            [--key-format FMT | --null-keys] [--value-format FMT] [--value-size BYTES]
//            [--header NAME=FMT]... [--partition P] [--timestamp BASE_MS]
//            [--idempotence true|false] [--linger-ms MS] [--batch-size BYTES]
//            [--transactional-id ID [--abort]] [--config K=V]...
//            FMT: "%d" is replaced by the record index (0-based). Timestamps: BASE_MS + index.
//            Prints one line per record {"index","partition","offset","timestamp"}, then a
//            summary {"produced", "elapsed_ms"}.
//   consume  --topic T [--from earliest|latest|offset:N|timestamp:MS] [--max-records N]
//            [--idle-timeout-ms MS] [--timeout-ms MS] [--partitions 0,1] [--group G [--commit]]
//            [--isolation read_uncommitted|read_committed] [--config K=V]...
//            Stops after N records, after MS idle (once partitions are assigned), or after
//            --timeout-ms in all (default 60000). Prints one line per record (bytes as
//            base64), then {"consumed": N}.
//   admin create-topic --topic T [--partitions N] [--replication-factor R] [--topic-config K=V]...
//   admin list-topics [--internal]
//   admin describe-topic --topic T
//   admin delete-topic --topic T
//   admin describe-configs (--topic T | --broker ID)
//   admin list-offsets --topic T --spec earliest|latest|max-timestamp|timestamp:MS
//
// Every command also takes --client-id ID and --config K=V (client configs, applied last).
//
// Every line on stdout is one JSON object; logs go to stderr. On failure the last line is
// {"error": "<exception class>", "message": "..."} and the exit code is 1.
// JSON is written by hand so the driver needs nothing but kafka-clients on its classpath.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaDriver {

    /** Parsed "--name value" options; repeatable options keep every value, flags map to "true". */
    private static final class Opts {
        final Map<String, List<String>> values = new HashMap<>();

        static Opts parse(String[] args, int from, java.util.Set<String> flags) {
            Opts o = new Opts();
            for (int i = from; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    throw new IllegalArgumentException("unexpected argument: " + a);
                }
                String name = a.substring(2);
                String value;
                if (flags.contains(name)) {
                    value = "true";
                } else {
                    if (i + 1 >= args.length) {
                        throw new IllegalArgumentException("missing value for " + a);
                    }
                    value = args[++i];
                }
                o.values.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
            }
            return o;
        }

        String get(String name, String dflt) {
            List<String> v = values.get(name);
            return v == null ? dflt : v.get(v.size() - 1);
        }

        String need(String name) {
            String v = get(name, null);
            if (v == null) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
            return v;
        }

        List<String> all(String name) {
            return values.getOrDefault(name, Collections.emptyList());
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        /** --config K=V pairs, applied last so tests can override anything the driver sets. */
        void applyConfigs(Properties props, String name) {
            for (String kv : all(name)) {
                int eq = kv.indexOf('=');
                if (eq < 0) {
                    throw new IllegalArgumentException("--" + name + " needs K=V, got " + kv);
                }
                props.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
    }

    private static final java.util.Set<String> FLAGS =
            java.util.Set.of("null-keys", "abort", "internal", "commit");

    public static void main(String[] args) throws java.io.IOException {
        if (args.length == 1 && args[0].equals("serve")) {
            serve();
            return;
        }
        int rc = runCommand(args);
        System.out.flush();
        // Exit explicitly: client threads that failed to close must not keep the JVM alive.
        System.exit(rc);
    }

    /**
     * Runs commands read from stdin, one per line, arguments separated by tabs. After each
     * command's output comes {"done": <exit code>}. Saves a JVM start (and the client classes'
     * loading and warm-up, ~1-2 s on a busy machine) per command. Ends at EOF.
     */
    private static void serve() throws java.io.IOException {
        java.io.BufferedReader in =
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            int rc = runCommand(line.split("\t", -1));
            emit(Map.of("done", rc));
            System.out.flush();
        }
        System.exit(0);
    }

    /** Runs one command; returns its exit code after printing its JSON lines (or the error). */
    private static int runCommand(String[] args) {
        try {
            if (args.length < 1) {
                throw new IllegalArgumentException("usage: KafkaDriver produce|consume|admin|serve ...");
            }
            switch (args[0]) {
                case "produce" -> produce(Opts.parse(args, 1, FLAGS));
                case "consume" -> consume(Opts.parse(args, 1, FLAGS));
                case "admin" -> {
                    if (args.length < 2) {
                        throw new IllegalArgumentException("usage: KafkaDriver admin <op> ...");
                    }
                    admin(args[1], Opts.parse(args, 2, FLAGS));
                }
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
            return 0;
        } catch (Throwable t) {
            // Report the meaningful exception, not the Future/Kafka wrappers around it.
            Throwable cause = t;
            while (cause.getCause() != null && (cause instanceof ExecutionException
                    || cause instanceof org.apache.kafka.common.KafkaException
                            && !(cause instanceof org.apache.kafka.common.errors.ApiException))) {
                cause = cause.getCause();
            }
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("error", cause.getClass().getName());
            err.put("message", String.valueOf(cause.getMessage()));
            emit(err);
            t.printStackTrace(System.err);
            return 1;
        }
    }

    // ----------------------------------------------------------------------------- produce

    private static void produce(Opts o) throws Exception {
        String topic = o.need("topic");
        int count = Integer.parseInt(o.need("count"));
        String acks = o.get("acks", "all");
        // Idempotence is on by default (as in the Java client since 3.0) but only valid with
        // acks=all, so weaker acks turn it off unless the caller insists.
        boolean acksAll = acks.equals("all") || acks.equals("-1");
        String idempotence = o.get("idempotence", Boolean.toString(acksAll));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.need("bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, o.get("compression", "none"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotence);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, o.get("client-id", "odradek-java-driver"));
        if (o.has("linger-ms")) {
            p.put(ProducerConfig.LINGER_MS_CONFIG, o.get("linger-ms", null));
        }
        if (o.has("batch-size")) {
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, o.get("batch-size", null));
        }
        String txnId = o.get("transactional-id", null);
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        o.applyConfigs(p, "config");

        String keyFormat = o.has("null-keys") ? null : o.get("key-format", "key-%d");
        String valueFormat = o.get("value-format", "value-%d");
        int valueSize = Integer.parseInt(o.get("value-size", "-1"));
        Integer partition = o.has("partition") ? Integer.valueOf(o.get("partition", null)) : null;
        Long tsBase = o.has("timestamp") ? Long.valueOf(o.get("timestamp", null)) : null;
        List<String[]> headerFormats = new ArrayList<>();
        for (String h : o.all("header")) {
            int eq = h.indexOf('=');
            headerFormats.add(eq < 0 ? new String[] {h, null} : new String[] {h.substring(0, eq), h.substring(eq + 1)});
        }

        long t0 = System.nanoTime();
        RecordMetadata[] acked = new RecordMetadata[count];
        Exception[] failed = new Exception[count];
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            if (txnId != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            for (int i = 0; i < count; i++) {
                byte[] key = keyFormat == null ? null : fmt(keyFormat, i).getBytes(StandardCharsets.UTF_8);
                byte[] value = fmt(valueFormat, i).getBytes(StandardCharsets.UTF_8);
                if (valueSize >= 0 && value.length < valueSize) {
                    byte[] padded = new byte[valueSize];
                    java.util.Arrays.fill(padded, (byte) 'x');
                    System.arraycopy(value, 0, padded, 0, value.length);
                    value = padded;
                }
                List<Header> headers = new ArrayList<>();
                for (String[] hf : headerFormats) {
                    headers.add(new RecordHeader(hf[0], hf[1] == null ? null : fmt(hf[1], i).getBytes(StandardCharsets.UTF_8)));
                }
                Long ts = tsBase == null ? null : tsBase + i;
                final int idx = i;
                producer.send(new ProducerRecord<>(topic, partition, ts, key, value, headers), (md, ex) -> {
                    acked[idx] = md;
                    failed[idx] = ex;
                });
            }
            producer.flush();
            if (txnId != null) {
                if (o.has("abort")) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        int errors = 0;
        Exception first = null;
        for (int i = 0; i < count; i++) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("index", i);
            if (failed[i] != null) {
                errors++;
                first = first == null ? failed[i] : first;
                line.put("error", failed[i].getClass().getName());
            } else {
                line.put("partition", acked[i].partition());
                line.put("offset", acked[i].hasOffset() ? acked[i].offset() : null);
                line.put("timestamp", acked[i].hasTimestamp() ? acked[i].timestamp() : null);
            }
            emit(line);
        }
        if (first != null) {
            throw first;
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("produced", count - errors);
        summary.put("elapsed_ms", (System.nanoTime() - t0) / 1_000_000);
        emit(summary);
    }

    private static String fmt(String format, int i) {
        return format.replace("%d", Integer.toString(i));
    }

    // ----------------------------------------------------------------------------- consume

    private static void consume(Opts o) throws Exception {
        String topic = o.need("topic");
        String from = o.get("from", "earliest");
        long maxRecords = Long.parseLong(o.get("max-records", Long.toString(Long.MAX_VALUE)));
        long idleMs = Long.parseLong(o.get("idle-timeout-ms", "5000"));
        long totalMs = Long.parseLong(o.get("timeout-ms", "60000"));
        String group = o.get("group", null);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.need("bootstrap"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.get("isolation", "read_uncommitted"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.get("client-id", "odradek-java-driver"));
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, from.equals("latest") ? "latest" : "earliest");
        }
        o.applyConfigs(p, "config");

        long consumed = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (group != null) {
                if (!(from.equals("earliest") || from.equals("latest"))) {
                    throw new IllegalArgumentException("with --group, --from must be earliest or latest");
                }
                consumer.subscribe(List.of(topic));
            } else {
                // Manual assignment: no group coordinator, no rebalance wait.
                List<TopicPartition> tps = new ArrayList<>();
                if (o.has("partitions")) {
                    for (String s : o.get("partitions", "").split(",")) {
                        tps.add(new TopicPartition(topic, Integer.parseInt(s.trim())));
                    }
                } else {
                    List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
                    if (infos == null || infos.isEmpty()) {
                        throw new IllegalStateException("topic " + topic + " has no partitions");
                    }
                    for (PartitionInfo pi : infos) {
                        tps.add(new TopicPartition(topic, pi.partition()));
                    }
                }
                consumer.assign(tps);
                seek(consumer, tps, from);
            }
            long start = System.nanoTime();
            long lastProgress = start;
            while (consumed < maxRecords) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                long now = System.nanoTime();
                if ((now - start) / 1_000_000 >= totalMs) {
                    break;
                }
                if (records.isEmpty()) {
                    if (consumer.assignment().isEmpty()) {
                        // Still joining the group: waiting for the coordinator is not idleness.
                        lastProgress = now;
                    } else if ((now - lastProgress) / 1_000_000 >= idleMs) {
                        break;
                    }
                    continue;
                }
                lastProgress = System.nanoTime();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    if (consumed >= maxRecords) {
                        break;
                    }
                    emit(recordJson(r));
                    consumed++;
                }
            }
            if (group != null && o.has("commit")) {
                consumer.commitSync();
            }
        }
        emit(Map.of("consumed", consumed));
    }

    private static void seek(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> tps, String from) {
        if (from.equals("earliest")) {
            consumer.seekToBeginning(tps);
        } else if (from.equals("latest")) {
            consumer.seekToEnd(tps);
        } else if (from.startsWith("offset:")) {
            long off = Long.parseLong(from.substring("offset:".length()));
            for (TopicPartition tp : tps) {
                consumer.seek(tp, off);
            }
        } else if (from.startsWith("timestamp:")) {
            long ts = Long.parseLong(from.substring("timestamp:".length()));
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : tps) {
                query.put(tp, ts);
            }
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query, Duration.ofSeconds(30));
            List<TopicPartition> toEnd = new ArrayList<>();
            for (TopicPartition tp : tps) {
                OffsetAndTimestamp oat = found.get(tp);
                if (oat == null) {
                    toEnd.add(tp);  // no record at or after ts: nothing to read yet
                } else {
                    consumer.seek(tp, oat.offset());
                }
            }
            if (!toEnd.isEmpty()) {
                consumer.seekToEnd(toEnd);
            }
        } else {
            throw new IllegalArgumentException("bad --from " + from);
        }
    }

    private static Map<String, Object> recordJson(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", r.topic());
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("timestamp_type", r.timestampType().toString());
        m.put("leader_epoch", r.leaderEpoch().orElse(null));
        m.put("key", r.key());
        m.put("value", r.value());
        List<Object> headers = new ArrayList<>();
        for (Header h : r.headers()) {
            headers.add(java.util.Arrays.asList(h.key(), h.value()));
        }
        m.put("headers", headers);
        return m;
    }

    // ----------------------------------------------------------------------------- admin

    private static void admin(String op, Opts o) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.need("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, o.get("client-id", "odradek-java-driver"));
        o.applyConfigs(p, "config");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("op", op);
        try (Admin admin = Admin.create(p)) {
            switch (op) {
                case "create-topic" -> {
                    String topic = o.need("topic");
                    NewTopic nt = new NewTopic(topic, Integer.parseInt(o.get("partitions", "1")),
                            Short.parseShort(o.get("replication-factor", "1")));
                    Map<String, String> cfg = new LinkedHashMap<>();
                    for (String kv : o.all("topic-config")) {
                        int eq = kv.indexOf('=');
                        cfg.put(kv.substring(0, eq), kv.substring(eq + 1));
                    }
                    nt.configs(cfg);
                    CreateTopicsResult res = admin.createTopics(List.of(nt));
                    res.all().get();
                    out.put("topic", topic);
                    out.put("topic_id", res.topicId(topic).get().toString());
                    out.put("partitions", res.numPartitions(topic).get());
                }
                case "list-topics" -> {
                    List<String> names = new ArrayList<>(
                            admin.listTopics(new ListTopicsOptions().listInternal(o.has("internal"))).names().get());
                    Collections.sort(names);
                    out.put("topics", names);
                }
                case "describe-topic" -> {
                    String topic = o.need("topic");
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    out.put("topic", d.name());
                    out.put("topic_id", d.topicId().toString());
                    out.put("internal", d.isInternal());
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartitionInfo tpi : d.partitions()) {
                        Map<String, Object> pm = new LinkedHashMap<>();
                        pm.put("partition", tpi.partition());
                        pm.put("leader", tpi.leader() == null ? null : tpi.leader().id());
                        pm.put("replicas", nodeIds(tpi.replicas()));
                        pm.put("isr", nodeIds(tpi.isr()));
                        parts.add(pm);
                    }
                    out.put("partitions", parts);
                }
                case "delete-topic" -> {
                    String topic = o.need("topic");
                    admin.deleteTopics(List.of(topic)).all().get();
                    out.put("topic", topic);
                }
                case "describe-configs" -> {
                    ConfigResource res = o.has("topic")
                            ? new ConfigResource(ConfigResource.Type.TOPIC, o.need("topic"))
                            : new ConfigResource(ConfigResource.Type.BROKER, o.get("broker", "1"));
                    Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
                    Map<String, Object> entries = new TreeMap<>();
                    for (ConfigEntry e : config.entries()) {
                        Map<String, Object> em = new LinkedHashMap<>();
                        em.put("value", e.value());
                        em.put("source", e.source().toString());
                        em.put("default", e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG);
                        em.put("read_only", e.isReadOnly());
                        em.put("sensitive", e.isSensitive());
                        entries.put(e.name(), em);
                    }
                    out.put("configs", entries);
                }
                case "list-offsets" -> {
                    String topic = o.need("topic");
                    OffsetSpec spec = offsetSpec(o.get("spec", "latest"));
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    Map<TopicPartition, OffsetSpec> query = new LinkedHashMap<>();
                    for (TopicPartitionInfo tpi : d.partitions()) {
                        query.put(new TopicPartition(topic, tpi.partition()), spec);
                    }
                    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
                            admin.listOffsets(query).all().get();
                    Map<String, Object> offsets = new TreeMap<>();
                    for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : res.entrySet()) {
                        Map<String, Object> om = new LinkedHashMap<>();
                        om.put("offset", e.getValue().offset());
                        om.put("timestamp", e.getValue().timestamp());
                        Optional<Integer> epoch = e.getValue().leaderEpoch();
                        om.put("leader_epoch", epoch.orElse(null));
                        offsets.put(Integer.toString(e.getKey().partition()), om);
                    }
                    out.put("topic", topic);
                    out.put("offsets", offsets);
                }
                default -> throw new IllegalArgumentException("unknown admin op " + op);
            }
        }
        emit(out);
    }

    private static OffsetSpec offsetSpec(String spec) {
        return switch (spec) {
            case "earliest" -> OffsetSpec.earliest();
            case "latest" -> OffsetSpec.latest();
            case "max-timestamp" -> OffsetSpec.maxTimestamp();
            default -> {
                if (!spec.startsWith("timestamp:")) {
                    throw new IllegalArgumentException("bad --spec " + spec);
                }
                yield OffsetSpec.forTimestamp(Long.parseLong(spec.substring("timestamp:".length())));
            }
        };
    }

    private static List<Integer> nodeIds(Collection<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node n : nodes) {
            ids.add(n.id());
        }
        return ids;
    }

    // ----------------------------------------------------------------------------- JSON

    private static void emit(Map<String, ?> obj) {
        StringBuilder sb = new StringBuilder();
        json(sb, obj);
        System.out.println(sb);
    }

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String s) {
            str(sb, s);
        } else if (v instanceof byte[] b) {
            str(sb, Base64.getEncoder().encodeToString(b));
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            Iterator<? extends Map.Entry<?, ?>> it = m.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<?, ?> e = it.next();
                str(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
                if (it.hasNext()) {
                    sb.append(',');
                }
            }
            sb.append('}');
        } else if (v instanceof Collection<?> c) {
            sb.append('[');
            Iterator<?> it = c.iterator();
            while (it.hasNext()) {
                json(sb, it.next());
                if (it.hasNext()) {
                    sb.append(',');
                }
            }
            sb.append(']');
        } else {
            str(sb, v.toString());
        }
    }

    private static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
