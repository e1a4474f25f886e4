"""KIP-1071 streams groups on the group coordinator: StreamsGroupHeartbeat and the group's state.

A streams group is the broker-driven rebalance protocol of Kafka Streams (``group.protocol=streams``).
Members send their application's topology; the coordinator works out the tasks of each
subtopology (one per input partition), creates the repartition and changelog topics the
topology needs, assigns active and standby tasks with :mod:`.streams_assignor`, and moves each
member towards its target assignment as Kafka's CurrentAssignmentBuilder does: a task given to
another member is revoked first (the member stays in its epoch until it reports the task gone),
and a task is handed out only once its previous holder has let it go.

Records in ``__consumer_offsets`` are Kafka 4.4's streams group records (key versions 17-23), see
:mod:`.streams_records`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from . import metadata_hash
from .classic import GroupError
from .streams_assignor import AssignmentMember, assign

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

Tasks = dict[str, set[int]]

#: Member states of Kafka's streams MemberState (the byte in StreamsGroupCurrentMemberAssignmentValue).
STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = 1, 2, 3
STATE_NAMES = {STABLE: "STABLE", UNREVOKED_TASKS: "UNREVOKED_TASKS", UNRELEASED_TASKS: "UNRELEASED_TASKS"}

#: Status codes of StreamsGroupHeartbeatResponse.
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

#: Kafka 4.4's defaults for the streams group broker settings (GroupCoordinatorConfig).
DEFAULTS: dict[str, int] = {
    "group.streams.session.timeout.ms": 45000,
    "group.streams.heartbeat.interval.ms": 5000,
    "group.streams.max.size": 2147483647,
    "group.streams.num.standby.replicas": 0,
    "group.streams.initial.rebalance.delay.ms": 3000,
    "group.streams.assignment.interval.ms": 1000,
    "group.streams.task.offset.interval.ms": 60000,
    "group.streams.acceptable.recovery.lag": 10000,
}
#: Group-level configs (IncrementalAlterConfigs on a GROUP resource) and the broker setting they override.
GROUP_CONFIGS = {
    "group.streams.session.timeout.ms": "streams.session.timeout.ms",
    "group.streams.heartbeat.interval.ms": "streams.heartbeat.interval.ms",
    "group.streams.num.standby.replicas": "streams.num.standby.replicas",
}


def streams_cfg(coordinator: Any, key: str, group_id: str | None = None) -> int:
    """A streams group setting: the group's own config, else the broker's, else Kafka's default."""
    if group_id is not None and key in GROUP_CONFIGS:
        broker = getattr(coordinator, "broker", None)
        store = getattr(broker, "metadata_store", None)
        if store is not None:
            found = store.image.configs.get((32, group_id), {}).get(GROUP_CONFIGS[key])
            if found is not None:
                return int(found)
    raw = getattr(getattr(coordinator, "config", None), "raw", {}) or {}
    found = raw.get(key)
    return int(found) if found is not None else int(DEFAULTS[key])


# ---------------------------------------------------------------------------------- topology

