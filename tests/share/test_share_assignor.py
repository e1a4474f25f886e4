"""The simple assignor's promises (compat-tests/test_share_groups_assignor.py compares its exact
choices with Kafka 4.4's own assignor) and the Java hash-table orders it relies on."""

from __future__ import annotations

import math
import random

from odradek.group_coordinator.share_assignor import MemberSpec, simple_assign
from odradek.group_coordinator.share_hash_order import JavaHashMap, JavaHashSet
from odradek.logstore.java_hash import string_hash
from odradek.wire.primitives import Uuid


def _plain(assignment: JavaHashMap) -> set[tuple[Uuid, int]]:
    return {(t, p) for t in assignment.keys() for p in assignment[t].keys()}


def _run(rng: random.Random, members: list[str], topics: dict[Uuid, int],
         old: dict[str, set[tuple[Uuid, int]]]) -> dict[str, set[tuple[Uuid, int]]]:
    specs = []
    for m in members:
        mine = JavaHashMap()
        for t, p in sorted(old.get(m, ()), key=lambda tp: (tp[0].bytes, tp[1])):
            mine.compute_if_absent(t, JavaHashSet).add(p)
        specs.append(MemberSpec(m, list(topics), mine))
    result = simple_assign(specs, topics.__getitem__, lambda t, p: True, homogeneous=True)
    return {m: _plain(a) for m, a in result.items()}


def test_every_partition_is_held_and_shared_evenly():
    rng = random.Random(7)
    for _ in range(300):
        topics = {Uuid(rng.randbytes(16)): rng.randint(1, 6) for _ in range(rng.randint(1, 3))}
        total = sum(topics.values())
        members = [f"m{i}-{rng.randrange(1000)}" for i in range(rng.randint(1, 12))]
        members = list(dict.fromkeys(members))
        got = _run(rng, members, topics, {})
        sharing = math.ceil(len(members) / total)
        holders: dict[tuple[Uuid, int], int] = {}
        for parts in got.values():
            for tp in parts:
                holders[tp] = holders.get(tp, 0) + 1
        assert set(holders) == {(t, p) for t, n in topics.items() for p in range(n)}
        assert all(h == sharing for h in holders.values())
        counts = sorted(len(p) for p in got.values())
        assert counts[-1] - counts[0] <= 1, counts


def test_a_joining_member_gets_a_share_and_the_others_keep_most():
    rng = random.Random(11)
    for _ in range(200):
        topics = {Uuid(rng.randbytes(16)): rng.randint(2, 8)}
        members = [f"w{i}" for i in range(rng.randint(1, 5))]
        before = _run(rng, members, topics, {})
        after = _run(rng, [*members, "newcomer"], topics, before)
        assert after["newcomer"]
        counts = sorted(len(p) for p in after.values())
        assert counts[-1] - counts[0] <= 1, after
        # what moves is about what the newcomer takes (plus rounding), not a reshuffle
        moved = sum(len(after[m] - before[m]) for m in members)
        assert moved <= len(after["newcomer"]) + len(members), (before, after)


def test_java_orders():
    # String.hashCode as Java documents it: s[0]*31^(n-1) + ... + s[n-1]
    assert string_hash("hello") == 99162322
    assert string_hash("") == 0
    # put appends within a bucket; computeIfAbsent grows the table first and prepends
    a, b = 1, 17  # the same bucket of a 16-bucket table
    m = JavaHashMap()
    m.put(a)
    m.put(b)
    assert m.keys() == [a, b]
    m = JavaHashMap()
    m.compute_if_absent(a, list)
    m.compute_if_absent(b, list)
    assert m.keys() == [b, a]
