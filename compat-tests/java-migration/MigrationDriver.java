// Stock Java 4.4 consumers in one group, restarted one at a time on another group.protocol
// (classic <-> consumer), while a producer keeps writing. Driven over stdin by
// compat-tests/test_group_migration.py; every event is one JSON line on stdout, in the order it
// happened (one lock around stdout):
//   {"c":slot,"g":incarnation,"p":partition,"o":offset,"v":value}      a record consumed
//   {"commit":slot,"g":incarnation,"p":partition,"o":next offset}    a successful commit
//   {"commitFailed":slot,"g":incarnation,"error":name}               a failed commit
//   {"describe":{...}}                                               Admin.describeConsumerGroups
//   {"ok":"<command>"}                                               a command is done
// Commands: start SLOT classic|consumer, stop SLOT, describe, load on|off, offsets, exit.
// Usage: MigrationDriver BOOTSTRAP GROUP TOPIC

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class MigrationDriver {
    static final Object OUT = new Object();
    static String bootstrap, group, topic;

    static void emit(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** One consumer incarnation of a slot: polls, commits what it consumed after each poll and
     *  on revocation, and leaves the group when stopped. */
    static final class Member implements Runnable {
        final int slot, incarnation;
        final String protocol;
        volatile boolean stop;
        final Thread thread;
        final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();

        Member(int slot, int incarnation, String protocol) {
            this.slot = slot;
            this.incarnation = incarnation;
            this.protocol = protocol;
            this.thread = new Thread(this, "slot-" + slot);
        }

        void commit(KafkaConsumer<String, String> consumer, Collection<TopicPartition> only) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (var e : pending.entrySet()) {
                if (only == null || only.contains(e.getKey())) offsets.put(e.getKey(), e.getValue());
            }
            if (offsets.isEmpty()) return;
            try {
                consumer.commitSync(offsets);
                for (var e : offsets.entrySet()) {
                    emit("{\"commit\":" + slot + ",\"g\":" + incarnation + ",\"p\":" + e.getKey().partition()
                        + ",\"o\":" + e.getValue().offset() + "}");
                }
            } catch (Exception ex) {
                emit("{\"commitFailed\":" + slot + ",\"g\":" + incarnation + ",\"error\":" + q(ex.getClass().getSimpleName()) + "}");
            }
            offsets.keySet().forEach(pending::remove);
        }

        @Override
        public void run() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", protocol);
            p.put("client.id", "slot" + slot + "-" + protocol);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            if (protocol.equals("classic")) {
                p.put("session.timeout.ms", "10000");
                p.put("heartbeat.interval.ms", "500");
            }
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        commit(consumer, partitions);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> partitions) {
                        emit("{\"lost\":" + slot + ",\"g\":" + incarnation + ",\"n\":" + partitions.size() + "}");
                        partitions.forEach(pending::remove);
                    }
                });
                while (!stop) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : records) {
                        emit("{\"c\":" + slot + ",\"g\":" + incarnation + ",\"p\":" + r.partition() + ",\"o\":"
                            + r.offset() + ",\"v\":" + q(r.value()) + "}");
                        pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (!records.isEmpty()) commit(consumer, null);
                }
                commit(consumer, null);
            } catch (Exception ex) {
                emit("{\"memberFailed\":" + slot + ",\"g\":" + incarnation + ",\"error\":" + q(ex.toString()) + "}");
            }
        }
    }

    static String describe(Admin admin) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<String> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            int target = m.targetAssignment().map(a -> a.topicPartitions().size()).orElse(-1);
            members.add("{\"client\":" + q(m.clientId()) + ",\"partitions\":" + m.assignment().topicPartitions().size()
                + ",\"target\":" + target + ",\"upgraded\":" + m.upgraded().map(String::valueOf).orElse("null")
                + ",\"epoch\":" + m.memberEpoch().orElse(-1) + "}");
        }
        members.sort(null);
        return "{\"type\":" + q(String.valueOf(d.type())) + ",\"state\":" + q(String.valueOf(d.groupState()))
            + ",\"assignor\":" + q(d.partitionAssignor()) + ",\"groupEpoch\":" + d.groupEpoch().orElse(-1)
            + ",\"assignmentEpoch\":" + d.targetAssignmentEpoch().orElse(-1) + ",\"members\":" + members + "}";
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        group = args[1];
        topic = args[2];
        Map<Integer, Member> slots = new TreeMap<>();
        AtomicInteger incarnations = new AtomicInteger();
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "0");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        AtomicInteger sent = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicInteger acked = new AtomicInteger();
        boolean[] loading = {false};
        Thread[] loader = {null};
        try (Admin admin = Admin.create(ap); KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split("\\s+");
                switch (w[0]) {
                    case "start" -> {
                        Member m = new Member(Integer.parseInt(w[1]), incarnations.incrementAndGet(), w[2]);
                        slots.put(m.slot, m);
                        m.thread.start();
                    }
                    case "stop" -> {
                        Member m = slots.remove(Integer.parseInt(w[1]));
                        m.stop = true;
                        m.thread.join();
                    }
                    case "describe" -> {
                        try {
                            emit("{\"describe\":" + describe(admin) + "}");
                        } catch (Exception ex) {
                            // e.g. the group changed type between the Admin's two describe requests
                            emit("{\"describe\":null,\"error\":" + q(ex.toString()) + "}");
                        }
                    }
                    case "load" -> {
                        // a steady stream of acknowledged records (acks=all, idempotent) round the partitions
                        if (w[1].equals("on")) {
                            loading[0] = true;
                            loader[0] = new Thread(() -> {
                                while (loading[0]) {
                                    int seq = sent.getAndIncrement();
                                    producer.send(new ProducerRecord<>(topic, seq % partitions, null, "m-" + seq),
                                        (md, ex) -> (ex == null ? acked : failed).incrementAndGet());
                                    try {
                                        Thread.sleep(4);
                                    } catch (InterruptedException e) {
                                        return;
                                    }
                                }
                            });
                            loader[0].start();
                        } else {
                            loading[0] = false;
                            loader[0].join();
                            producer.flush();
                            emit("{\"produced\":" + sent.get() + ",\"acked\":" + acked.get() + ",\"failed\":" + failed.get() + "}");
                        }
                    }
                    case "offsets" -> {
                        var committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                        List<String> parts = new ArrayList<>();
                        for (var e : new TreeMap<Integer, Long>(committed.entrySet().stream().collect(
                                java.util.stream.Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset())))
                                .entrySet()) {
                            parts.add("\"" + e.getKey() + "\":" + e.getValue());
                        }
                        emit("{\"offsets\":{" + String.join(",", parts) + "}}");
                    }
                    case "exit" -> {
                        for (Member m : slots.values()) m.stop = true;
                        for (Member m : slots.values()) m.thread.join();
                        emit("{\"ok\":\"exit\"}");
                        return;
                    }
                    default -> emit("{\"error\":" + q("unknown command " + w[0]) + "}");
                }
                emit("{\"ok\":" + q(w[0]) + "}");
            }
        }
    }
}