@dataclass
class TopicInfo:
    """An internal topic as the topology names it (partitions 0: the coordinator decides)."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class Subtopology:
    """One subtopology of a streams application: its input topics and the internal topics it needs."""

    subtopology_id: str
    source_topics: list[str] = field(default_factory=list)
    source_topic_regex: list[str] = field(default_factory=list)
    state_changelog_topics: list[TopicInfo] = field(default_factory=list)
    repartition_sink_topics: list[str] = field(default_factory=list)
    repartition_source_topics: list[TopicInfo] = field(default_factory=list)
    copartition_groups: list[tuple[list[int], list[int], list[int]]] = field(default_factory=list)


@dataclass
class Topology:
    """The topology a streams group runs, with the epoch its members gave it."""

    epoch: int
    subtopologies: dict[str, Subtopology]

    @classmethod
    def from_request(cls, t: Any) -> Topology:
        subs = {}
        for s in t.subtopologies or []:
            subs[s.subtopology_id] = Subtopology(
                subtopology_id=s.subtopology_id, source_topics=list(s.source_topics or []),
                source_topic_regex=list(s.source_topic_regex or []),
                state_changelog_topics=[_topic_info(i) for i in s.state_changelog_topics or []],
                repartition_sink_topics=list(s.repartition_sink_topics or []),
                repartition_source_topics=[_topic_info(i) for i in s.repartition_source_topics or []],
                copartition_groups=[(list(g.source_topics), list(g.source_topic_regex),
                                     list(g.repartition_source_topics)) for g in s.copartition_groups or []])
        return cls(epoch=t.epoch, subtopologies=dict(sorted(subs.items())))

    def stateful(self) -> set[str]:
        """Subtopologies with state stores (their tasks get standby replicas)."""
        return {sid for sid, s in self.subtopologies.items() if s.state_changelog_topics}


def _topic_info(i: Any) -> TopicInfo:
    configs = {c.key: c.value for c in i.topic_configs or []}
    return TopicInfo(name=i.name, partitions=i.partitions, replication_factor=i.replication_factor, configs=configs)


@dataclass
class ConfiguredTopology:
    """The topology against the topics as they are: tasks per subtopology, internal topics to
    create, or why it cannot run yet (a heartbeat status)."""

    tasks: dict[str, int] = field(default_factory=dict)
    to_create: dict[str, TopicInfo] = field(default_factory=dict)
    status: tuple[int, str] | None = None
    #: partitions of every topic the topology reads or writes, to notice changes
    partition_counts: dict[str, int | None] = field(default_factory=dict)

    def ready(self) -> bool:
        return self.status is None and not self.to_create


def _summarize(topics: Any) -> str:
    return ", ".join(sorted(topics))


def configure(topology: Topology, partitions: Callable[[str], int | None]) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics: source topics must exist; repartition topics
    take the partitions the topology gives them or the most partitions of the topics feeding
    them; a changelog topic has one partition per task of its subtopology."""
    out = ConfiguredTopology()
    subs = topology.subtopologies.values()
    required = {t for s in subs for t in s.source_topics}
    required |= {i.name for s in subs for i in (*s.repartition_source_topics, *s.state_changelog_topics)}
    out.partition_counts = {t: partitions(t) for t in sorted(required)}
    missing = sorted({t for s in subs for t in s.source_topics if partitions(t) is None})
    if missing:
        out.status = (MISSING_SOURCE_TOPICS, f"Source topics {_summarize(missing)} are missing.")
        return out
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        found = partitions(topic)
        return found if found is not None else decided.get(topic)

    for s in subs:
        for i in s.repartition_source_topics:
            if i.partitions > 0:
                decided[i.name] = i.partitions
    # a repartition topic without a set count gets the most partitions of the source topics of
    # the subtopologies writing to it (repeated until nothing changes: they may chain)
    changed = True
    while changed:
        changed = False
        for s in subs:
            for i in s.repartition_source_topics:
                if i.name in decided:
                    continue
                best = None
                for writer in subs:
                    if i.name not in writer.repartition_sink_topics:
                        continue
                    inputs = [count(t) for t in (*writer.source_topics, *(r.name for r in writer.repartition_source_topics))]
                    if inputs and all(n is not None for n in inputs):
                        best = max([best or 0, *inputs])  # type: ignore[list-item]
                if best:
                    decided[i.name] = best
                    changed = True
    for s in subs:
        inputs = [count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))]
        if not inputs or any(n is None for n in inputs):
            out.status = (MISSING_SOURCE_TOPICS, f"Subtopology {s.subtopology_id} has no partition count.")
            return out
        out.tasks[s.subtopology_id] = max(inputs)  # type: ignore[type-var]
        for i in s.state_changelog_topics:
            decided[i.name] = i.partitions if i.partitions > 0 else out.tasks[s.subtopology_id]
    for s in subs:
        for i in (*s.repartition_source_topics, *s.state_changelog_topics):
            want = decided[i.name]
            have = partitions(i.name)
            if have is None:
                out.to_create[i.name] = TopicInfo(i.name, want, i.replication_factor, dict(i.configs))
            elif have != want:
                out.status = (INCORRECTLY_PARTITIONED_TOPICS,
                              f"Existing topic {i.name} has different number of partitions: expected {want}, "
                              f"found {have}")
                return out
    if out.to_create:
        out.status = (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summarize(out.to_create)}")
    return out


