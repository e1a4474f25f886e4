import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.generated.ShareGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.modern.TopicIds;
import org.apache.kafka.coordinator.group.util.UpdatedMembersAndTargetAssignmentView;
import org.apache.kafka.timeline.SnapshotRegistry;
import org.apache.kafka.timeline.TimelineHashMap;

/**
 * Runs Kafka 4.4's own SimpleAssignor over a script of share-group events, feeding it the way
 * the 4.4 group coordinator does: members from the group's TimelineHashMap overlaid with the
 * heartbeating member, a HashMap of member specs, subscriptions as TopicIds over the member's
 * HashSet of names, old targets as Assignment.fromRecord of the last target record, and the
 * initialized partitions as the assignable ones.
 *
 * stdin:  topic NAME UUID PARTITIONS INITIALIZED(comma list or -) | join MEMBER T1,T2 |
 *         leave MEMBER | beat MEMBER | end (one case; the next starts afresh)
 * stdout: after each join/beat, "target MEMBER TOPICID:P,P;..." per member (record order), then "step".
 */
public class AssignorDriver {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Case c = new Case();
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            switch (w[0]) {
                case "topic": c.topic(w[1], Uuid.fromString(w[2]), Integer.parseInt(w[3]), w[4]); break;
                case "join": c.heartbeat(w[1], new ArrayList<>(Arrays.asList(w[2].split(",")))); break;
                case "beat": c.heartbeat(w[1], null); break;
                case "leave": c.leave(w[1]); break;
                case "end": System.out.println("end"); System.out.flush(); c = new Case(); break;
                default: throw new IllegalArgumentException(line);
            }
        }
    }

    static final class Case {
        final SnapshotRegistry registry = new SnapshotRegistry(new LogContext());
        final TimelineHashMap<String, List<String>> members = new TimelineHashMap<>(registry, 0);
        final Map<String, Assignment> target = new HashMap<>();
        final Map<String, String> lastRecord = new TreeMap<>();
        final Map<String, Uuid> ids = new HashMap<>();
        final Map<Uuid, String> names = new HashMap<>();
        final Map<Uuid, Integer> counts = new HashMap<>();
        final Map<Uuid, Set<Integer>> initialized = new HashMap<>();

        void topic(String name, Uuid id, int partitions, String init) {
            ids.put(name, id);
            names.put(id, name);
            counts.put(id, partitions);
            Set<Integer> parts = new HashSet<>();
            if (!init.equals("-")) {
                for (String p : init.split(",")) parts.add(Integer.parseInt(p));
            }
            initialized.put(id, parts);
        }

        void leave(String member) {
            members.remove(member);
            target.remove(member);
            lastRecord.remove(member);
        }

        void heartbeat(String member, List<String> topics) {
            List<String> subscription = topics != null ? topics : members.get(member);
            UpdatedMembersAndTargetAssignmentView<List<String>, Assignment> view =
                new UpdatedMembersAndTargetAssignmentView<>(members, Map.of(), target, m -> null);
            view.addOrUpdateMember(member, subscription);
            TopicIds.TopicResolver resolver = new TopicIds.TopicResolver() {
                public CoordinatorMetadataImage image() { return null; }
                public String name(Uuid id) { return names.get(id); }
                public Uuid id(String name) { return ids.get(name); }
                public void clear() { }
            };
            Map<String, MemberSubscriptionAndAssignmentImpl> specs = new HashMap<>();
            Set<Set<String>> subscriptions = new HashSet<>();
            view.members().forEach((id, subs) -> {
                subscriptions.add(new HashSet<>(subs));
                specs.put(id, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(),
                    new TopicIds(new HashSet<>(subs), resolver), view.targetAssignment().getOrDefault(id, Assignment.EMPTY)));
            });
            SubscriptionType type = subscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
            SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
                public int numPartitions(Uuid id) { return counts.getOrDefault(id, -1); }
                public Set<String> racksForPartition(Uuid id, int partition) { return Set.of(); }
            };
            GroupAssignment result = new SimpleAssignor().assign(
                new GroupSpecImpl(Collections.unmodifiableMap(specs), type, Map.of(), Optional.of(initialized)), describer);
            for (String id : specs.keySet()) {
                MemberAssignment assigned = result.members().get(id);
                Assignment next = assigned != null ? new Assignment(assigned.partitions()) : Assignment.EMPTY;
                if (!next.equals(target.get(id))) {
                    CoordinatorRecord record = GroupCoordinatorRecordHelpers.newShareGroupTargetAssignmentRecord("g", id, next.partitions());
                    ShareGroupTargetAssignmentMemberValue value = (ShareGroupTargetAssignmentMemberValue) record.value().message();
                    target.put(id, Assignment.fromRecord(value));
                    StringBuilder text = new StringBuilder();
                    for (ShareGroupTargetAssignmentMemberValue.TopicPartition tp : value.topicPartitions()) {
                        if (text.length() > 0) text.append(';');
                        text.append(tp.topicId()).append(':');
                        List<String> parts = new ArrayList<>();
                        for (Integer p : tp.partitions()) parts.add(String.valueOf(p));
                        text.append(String.join(",", parts));
                    }
                    lastRecord.put(id, text.toString());
                }
            }
            members.put(member, subscription);  // the member record is replayed after the assignment
            lastRecord.forEach((id, text) -> System.out.println("target " + id + " " + text));
            System.out.println("step");
            System.out.flush();
        }
    }
}
