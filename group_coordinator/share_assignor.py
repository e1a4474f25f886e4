"""The share groups' server-side "simple" assignor.

Share groups may give one partition to several members. With at least as many members as
partitions every member gets one partition and the partitions are shared as evenly as possible;
with fewer members each partition goes to one member and the members get balanced counts.
Members keep what they had where the balance allows (sticky), so a join or leave moves few
partitions. Members with the same subscription are assigned together.
"""

from __future__ import annotations

TopicPartitions = dict[str, set[int]]


def simple_assign(subscriptions: dict[str, set[str]], partition_counts: dict[str, int],
                  previous: dict[str, TopicPartitions]) -> dict[str, TopicPartitions]:
    """member id -> topic -> partitions, from each member's subscribed topics, the topics'
    partition counts and the previous target assignment."""
    out: dict[str, TopicPartitions] = {m: {} for m in subscriptions}
    by_subscription: dict[frozenset[str], list[str]] = {}
    for member, topics in subscriptions.items():
        existing = frozenset(t for t in topics if partition_counts.get(t))
        if existing:
            by_subscription.setdefault(existing, []).append(member)
    for topics, members in sorted(by_subscription.items(), key=lambda kv: sorted(kv[0])):
        partitions = [(t, p) for t in sorted(topics) for p in range(partition_counts[t])]
        members = sorted(members)
        if len(members) >= len(partitions):
            chosen = _share(members, partitions, previous)
        else:
            chosen = _split(members, partitions, previous)
        for member, tps in chosen.items():
            for topic, partition in tps:
                out[member].setdefault(topic, set()).add(partition)
    return out


def _had(previous: dict[str, TopicPartitions], member: str, tp: tuple[str, int]) -> bool:
    return tp[1] in previous.get(member, {}).get(tp[0], ())


def _share(members: list[str], partitions: list[tuple[str, int]],
           previous: dict[str, TopicPartitions]) -> dict[str, list[tuple[str, int]]]:
    """One partition per member; partition i is shared by len(members)//len(partitions) members
    (one more for the first len(members) % len(partitions))."""
    base, extra = divmod(len(members), len(partitions))
    room = {tp: base + (1 if i < extra else 0) for i, tp in enumerate(partitions)}
    chosen: dict[str, list[tuple[str, int]]] = {}
    for member in members:
        for tp in partitions:
            if room[tp] > 0 and _had(previous, member, tp):
                chosen[member] = [tp]
                room[tp] -= 1
                break
    for member in members:
        if member not in chosen:
            tp = max(partitions, key=lambda t: (room[t], -partitions.index(t)))
            chosen[member] = [tp]
            room[tp] -= 1
    return chosen


def _split(members: list[str], partitions: list[tuple[str, int]],
           previous: dict[str, TopicPartitions]) -> dict[str, list[tuple[str, int]]]:
    """Each partition to one member, member counts differing by at most one."""
    base, extra = divmod(len(partitions), len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    chosen: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    free = []
    for tp in partitions:
        holder = next((m for m in members if _had(previous, m, tp) and len(chosen[m]) < quota[m]), None)
        if holder is None:
            free.append(tp)
        else:
            chosen[holder].append(tp)
    for tp in free:
        member = min(members, key=lambda m: (len(chosen[m]) - quota[m], members.index(m)))
        chosen[member].append(tp)
    return chosen