# ---------------------------------------------------------------------------------- members

def _copy(t: Tasks) -> Tasks:
    return {s: set(ps) for s, ps in t.items() if ps}


@dataclass
class TasksTuple:
    """Active, standby and warm-up tasks."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def copy(self) -> TasksTuple:
        return TasksTuple(_copy(self.active), _copy(self.standby), _copy(self.warmup))

    def is_empty(self) -> bool:
        return not any(ps for t in (self.active, self.standby, self.warmup) for ps in t.values())

    def contains_any(self, other: TasksTuple) -> bool:
        for mine, theirs in ((self.active, other.active), (self.standby, other.standby),
                             (self.warmup, other.warmup)):
            for s, ps in theirs.items():
                if mine.get(s, set()) & ps:
                    return True
        return False

    def normalized(self) -> tuple:
        return tuple(tuple(sorted((s, tuple(sorted(ps))) for s, ps in t.items() if ps))
                     for t in (self.active, self.standby, self.warmup))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TasksTuple) and self.normalized() == other.normalized()


@dataclass
class StreamsMember:
    """A member of a streams group (one stream thread of a Kafka Streams instance)."""

    member_id: str
    process_id: str = ""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    assigned: TasksTuple = field(default_factory=TasksTuple)
    pending_revocation: TasksTuple = field(default_factory=TasksTuple)
    task_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    task_end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    session_deadline: float = 0.0
    #: the target epoch each active task (assigned or pending revocation) was given to this member
    #: at, as Kafka 4.4 keeps them (AssignmentEpochs in the current assignment record)
    active_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    #: the assignment last sent (None: send it on the next heartbeat)
    last_sent: TasksTuple | None = None


@dataclass
class StreamsHeartbeatResult:
    """What StreamsGroupHeartbeat answers (tasks None: unchanged, not sent)."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 10000
    task_offset_interval_ms: int = 60000
    status: list[tuple[int, str]] = field(default_factory=list)
    tasks: TasksTuple | None = None
    endpoint_information_epoch: int = 0
    partitions_by_endpoint: list[tuple[tuple[str, int], dict[str, set[int]], dict[str, set[int]]]] | None = None
    #: internal topics the handler should create
    to_create: dict[str, TopicInfo] = field(default_factory=dict)


