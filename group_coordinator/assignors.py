"""Server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

Input: each member's subscribed topic names and the partition count of every topic;
output: member id -> {topic: set of partitions}. Both are deterministic (members and
topics sorted) so that every run over the same input gives the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, set[int]]]


def uniform_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
                   current: Mapping[str, Mapping[str, set[int]]] | None = None) -> Assignment:
    """Spread all subscribed partitions evenly, keeping current owners where balance allows.

    A member keeps up to its quota (the total of partitions it could get divided evenly, plus
    one for the first members when it does not divide) of what it already owns; the rest goes,
    partition by partition, to the eligible member with the fewest partitions.
    """
    members = sorted(subscriptions)
    result: Assignment = {m: {} for m in members}
    if not members:
        return result
    all_parts = sorted(
        (t, p) for t in {t for subs in subscriptions.values() for t in subs} if t in partitions
        for p in range(partitions[t])
    )
    count = dict.fromkeys(members, 0)
    total = len(all_parts)
    base, extra = divmod(total, len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    taken: set[tuple[str, int]] = set()
    for m in members:
        owned = sorted(
            (t, p) for t, ps in (current or {}).get(m, {}).items() for p in ps
            if t in subscriptions[m] and t in partitions and p < partitions[t]
        )
        for tp in owned:
            if count[m] >= quota[m] or tp in taken:
                continue
            taken.add(tp)
            result[m].setdefault(tp[0], set()).add(tp[1])
            count[m] += 1
    for tp in all_parts:
        if tp in taken:
            continue
        eligible = [m for m in members if tp[0] in subscriptions[m]]
        if not eligible:
            continue
        m = min(eligible, key=lambda x: (count[x], members.index(x)))
        result[m].setdefault(tp[0], set()).add(tp[1])
        count[m] += 1
    return result


def range_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
                 current: Mapping[str, Mapping[str, set[int]]] | None = None) -> Assignment:
    """Per topic, contiguous ranges in member order; the first members get one extra when uneven."""
    members = sorted(subscriptions)
    result: Assignment = {m: {} for m in members}
    topics = sorted({t for subs in subscriptions.values() for t in subs if t in partitions})
    for topic in topics:
        subscribers = [m for m in members if topic in subscriptions[m]]
        n = partitions[topic]
        base, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            if size:
                result[m][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
