"""The share groups' server-side "simple" assignor, choice for choice as Kafka 4.4's.

Share groups may give one partition to several members. Each partition is wanted by
``ceil(members / partitions)`` members (its desired sharing); each member is owed an even share of
``sharing * partitions`` assignments (the first members in order get the rounded-up counts). The
assignor keeps what members had where that fits, takes away what no longer fits (partitions of
unsubscribed topics, assignments beyond a member's share, members beyond a partition's sharing),
then hands the rest to the members still owed some. When all members subscribe to the same topics
this runs over all partitions at once; otherwise topic by topic over that topic's subscribers.

Every "first" and "next" here is an iteration of one of Kafka's hash tables, so the tables are
reproduced with their Java iteration order (:mod:`.share_hash_order`): member indices follow the
group's member-id table, partitions follow the (topic id, partition) hash.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..wire.primitives import Uuid
from .share_hash_order import JavaHashMap, JavaHashSet, copy_assignment, sized


@dataclass
class MemberSpec:
    """One member as the assignor sees it."""

    member_id: str
    #: subscribed topic ids, in the order the member's subscription set yields them
    topic_ids: list[Uuid]
    #: the member's previous target assignment: topic id -> JavaHashSet of partitions
    assignment: JavaHashMap = field(default_factory=lambda: JavaHashMap(0))


def simple_assign(members: list[MemberSpec], partition_count: Callable[[Uuid], int],
                  assignable: Callable[[Uuid, int], bool], homogeneous: bool) -> dict[str, JavaHashMap]:
    """member id -> its new target (topic id -> JavaHashSet of partitions). `members` are in the
    order the group hands them to the assignor; `assignable` says whether a partition's share
    state is initialized; `homogeneous` whether every member subscribes to the same topics."""
    if not members:
        return {}
    table = JavaHashMap()  # the member specs, keyed by member id
    for spec in members:
        table.put(spec.member_id, spec)
    ordered: list[MemberSpec] = [table[m] for m in table.keys()]
    builder = _Homogeneous if homogeneous else _Heterogeneous
    return builder(ordered, partition_count, assignable).build()


class _Base:
    def __init__(self, members: list[MemberSpec]) -> None:
        self.members = members
        self.n = len(members)
        self.old = JavaHashMap(sized(self.n))
        for i, spec in enumerate(members):
            self.old.put(i, spec.assignment)
        self.new = JavaHashMap(sized(self.n))

    def own(self, index: int) -> JavaHashMap:
        """The member's new assignment, copied from its old one the first time it changes."""
        mine = self.new.get(index)
        if mine is None:
            mine = copy_assignment(self.old[index])
            self.new.put(index, mine)
        return mine

    def result(self) -> dict[str, JavaHashMap]:
        return {spec.member_id: self.new.get(i) if i in self.new else self.old[i] for i, spec in enumerate(self.members)}


def _desired_counts(sharing: int, partitions: int, members: int) -> list[int]:
    """The even split of sharing * partitions assignments over `members` (first ones round up)."""
    precise = float(sharing * partitions) / members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(members)]


def _fill(unfilled: JavaHashSet, by_partition: JavaHashMap, sharing: int, give: Callable[[int, object], int],
          desired: Callable[[int], int]) -> None:
    """Hand out the partitions still short of their sharing, cycling over the members still owed
    some (a partition's own holders are skipped; it is not counted as held again meanwhile)."""
    if not len(unfilled):
        return
    order, pos, progressed = unfilled.keys(), 0, False
    for key in by_partition.keys():
        holders = by_partition[key]
        todo = sharing - len(holders)
        while todo > 0:
            while pos < len(order) and order[pos] not in unfilled:
                pos += 1
            if pos >= len(order):
                if not progressed:
                    break
                order, pos, progressed = unfilled.keys(), 0, False
                if not order:
                    break
            index = order[pos]
            pos += 1
            if index not in holders:
                held = give(index, key)
                todo -= 1
                progressed = True
                if held >= desired(index):
                    unfilled.remove(index)
        if not len(unfilled):
            break