class StreamsGroup:
    """A streams group: members, topology, group epoch and target assignment."""

    group_type = "streams"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.4 starts a streams group and its target assignment at epoch 1 (time 0), so the
        # first heartbeat, which always recomputes, writes epoch 2
        self.group_epoch = 1
        self.target_epoch = 1
        #: wall-clock ms of the last target computation (the target assignment metadata record)
        self.assignment_timestamp_ms = 0
        #: Kafka's metadata hash of the topics the topology needs that exist (the epoch record)
        self.metadata_hash = 0
        #: the assignment settings of the last epoch bump (LastAssignmentConfigs of the epoch record)
        self.last_assignment_configs: dict[str, str] = {}
        self._topic_hashes = metadata_hash.TopicHashes()
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, TasksTuple] = {}
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self.validated_topology_epoch = -1
        self.endpoint_information_epoch = 0
        self.shutdown_requested = False
        #: no assignment before this (monotonic seconds): group.streams.initial.rebalance.delay.ms
        self.assignment_not_before = 0.0
        #: when the target assignment was last computed (group.streams.assignment.interval.ms)
        self.last_assignment: float | None = None
        self.persisted: dict[bytes, bytes] = {}

    def is_empty(self) -> bool:
        return not self.members

    def state_name(self) -> str:
        """Kafka's StreamsGroupState: Empty, NotReady, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.configured is None or not self.configured.ready():
            return "NotReady"
        if self.group_epoch > self.target_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.state != STABLE or m.member_epoch != self.target_epoch:
                return "Reconciling"
        return "Stable"

    def subscribed_topic_names(self) -> set[str]:
        """Topics the group reads (for offset expiry)."""
        if self.topology is None:
            return set()
        return {t for s in self.topology.subtopologies.values()
                for t in (*s.source_topics, *(i.name for i in s.repartition_source_topics))}

    # ---------------------------------------------------------------- who holds what

    def _holders(self, exclude: str) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]],
                                               dict[tuple[str, int], set[str]]]:
        active: dict[tuple[str, int], str] = {}
        standby: dict[tuple[str, int], set[str]] = {}
        warmup: dict[tuple[str, int], set[str]] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for source in (m.assigned, m.pending_revocation):
                for s, ps in source.active.items():
                    for p in ps:
                        active[(s, p)] = m.process_id
                for s, ps in source.standby.items():
                    for p in ps:
                        standby.setdefault((s, p), set()).add(m.process_id)
                for s, ps in source.warmup.items():
                    for p in ps:
                        warmup.setdefault((s, p), set()).add(m.process_id)
        return active, standby, warmup

    # ---------------------------------------------------------------- reconciliation

    def reconcile(self, member: StreamsMember, owned: TasksTuple | None, delayed: bool = False) -> None:
        """Move `member` towards its target assignment (Kafka's streams CurrentAssignmentBuilder).

        `delayed`: the initial rebalance delay holds the first assignment back; as in Kafka the
        member reconciles towards an empty target at epoch max(1, the target epoch)."""
        target_epoch = max(1, self.target_epoch) if delayed else self.target_epoch
        target = TasksTuple() if delayed else self.target.get(member.member_id, TasksTuple())
        if member.state == STABLE:
            if member.member_epoch != target_epoch:
                self._next(member, member.member_epoch, owned, target, target_epoch)
        elif member.state == UNREVOKED_TASKS:
            if owned is None or owned.contains_any(member.pending_revocation):
                return
            self._next(member, member.member_epoch + 1, owned, target, target_epoch)
        else:
            self._next(member, member.member_epoch, owned, target, target_epoch)

    def _next(self, member: StreamsMember, epoch: int, owned: TasksTuple | None, target: TasksTuple,
              target_epoch: int) -> None:
        active_of, standby_of, warmup_of = self._holders(member.member_id)
        pid = member.process_id

        def unreleased_active(task: tuple[str, int]) -> bool:
            return task in active_of or pid in standby_of.get(task, ()) or pid in warmup_of.get(task, ())

        def unreleased_other(task: tuple[str, int]) -> bool:
            return active_of.get(task) == pid or pid in standby_of.get(task, ()) or pid in warmup_of.get(task, ())

        assigned, revoke, pending = TasksTuple(), TasksTuple(), TasksTuple()
        epochs = dict(member.active_epochs)
        unreleased = False
        for kind, check in (("active", unreleased_active), ("standby", unreleased_other),
                            ("warmup", unreleased_other)):
            cur: Tasks = getattr(member.assigned, kind)
            tgt: Tasks = getattr(target, kind)
            for s in set(cur) | set(tgt):
                c, t = cur.get(s, set()), tgt.get(s, set())
                keep, gone = c & t, c - t
                new = {p for p in t - keep if not check((s, p))}
                unreleased |= len(new) < len(t - keep)
                if keep:
                    getattr(assigned, kind)[s] = keep
                if gone:
                    getattr(revoke, kind)[s] = gone
                if new:
                    getattr(pending, kind)[s] = new
                    if kind == "active":
                        epochs.update({(s, p): target_epoch for p in new})
        member.previous_member_epoch = member.member_epoch
        if not revoke.is_empty() and (owned is None or owned.contains_any(revoke)):
            member.state = UNREVOKED_TASKS
            member.member_epoch = epoch
            member.assigned = assigned
            member.pending_revocation = revoke
            member.active_epochs = _epochs_of(epochs, assigned.active, revoke.active)
            return
        for kind in ("active", "standby", "warmup"):
            for s, ps in getattr(pending, kind).items():
                getattr(assigned, kind).setdefault(s, set()).update(ps)
        member.state = UNRELEASED_TASKS if unreleased else STABLE
        member.member_epoch = target_epoch
        member.assigned = assigned
        member.pending_revocation = TasksTuple()
        member.active_epochs = _epochs_of(epochs, assigned.active)

    # ---------------------------------------------------------------- target assignment

    def maybe_configure(self, partitions: Callable[[str], int | None]) -> bool:
        """Work the topology out against the topics as they are; True if that changed (the
        caller bumps the group epoch)."""
        if self.topology is None:
            self.configured = None
            return False
        if self.configured is not None:
            counts = {t: partitions(t) for t in self.configured.partition_counts}
            if counts == self.configured.partition_counts and self.configured.ready():
                return False
        before = self.configured
        self.configured = configure(self.topology, partitions)
        return before is None or (before.tasks, before.status, before.partition_counts) != (
            self.configured.tasks, self.configured.status, self.configured.partition_counts)

    def required_topics(self) -> set[str]:
        """Kafka's StreamsTopology.requiredTopics: source, repartition source and changelog topics."""
        if self.topology is None:
            return set()
        return {t for s in self.topology.subtopologies.values()
                for t in (*s.source_topics, *(i.name for i in (*s.repartition_source_topics,
                                                                *s.state_changelog_topics)))}

    def compute_metadata_hash(self, topic_meta: Callable[[str], tuple[bytes, int] | None]) -> int:
        """Kafka's StreamsGroup.computeMetadataHash over the required topics that exist."""
        metas = ((name, topic_meta(name)) for name in self.required_topics())
        return self._topic_hashes.group_hash((name, *meta) for name, meta in metas if meta is not None)

    def maybe_assign(self, coordinator: Any, now: float) -> None:
        """Recompute the target assignment if the group epoch moved past it."""
        if self.group_epoch <= self.target_epoch or now < self.assignment_not_before:
            return
        if self.interval_delays(coordinator, now):
            return
        tasks = self.configured.tasks if self.configured is not None and self.configured.ready() else {}
        stateful = self.topology.stateful() if self.topology is not None else set()
        standby = streams_cfg(coordinator, "group.streams.num.standby.replicas", self.group_id)
        members = [AssignmentMember(m.member_id, m.process_id, _copy(m.assigned.active), _copy(m.assigned.standby),
                                    _copy(m.assigned.warmup), dict(m.task_offsets))
                   for m in sorted(self.members.values(), key=lambda m: m.member_id)]
        result = assign(members, tasks, stateful, standby)
        self.target = {mid: TasksTuple(active, standby_tasks) for mid, (active, standby_tasks) in result.items()}
        self.target_epoch = self.group_epoch
        self.last_assignment = now
        self.assignment_timestamp_ms = coordinator.now_ms()
        if any(m.user_endpoint is not None for m in self.members.values()):
            self.endpoint_information_epoch += 1
        log.info("Computed the target assignment of streams group %s for epoch %d", self.group_id,
                 self.target_epoch)

    def interval_delays(self, coordinator: Any, now: float) -> bool:
        """Kafka computes a streams group's target at most once per assignment interval."""
        interval = streams_cfg(coordinator, "group.streams.assignment.interval.ms") / 1000
        return self.last_assignment is not None and now < self.last_assignment + interval

    def remove_member(self, member_id: str, reason: str) -> None:
        if self.members.pop(member_id, None) is None:
            return
        self.target.pop(member_id, None)
        self.group_epoch += 1
        log.info("Member %s left streams group %s: %s", member_id, self.group_id, reason)
        if not self.members:
            self.shutdown_requested = False

    def expire_sessions(self, coordinator: Any, now: float) -> None:
        """Remove members whose session timed out and reassign their tasks."""
        for member in list(self.members.values()):
            if now >= member.session_deadline:
                self.remove_member(member.member_id, "session timeout")
        self.maybe_assign(coordinator, now)
        for member in self.members.values():
            if member.state == UNRELEASED_TASKS or member.member_epoch != self.target_epoch:
                pass  # reconciled on the member's next heartbeat, with what it reports owning

    # ---------------------------------------------------------------- heartbeat

    def heartbeat(self, coordinator: Any, request: Any, *, client_id: str, client_host: str,
                  partitions: Callable[[str], int | None]) -> StreamsHeartbeatResult:
        """One StreamsGroupHeartbeat: join (epoch 0), leave (-1, -2 static) or heartbeat."""
        now = coordinator.monotonic()
        gid = self.group_id
        member_id = request.member_id
        epoch = request.member_epoch
        interval = streams_cfg(coordinator, "group.streams.heartbeat.interval.ms", gid)
        session_ms = streams_cfg(coordinator, "group.streams.session.timeout.ms", gid)
        if epoch in (-1, -2):
            if member_id not in self.members:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {gid}.")
            self.remove_member(member_id, "the member left")
            self.maybe_assign(coordinator, now)
            return StreamsHeartbeatResult(member_id=member_id, member_epoch=epoch)
        bump = False
        member = self.members.get(member_id)
        if epoch == 0:
            if member is None:
                if len(self.members) >= streams_cfg(coordinator, "group.streams.max.size"):
                    raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The streams group has reached its maximum capacity of "
                                     f"{streams_cfg(coordinator, 'group.streams.max.size')} members.")
                member = StreamsMember(member_id=member_id)
                if not self.members:
                    delay = streams_cfg(coordinator, "group.streams.initial.rebalance.delay.ms")
                    self.assignment_not_before = now + delay / 1000
                self.members[member_id] = member
                bump = True
            member.last_sent = None
        else:
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
            if epoch != member.member_epoch:
                owned = _owned(request)
                if not (epoch == member.previous_member_epoch and owned is not None
                        and _subset(owned, member.assigned)):
                    raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The streams group member has a smaller member epoch ({epoch}) than the one "
                                     f"known by the group coordinator ({member.member_epoch}). The member must "
                                     "abandon all its tasks and rejoin.")
        member.session_deadline = now + session_ms / 1000
        member.client_id, member.client_host = client_id, client_host
        bump |= self._update_member(member, request)
        status: list[tuple[int, str]] = []
        if request.topology is not None:
            topology = Topology.from_request(request.topology)
            if self.topology is None or (self.is_empty_but(member_id) and topology.epoch != self.topology.epoch):
                self.topology = topology
                self.configured = None
                bump = True
            elif topology.epoch == self.topology.epoch and topology != self.topology:
                raise GroupError(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH,
                                 f"Topology updated but topology epoch not incremented: {topology.epoch}")
        bump |= self.maybe_configure(partitions)
        topic_meta = getattr(coordinator, "_topic_meta", None)
        new_hash = self.compute_metadata_hash(topic_meta) if topic_meta is not None else 0
        bump |= new_hash != self.metadata_hash
        validated = self.topology.epoch if self.topology is not None and self.configured is not None \
            and self.configured.ready() else -1
        bump |= validated != self.validated_topology_epoch
        configs = assignment_configs(coordinator, gid)
        bump |= configs != self.last_assignment_configs
        if bump:
            # one bump per heartbeat, whatever moved (Kafka's streamsGroupHeartbeat)
            self.group_epoch += 1
            self.metadata_hash = new_hash
            self.validated_topology_epoch = validated
            self.last_assignment_configs = configs
        if request.shutdown_application:
            self.shutdown_requested = True
        self.maybe_assign(coordinator, now)
        delayed = self.group_epoch > self.target_epoch and now < self.assignment_not_before
        self.reconcile(member, _owned(request), delayed)
        if request.task_offsets is not None:
            member.task_offsets = {(o.subtopology_id, o.partition): o.offset for o in request.task_offsets}
        if request.task_end_offsets is not None:
            member.task_end_offsets = {(o.subtopology_id, o.partition): o.offset for o in request.task_end_offsets}
        result = StreamsHeartbeatResult(
            member_id=member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=interval,
            acceptable_recovery_lag=streams_cfg(coordinator, "group.streams.acceptable.recovery.lag"),
            task_offset_interval_ms=streams_cfg(coordinator, "group.streams.task.offset.interval.ms"),
            endpoint_information_epoch=self.endpoint_information_epoch)
        if self.topology is not None and member.topology_epoch < self.topology.epoch:
            status.append((STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                                           f"group's topology epoch {self.topology.epoch}."))
        if self.configured is not None and self.configured.status is not None:
            status.append(self.configured.status)
            result.to_create = dict(self.configured.to_create)
        if self.shutdown_requested:
            status.append((SHUTDOWN_APPLICATION, "A KafkaStreams instance encountered a fatal error and requested "
                                                 "a shutdown for the entire application."))
        if delayed:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
        elif self.group_epoch > self.target_epoch and self.interval_delays(coordinator, now):
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."))
        result.status = status
        if member.last_sent is None or member.last_sent != member.assigned:
            result.tasks = member.assigned.copy()
            member.last_sent = member.assigned.copy()
        if request.endpoint_information_epoch != self.endpoint_information_epoch:
            result.partitions_by_endpoint = self._partitions_by_endpoint()
        return result

    def is_empty_but(self, member_id: str) -> bool:
        return all(mid == member_id for mid in self.members)

    def _update_member(self, member: StreamsMember, request: Any) -> bool:
        """Apply the member's metadata from the request; True if the group epoch must move."""
        changed = False

        def update(attr: str, new: Any) -> None:
            nonlocal changed
            if new is not None and getattr(member, attr) != new:
                setattr(member, attr, new)
                changed = True

        update("instance_id", request.instance_id)
        update("rack_id", request.rack_id)
        update("process_id", request.process_id)
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.topology is not None:
            update("topology_epoch", request.topology.epoch)
        if request.user_endpoint is not None:
            update("user_endpoint", (request.user_endpoint.host, request.user_endpoint.port))
        if request.client_tags is not None:
            update("client_tags", {kv.key: kv.value for kv in request.client_tags})
        return changed

    def _partitions_by_endpoint(self) -> list:
        if self.configured is None or self.topology is None:
            return []
        out = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            if m.user_endpoint is None:
                continue
            active = self._topic_partitions(m.assigned.active)
            standby = self._topic_partitions(m.assigned.standby)
            out.append((m.user_endpoint, active, standby))
        return out

    def _topic_partitions(self, tasks: Tasks) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        assert self.topology is not None
        for sid, ps in tasks.items():
            sub = self.topology.subtopologies.get(sid)
            if sub is None:
                continue
            for topic in (*sub.source_topics, *(i.name for i in sub.repartition_source_topics)):
                out.setdefault(topic, set()).update(ps)
        return out

    # ---------------------------------------------------------------- offsets

    def validate_offset_commit(self, member_id: str, member_epoch: int, *, transactional: bool,
                               api_version: int) -> None:
        """Kafka's StreamsGroup.validateOffsetCommit; raises GroupError."""
        if member_epoch < 0 and not self.members:
            return
        if transactional and member_epoch == -1 and not member_id:
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                          f"{self.group_id}.")
        if member_epoch != member.member_epoch and member_epoch != member.previous_member_epoch:
            code = ErrorCode.STALE_MEMBER_EPOCH if not transactional or api_version >= 6 \
                else ErrorCode.ILLEGAL_GENERATION
            raise GroupError(code, f"The received member epoch {member_epoch} does not match the expected member "
                                   f"epoch {member.member_epoch}.")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.STALE_MEMBER_EPOCH)


