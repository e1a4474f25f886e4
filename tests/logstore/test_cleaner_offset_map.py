"""The cleaner's offset map (`logstore.offset_map`): a table of key digests and offsets in flat
arrays that answers as a dict of key -> latest offset would, never grows past the slots of
`log.cleaner.dedupe.buffer.size`, and knows exactly when it is full."""

from __future__ import annotations

import random

import pytest

from odradek.logstore.offset_map import BYTES_PER_ENTRY, STAGE_LIMIT, OffsetMap, fixed_digests


def _keys(rng: random.Random, n: int) -> list[bytes]:
    # short keys (their own table form), digested long keys, keys that differ only in padding
    # bytes or length, the empty key
    return [rng.choice((b"k%d" % rng.randrange(n), b"a-long-key-%030d" % rng.randrange(n), b"", b"\0", b"\0\0",
                        bytes(15), b"x" * 16)) for _ in range(3 * n)]


@pytest.mark.parametrize("seed", range(6))
def test_map_answers_as_a_dict_of_latest_offsets(seed: int) -> None:
    rng = random.Random(seed)
    m = OffsetMap(BYTES_PER_ENTRY * rng.choice((40, 700, 200_000)))
    limit = int(m.slots * 0.9)
    n = min(limit, 5000)
    ref: dict[bytes, int] = {}
    tombstones = []
    for offset, key in enumerate(_keys(rng, n)):
        if key not in ref and not m.has_room(limit):
            break
        tomb = rng.random() < 0.1
        m.put(key, offset, tomb)
        ref[key] = offset
        if tomb:
            tombstones.append(offset)
        if rng.random() < 0.02:
            m.flush()
    assert m.size == len(ref)
    assert all(m.get(k) == v for k, v in ref.items())
    assert m.get(b"never put") == -1
    marks = m.latest_marks(0)
    held = set(ref.values())
    assert [i for i, x in enumerate(marks) if x] == sorted(held)
    assert [i for i, x in enumerate(marks) if x == 2] == sorted(held & set(tombstones))
    m.clear()
    assert (m.size, m.latest_offset, m.get(next(iter(ref)))) == (0, -1, -1)


def test_table_stays_within_the_dedupe_buffer() -> None:
    buffer = 10_000 * BYTES_PER_ENTRY
    m = OffsetMap(buffer)
    assert m.slots == 10_000
    for i in range(9_000):  # Kafka's full point at the default load factor 0.9
        m.put(b"key-%06d" % i, i)
    assert m.size == 9_000
    assert m._k0.nbytes + m._k1.nbytes + m._offsets.nbytes <= buffer
    # a small map takes a small table
    small = OffsetMap(128 * 1024 * 1024)
    small.put(b"k", 1)
    assert small.size == 1 and small._offsets.nbytes < 1 << 20


def test_full_point_is_exact_with_staged_updates() -> None:
    m = OffsetMap(100 * BYTES_PER_ENTRY)
    for i in range(89):
        m.put(b"k%d" % i, i)
    m.flush()
    # updates of held keys are staged too; they are not new keys
    for i in range(89):
        m.entries[b"k%d" % i] = 100 + i
    assert m.has_room(90)
    m.put(b"new", 200)
    assert not m.has_room(90) and m.size == 90 and m.get(b"k3") == 103


def test_staging_is_bounded() -> None:
    m = OffsetMap(128 * 1024 * 1024)
    for i in range(STAGE_LIMIT + 10):
        m.put(b"key-%08d" % i, i)
    assert len(m.entries) < STAGE_LIMIT
    assert m.size == STAGE_LIMIT + 10


def test_table_form_of_keys() -> None:
    digest = bytes(range(16))
    rows = fixed_digests([b"ab", digest, b"ab\0"])
    raw = rows.tobytes()
    assert raw[:16] == b"ab" + bytes(13) + b"\x02"
    assert raw[16:32] == digest
    assert raw[32:48] == b"ab" + bytes(13) + b"\x03"