class _Homogeneous(_Base):
    """Every member subscribes to the same topics: one pass over all their partitions."""

    def __init__(self, members: list[MemberSpec], partition_count: Callable[[Uuid], int],
                 assignable: Callable[[Uuid, int], bool]) -> None:
        super().__init__(members)
        self.topics = JavaHashSet.of(members[0].topic_ids)
        self.targets = [(t, p) for t in members[0].topic_ids for p in range(partition_count(t)) if assignable(t, p)]
        self.sharing = (self.n + len(self.targets) - 1) // len(self.targets) if self.targets else 0
        self.desired = _desired_counts(self.sharing, len(self.targets), self.n)
        self.by_partition = JavaHashMap(sized(len(self.targets)))
        self.by_member = JavaHashMap(sized(self.n))
        self.unfilled = JavaHashSet(sized(self.n))
        self.overfilled = JavaHashSet(sized(self.n))

    def build(self) -> dict[str, JavaHashMap]:
        if not self.members[0].topic_ids:
            return {}
        self._keep_subscribed()
        self._trim_members()
        self._trim_partitions()
        for tp in self.targets:
            self.by_partition.compute_if_absent(tp, JavaHashSet)
        _fill(self.unfilled, self.by_partition, self.sharing, self._give, self.desired.__getitem__)
        return self.result()

    def _keep_subscribed(self) -> None:
        for index in self.old.keys():
            old = self.old[index]
            mine = None
            held = 0
            want = self.desired[index]
            for topic_id in old.keys():
                if topic_id in self.topics:
                    for partition in old[topic_id].keys():
                        held += 1
                        self.by_partition.compute_if_absent((topic_id, partition), JavaHashSet).add(index)
                        self.by_member.compute_if_absent(index, JavaHashSet).add((topic_id, partition))
                        if held >= want and mine is None:
                            mine = copy_assignment(old)
                else:
                    if mine is None:
                        mine = copy_assignment(old)
                    mine.remove(topic_id)
            if mine is not None:
                self.new.put(index, mine)
            if held < want:
                self.unfilled.add(index)
            elif held > want:
                self.overfilled.add(index)

    def _trim_members(self) -> None:
        for index in self.overfilled.keys():
            want = self.desired[index]
            held = self.by_member[index]
            if len(held) <= want:
                continue
            for tp in held.keys():
                self.new[index][tp[0]].remove(tp[1])
                self.by_partition[tp].remove(index)
                held.remove(tp)
                if len(held) == want:
                    break

    def _trim_partitions(self) -> None:
        for tp in self.by_partition.keys():
            holders = self.by_partition[tp]
            count = len(holders)
            if count <= self.sharing:
                continue
            for index in holders.keys():
                partitions = self.own(index).get(tp[0])
                if partitions is not None and partitions.remove(tp[1]):
                    count -= 1
                    holders.remove(index)
                    self.by_member[index].remove(tp)
                    self.unfilled.add(index)
                if count <= self.sharing:
                    break

    def _give(self, index: int, tp: object) -> int:
        topic_id, partition = tp  # type: ignore[misc]
        self.own(index).compute_if_absent(topic_id, JavaHashSet).add(partition)
        held = self.by_member.compute_if_absent(index, JavaHashSet)
        held.add(tp)
        return len(held)


class _Heterogeneous(_Base):
    """Members subscribe to different topics: each topic over its own subscribers."""

    def __init__(self, members: list[MemberSpec], partition_count: Callable[[Uuid], int],
                 assignable: Callable[[Uuid, int], bool]) -> None:
        super().__init__(members)
        self.topics = JavaHashSet()
        for spec in members:
            for topic_id in spec.topic_ids:
                self.topics.add(topic_id)
        self.targets = JavaHashMap(sized(len(self.topics)))
        for topic_id in self.topics.keys():
            self.targets.put(topic_id, [p for p in range(partition_count(topic_id)) if assignable(topic_id, p)])
        self.subscribers = JavaHashMap(sized(len(self.topics)))
        for i, spec in enumerate(members):
            for topic_id in spec.topic_ids:
                self.subscribers.compute_if_absent(topic_id, list).append(i)

    def build(self) -> dict[str, JavaHashMap]:
        if not len(self.topics):
            return {}
        for topic_id in self.topics.keys():
            _TopicPass(self, topic_id).run()
        return self.result()


class _TopicPass:
    """One topic of the heterogeneous assignment."""

    def __init__(self, outer: _Heterogeneous, topic_id: Uuid) -> None:
        self.outer = outer
        self.topic_id = topic_id
        self.partitions: list[int] = outer.targets[topic_id]
        self.subscribers: list[int] = outer.subscribers[topic_id]
        self.by_partition = JavaHashMap(sized(len(self.partitions)))
        self.by_member = JavaHashMap(sized(len(self.subscribers)))
        count, subs = len(self.partitions), len(self.subscribers)
        self.sharing = (subs + count - 1) // count if count else 0
        self.desired = [0] * outer.n
        for i, share in enumerate(_desired_counts(self.sharing, count, subs)):
            self.desired[self.subscribers[i]] = share

    def run(self) -> None:
        outer, topic_id = self.outer, self.topic_id
        for index in outer.old.keys():
            old = outer.old[index]
            partitions = old.get(topic_id) if len(old) else None
            if partitions is None:
                continue
            for partition in partitions.keys():
                self.by_partition.compute_if_absent(partition, JavaHashSet).add(index)
                self.by_member.compute_if_absent(index, JavaHashSet).add(partition)
        for index in self.by_member.keys():
            held = self.by_member[index]
            want = self.desired[index]
            if len(held) <= want:
                continue
            for partition in held.keys():
                if len(held) <= want:
                    break
                self.by_partition[partition].remove(index)
                held.remove(partition)
                outer.own(index)[topic_id].remove(partition)
        for partition in self.by_partition.keys():
            holders = self.by_partition[partition]
            count = len(holders)
            if count <= self.sharing:
                continue
            for index in holders.keys():
                mine = outer.own(index).get(topic_id)
                if mine is not None and mine.remove(partition):
                    count -= 1
                    holders.remove(index)
                    self.by_member[index].remove(partition)
                if count <= self.sharing:
                    break
        for partition in self.partitions:
            self.by_partition.compute_if_absent(partition, lambda: JavaHashSet(sized(len(self.subscribers))))
        unfilled = JavaHashSet(sized(outer.n))
        for index in self.subscribers:
            held = self.by_member.get(index)
            if (len(held) if held is not None else 0) < self.desired[index]:
                unfilled.add(index)
        _fill(unfilled, self.by_partition, self.sharing, self._give, self.desired.__getitem__)

    def _give(self, index: int, partition: object) -> int:
        self.outer.own(index).compute_if_absent(self.topic_id, JavaHashSet).add(partition)
        held = self.by_member.compute_if_absent(index, JavaHashSet)
        held.add(partition)
        return len(held)