def assignment_configs(coordinator: Any, group_id: str) -> dict[str, str]:
    """Kafka's streamsGroupAssignmentConfigs: the settings the assignor ran with."""
    # Kafka also names rack.aware.assignment.tags when set; Odradek's assignor has no rack tags
    return {"num.standby.replicas": str(streams_cfg(coordinator, "group.streams.num.standby.replicas", group_id))}


def _epochs_of(epochs: dict[tuple[str, int], int], *held: Tasks) -> dict[tuple[str, int], int]:
    return {(s, p): epochs[(s, p)] for tasks in held for s, ps in tasks.items() for p in ps if (s, p) in epochs}


def _task_ids(items: Any) -> Tasks | None:
    if items is None:
        return None
    out: Tasks = {}
    for t in items:
        out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


def _owned(request: Any) -> TasksTuple | None:
    """The tasks the member says it owns (None if it did not say)."""
    active = _task_ids(request.active_tasks)
    standby = _task_ids(request.standby_tasks)
    warmup = _task_ids(request.warmup_tasks)
    if active is None or standby is None or warmup is None:
        return None
    return TasksTuple(active, standby, warmup)


def _subset(owned: TasksTuple, assigned: TasksTuple) -> bool:
    for mine, theirs in ((owned.active, assigned.active), (owned.standby, assigned.standby),
                         (owned.warmup, assigned.warmup)):
        for s, ps in mine.items():
            if not ps <= theirs.get(s, set()):
                return False
    return True


def validate_heartbeat(request: Any) -> None:
    """The request checks of Kafka's GroupMetadataManager.throwIfStreamsGroupHeartbeatRequestIsInvalid."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.INVALID_REQUEST, message)

    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise invalid("RackId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided when joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when joining.")
        if request.active_tasks is None or request.standby_tasks is None or request.warmup_tasks is None:
            raise invalid("ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
        if request.process_id is None:
            raise invalid("ProcessId can't be null.")
    elif request.member_epoch < -2:
        raise invalid(f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2.")
    if not request.member_id and request.member_epoch != 0:
        raise invalid("MemberId can't be empty.")


def new_member_id() -> str:
    """A member id for a member that joined without one (the 4.4 client brings its own)."""
    return str(uuid.uuid4())


# ---------------------------------------------------------------------------------- coordinator side

def persist(coordinator: GroupCoordinator, group: StreamsGroup, deleted: bool = False) -> None:
    """Append what changed in a streams group since it was last written (records, tombstones)."""
    from . import records as rec
    from . import streams_records

    if coordinator.broker is None:
        return
    desired = {} if deleted else streams_records.desired_records(group)
    records = streams_records.changes(group, desired)
    if not records:
        return
    try:
        coordinator._append(group.group_id, rec.consumer_group_batch(records, coordinator.now_ms()))
    except GroupError:
        return  # logged by _append; the next change writes the full difference again
    group.persisted = desired


def streams_group_heartbeat(coordinator: GroupCoordinator, request: Any, *, client_id: str,
                            client_host: str) -> StreamsHeartbeatResult:
    """StreamsGroupHeartbeat on the coordinator: errors come back in the result."""
    try:
        coordinator._check_active(request.group_id)
        validate_heartbeat(request)
        group = coordinator.groups.get(request.group_id)
        if group is not None and not isinstance(group, StreamsGroup):
            from .classic import ClassicGroup, GroupState

            if isinstance(group, ClassicGroup) and group.is_in(GroupState.EMPTY) and request.member_epoch == 0:
                # an empty classic group (offsets only, or members all gone) becomes a streams group
                from . import records as rec

                coordinator._append(request.group_id, rec.cleanup_batch(
                    [(rec.group_metadata_key(request.group_id), None)], coordinator.now_ms(), coordinator.format))
                group = None
            else:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a streams group.")
        if group is None:
            if request.member_epoch != 0:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {request.group_id} not found.")
            group = StreamsGroup(request.group_id)
            coordinator.groups[request.group_id] = group
        try:
            return group.heartbeat(coordinator, request, client_id=client_id, client_host=client_host,
                                   partitions=coordinator.topic_partition_count)
        finally:
            persist(coordinator, group)
    except GroupError as exc:
        return StreamsHeartbeatResult(error=exc.code, error_message=str(exc) if str(exc) != exc.code.name else None)


def tick(coordinator: GroupCoordinator, group: StreamsGroup, now: float) -> None:
    """Session expiry and the delayed first assignment (from the coordinator's timer)."""
    before = len(group.members), group.group_epoch, group.target_epoch
    group.expire_sessions(coordinator, now)
    if (len(group.members), group.group_epoch, group.target_epoch) != before:
        persist(coordinator, group)


def collect(found: dict[str, dict[int, dict[str, Any]]], raw: dict[str, dict[bytes, bytes]],
            key_bytes: bytes, value_bytes: bytes | None) -> bool:
    """Note a streams group record read at load (see :func:`.streams_records.collect`)."""
    from . import streams_records

    return streams_records.collect(found, raw, key_bytes, value_bytes)


def load(coordinator: GroupCoordinator, found: dict[str, dict[int, dict[str, Any]]],
         raw: dict[str, dict[bytes, bytes]]) -> None:
    """Rebuild the streams groups read at load."""
    from . import streams_records

    deadline = coordinator.monotonic() + streams_cfg(coordinator, "group.streams.session.timeout.ms") / 1000
    streams_records.load(coordinator, found, raw, deadline, coordinator.topic_partition_count)


def tombstones(group: StreamsGroup) -> list[tuple[bytes, bytes | None]]:
    """Tombstones for every record of the group (DeleteGroups, expiry)."""
    from . import streams_records

    return streams_records.changes(group, {})
