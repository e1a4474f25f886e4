"""Issue #12: blocking work leaves the event loop, long-polling fetches wake per partition.

The checks are about where work runs (the identity of the thread) and who gets woken, not about
timings: an in-process broker runs its Trio loop in the thread named ``odradek-broker``.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from odradek import sender_pool, sender_process, server
from odradek.handlers import fetch as fetch_handler
from odradek.handlers import metadata as metadata_handler
from odradek.handlers import topics as topics_handler
from odradek.handlers.fetch_sessions import AppendWaiters
from odradek.kraft.log import MetadataLog
from odradek.logstore.manager import LogManager
from odradek.logstore.offset_index import OffsetIndex
from odradek.logstore.partition_log import PartitionLog
from odradek.logstore.time_index import TimeIndex
from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire import schema
from odradek.wire.protocol import encode_request, request_class
from odradek.wire.records import SimpleRecord, build_batch

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 19, 20, 37, 60
PRODUCE, FETCH, METADATA = 0, 1, 3


def loop_thread_id() -> int:
    (thread,) = [t for t in threading.enumerate() if t.name == "odradek-broker"]
    return thread.ident


@contextmanager
def recording_threads(monkeypatch, owner, name: str):
    """Record the thread ident of every call of owner.name."""
    seen: list[int] = []
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        seen.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    yield seen


@pytest.fixture
def broker_conn():
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            yield running, conn
        finally:
            conn.close()


def create_topic(conn: BrokerConnection, name: str, partitions: int) -> None:
    cls = request_class(CREATE_TOPICS)
    response = conn.send(CREATE_TOPICS, cls(
        topics=[cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=30000))
    assert [t.error_code for t in response.topics] == [0]


def test_create_topics_makes_the_logs_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    with recording_threads(monkeypatch, PartitionLog, "open") as opened, \
            recording_threads(monkeypatch, PartitionLog, "become_leader") as leaders:
        create_topic(conn, "offloaded", 4)
    loop = loop_thread_id()
    assert len(opened) == 4 and len(leaders) == 4
    assert loop not in opened and loop not in leaders
    broker = running.broker
    assert broker.metadata.get("offloaded").partitions == 4
    for index in range(4):
        plog = broker.partition_log("offloaded", index)
        assert plog is not None and plog.topic_id == broker.metadata.get("offloaded").topic_id.bytes
        assert plog.leader_epoch_cache.latest_epoch == broker.partition_epoch_in_metadata("offloaded", index)


def test_create_partitions_makes_the_new_logs_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    create_topic(conn, "growing", 1)
    cls = request_class(CREATE_PARTITIONS)
    with recording_threads(monkeypatch, PartitionLog, "open") as opened:
        response = conn.send(CREATE_PARTITIONS, cls(
            topics=[cls.CreatePartitionsTopic(name="growing", count=3, assignments=None)], timeout_ms=30000))
    assert [r.error_code for r in response.results] == [0]
    assert len(opened) == 2 and loop_thread_id() not in opened
    assert running.broker.metadata.get("growing").partitions == 3
    assert running.broker.partition_log("growing", 2) is not None


def test_delete_topics_does_the_file_work_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    create_topic(conn, "doomed", 3)
    log_dir = running.broker.partition_log("doomed", 0).dir
    cls = request_class(DELETE_TOPICS)
    with recording_threads(monkeypatch, LogManager, "finish_delete") as finished, \
            recording_threads(monkeypatch, PartitionLog, "close") as closed:
        response = conn.send(DELETE_TOPICS, cls(topics=[cls.DeleteTopicState(name="doomed")], timeout_ms=30000),
                             version=6)
    assert [r.error_code for r in response.responses] == [0]
    loop = loop_thread_id()
    assert finished and loop not in finished
    assert len(closed) == 3 and loop not in closed
    assert running.broker.metadata.get("doomed") is None
    assert running.broker.partition_log("doomed", 0) is None
    assert not log_dir.exists()


def test_topic_changes_fsync_the_metadata_log_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    store = running.broker.metadata_store
    with recording_threads(monkeypatch, MetadataLog, "flush") as flushed:
        create_topic(conn, "recorded", 2)
        created = list(flushed)
        cls = request_class(CREATE_PARTITIONS)
        response = conn.send(CREATE_PARTITIONS, cls(
            topics=[cls.CreatePartitionsTopic(name="recorded", count=3, assignments=None)], timeout_ms=30000))
        assert [r.error_code for r in response.results] == [0]
        grown = flushed[len(created):]
        cls = request_class(DELETE_TOPICS)
        response = conn.send(DELETE_TOPICS, cls(topics=[cls.DeleteTopicState(name="recorded")], timeout_ms=30000),
                             version=6)
        assert [r.error_code for r in response.responses] == [0]
        deleted = flushed[len(created) + len(grown):]
    loop = loop_thread_id()
    for fsyncs in (created, grown, deleted):
        assert fsyncs and loop not in fsyncs
    # applied once on disk: the image has the change, and a restart would replay the same
    assert store.image.topic("recorded") is None
    assert store.log.log_end_offset == store.log.plog.recovery_point


def test_the_first_topic_change_compiles_its_records_codecs_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    for key in [k for k in schema._CODECS if k[0] in ("TopicRecord", "ConfigRecord", "PartitionRecord")]:
        monkeypatch.delitem(schema._CODECS, key)
    monkeypatch.setattr(topics_handler, "_warm_changes", set())
    with recording_threads(monkeypatch, schema._Compiler, "build") as built:
        create_topic(conn, "compiled", 1)
    assert len(built) == 3 and loop_thread_id() not in built
    assert running.broker.metadata_store.image.topic("compiled") is not None


def test_deleted_logs_are_freed_in_a_worker_thread(broker_conn):
    running, conn = broker_conn
    create_topic(conn, "freed", 3)
    freed: list[int] = []
    for index in range(3):
        weakref.finalize(running.broker.partition_log("freed", index), lambda: freed.append(threading.get_ident()))
    cls = request_class(DELETE_TOPICS)
    response = conn.send(DELETE_TOPICS, cls(topics=[cls.DeleteTopicState(name="freed")], timeout_ms=30000),
                         version=6)
    assert [r.error_code for r in response.responses] == [0]
    assert len(freed) == 3 and loop_thread_id() not in freed


def test_metadata_of_every_topic_reuses_the_topics_encoded_entries(broker_conn, monkeypatch):
    running, conn = broker_conn
    for name, partitions in (("listed-a", 3), ("listed-b", 40)):
        create_topic(conn, name, partitions)
    encoded: list[tuple[int, str]] = []
    original = metadata_handler.encode_struct

    def encode_struct(message, version, struct_name, obj):
        encoded.append((version, obj.name))
        return original(message, version, struct_name, obj)

    monkeypatch.setattr(metadata_handler, "encode_struct", encode_struct)
    cls = request_class(METADATA)
    answers = []
    for version in (12, 12, 9):
        request = cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        answers.append(conn.send(METADATA, request, version=version))
    for answer in answers:
        assert {t.name: len(t.partitions) for t in answer.topics} == {"listed-a": 3, "listed-b": 40}
        assert [p.partition_index for p in next(t for t in answer.topics if t.name == "listed-b").partitions] == list(
            range(40))
    # each topic encoded once per version: the second request at v12 reused the bytes
    assert sorted(encoded) == [(9, "listed-a"), (9, "listed-b"), (12, "listed-a"), (12, "listed-b")]


def test_a_new_api_version_compiles_its_codecs_in_a_worker_thread(broker_conn, monkeypatch):
    running, conn = broker_conn
    version = conn.version_for(DESCRIBE_CLUSTER)
    for suffix in ("Request", "Response"):
        monkeypatch.delitem(schema._CODECS, ("DescribeCluster" + suffix, version), raising=False)
    monkeypatch.setattr(server, "_warm_codecs", set())
    with recording_threads(monkeypatch, schema._Compiler, "build") as built:
        response = conn.send(DESCRIBE_CLUSTER, request_class(DESCRIBE_CLUSTER)(), version=version)
    assert response.error_code == 0
    assert len(built) == 2 and loop_thread_id() not in built


def test_append_waiters_wake_only_the_fetches_of_the_partition():
    async def main():
        waiters = AppendWaiters()
        woken: dict[str, bool] = {}

        async def wait(name, partitions):
            woken[name] = await waiters.wait(10, partitions)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "p0", [("t", 0)])
            nursery.start_soon(wait, "p1", [("t", 1), ("u", 0)])
            nursery.start_soon(wait, "any", None)
            await trio.testing.wait_all_tasks_blocked()
            assert waiters.waiting() == 3
            waiters.notify([("t", 1)])
            await trio.testing.wait_all_tasks_blocked()
            assert woken == {"p1": True, "any": True}
            waiters.notify([("u", 0)])  # nobody waits on it any more
            await trio.testing.wait_all_tasks_blocked()
            assert waiters.waiting() == 1
            waiters.notify(None)  # coordinator records: everybody
        assert woken == {"p0": True, "p1": True, "any": True}
        assert waiters.waiting() == 0
        assert await waiters.wait(0.01, [("t", 0)]) is False

    trio.run(main)


def test_a_long_poll_fetch_is_not_woken_by_appends_to_other_partitions(broker_conn, monkeypatch):
    running, conn = broker_conn
    create_topic(conn, "wakeups", 2)
    reads: list[int] = []
    original = fetch_handler._read_all

    def counting(ctx, keys, *args, **kwargs):
        if any(topic == "wakeups" for topic, _ in keys):
            reads.append(len(keys))
        return original(ctx, keys, *args, **kwargs)

    monkeypatch.setattr(fetch_handler, "_read_all", counting)
    cls = request_class(FETCH)
    request = cls(replica_id=-1, max_wait_ms=20000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                      topic="wakeups", topic_id=running.broker.metadata.get("wakeups").topic_id,
                      partitions=[cls.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    result: dict = {}
    fetcher = BrokerConnection(running.host, running.port)

    def do_fetch():
        result["response"] = fetcher.send(FETCH, request)

    thread = threading.Thread(target=do_fetch)
    thread.start()
    try:
        waiters = running.broker.append_waiters
        deadline = time.monotonic() + 10
        while not waiters.waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waiters.waiting() == 1
        produce(conn, "wakeups", 1)  # another partition: the fetch keeps waiting
        assert thread.is_alive() and reads == [1]
        produce(conn, "wakeups", 0)
        thread.join(10)
    finally:
        fetcher.close()
    assert not thread.is_alive()
    (topic,) = result["response"].responses
    assert [p.partition_index for p in topic.partitions] == [0] and topic.partitions[0].high_watermark == 1
    assert reads == [1, 1]  # the first read and the one after the append to partition 0


def produce(conn: BrokerConnection, topic: str, partition: int) -> None:
    cls = request_class(PRODUCE)
    batch = bytearray(build_batch([SimpleRecord(b"value", timestamp=int(time.time() * 1000))]))
    response = conn.send(PRODUCE, cls(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        cls.TopicProduceData(name=topic, partition_data=[cls.PartitionProduceData(index=partition, records=batch)])]))
    assert response.responses[0].partition_responses[0].error_code == 0


@pytest.mark.parametrize("index_class, entry", [(OffsetIndex, 8), (TimeIndex, 12)])
def test_index_pages_are_written_before_the_map_stores_into_them(tmp_path, index_class, entry):
    """Entries are stored through the mmap after pwrite has made the page real: the bytes on disk
    are the entries followed by zeros, whatever page boundary an entry crosses."""
    index = index_class(tmp_path / f"0.{index_class.__name__}", 0, max_index_size=64 * 1024)
    count = 1000  # several pages; 12-byte entries straddle page boundaries
    for i in range(count):
        if index_class is OffsetIndex:
            index.append(i + 1, i * 100)
        else:
            index.maybe_append(1000 + i, i + 1)
    assert index.entries == count
    index.flush()
    data = (tmp_path / f"0.{index_class.__name__}").read_bytes()
    assert len(data) == 64 * 1024 - (64 * 1024) % entry
    assert data[count * entry:] == bytes(len(data) - count * entry)
    for i in (0, 341, 342, 511, 512, count - 1):
        if index_class is OffsetIndex:
            assert index.entry(i) == (i + 1, i * 100)
        else:
            assert int.from_bytes(data[i * 12:i * 12 + 8], "big") == 1000 + i
    index.trim_to_valid_size()
    index.resize(64 * 1024)  # active again: the cut pages come back as holes, entries stay
    if index_class is OffsetIndex:
        index.append(count + 1, count * 100)
        assert index.entry(count) == (count + 1, count * 100)
    index.close()
    assert len((tmp_path / f"0.{index_class.__name__}").read_bytes()) == (count + (index_class is OffsetIndex)) * entry


@pytest.mark.parametrize(("key_type", "topic", "partitions_key"), [
    (0, "__consumer_offsets", "offsets.topic.num.partitions"),
    (1, "__transaction_state", "transaction.state.log.num.partitions"),
])
def test_find_coordinator_makes_the_internal_topic_logs_in_a_worker_thread(broker_conn, monkeypatch, key_type,
                                                                           topic, partitions_key):
    running, conn = broker_conn
    find = request_class(10)
    with recording_threads(monkeypatch, PartitionLog, "open") as opened:
        response = conn.send(10, find(key="first-use", key_type=key_type), version=3)
    # made on first use; like Kafka, that answer asks the client to retry
    assert (response.error_code, response.node_id) == (15, -1)
    partitions = int(running.broker.config.get(partitions_key))
    assert len(opened) == partitions and loop_thread_id() not in opened
    assert running.broker.metadata.get(topic).partitions == partitions
    assert all(running.broker.partition_log(topic, i) is not None for i in range(partitions))
    # a second FindCoordinator finds it made: nothing new is opened
    with recording_threads(monkeypatch, PartitionLog, "open") as again:
        assert conn.send(10, find(key="second", key_type=key_type), version=3).error_code == 0
    assert again == []


def _produce_batches(conn: BrokerConnection, topic: str, batches: int, records: int, size: int) -> None:
    cls = request_class(PRODUCE)
    for i in range(batches):
        batch = bytearray(build_batch([SimpleRecord(bytes([i % 256]) * size, timestamp=int(time.time() * 1000))
                                       for _ in range(records)]))
        response = conn.send(PRODUCE, cls(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
            cls.TopicProduceData(name=topic, partition_data=[cls.PartitionProduceData(index=0, records=batch)])]))
        assert response.responses[0].partition_responses[0].error_code == 0


def _fetch_request(running, topic: str, max_bytes: int):
    cls = request_class(FETCH)
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
               session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                   topic=topic, topic_id=running.broker.metadata.get(topic).topic_id,
                   partitions=[cls.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes)])])


@contextmanager
def recording_sender_jobs(monkeypatch):
    """Record the answer of every job handed to a sender process (None: no process took it). A
    client can have the whole response before the broker has read the process's answer: the list
    is only returned once every job was answered."""
    answers: list = []
    original = sender_pool.SenderPool.send

    async def wrapper(self, out_fd, items):
        answers.append("pending")
        answer = answers[-1] = await original(self, out_fd, items)
        return answer

    def answered() -> list:
        deadline = time.monotonic() + 10
        while "pending" in answers and time.monotonic() < deadline:
            time.sleep(0.01)
        return answers

    monkeypatch.setattr(sender_pool.SenderPool, "send", wrapper)
    yield answered


def _sender_pids() -> set[int]:
    """The sender processes this (test) process started and that still run."""
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"sender_process.py" in cmdline:
            children.add(int(stat.parent.name))
    return children


def test_a_big_fetch_response_is_sent_from_a_sender_process(broker_conn, monkeypatch):
    """Segment data of THREAD_SEND_BYTES or more leaves the loop and the broker's GIL: a sender
    process copies it into the socket. Smaller responses are sent by the loop itself."""
    running, conn = broker_conn
    create_topic(conn, "big-fetch", 1)
    _produce_batches(conn, "big-fetch", batches=4, records=1000, size=1000)  # ~4 MB in the segment
    with recording_sender_jobs(monkeypatch) as answers, \
            recording_threads(monkeypatch, server, "_send_blocking") as threads:
        small = conn.send(FETCH, _fetch_request(running, "big-fetch", 1 << 20))
        assert answers() == []
        big = conn.send(FETCH, _fetch_request(running, "big-fetch", 16 << 20))
        assert answers() == [(sender_process.STATUS_SENT, "")] and threads == []
    assert len(_sender_pids()) == 1
    small_records = small.responses[0].partitions[0].records
    big_records = big.responses[0].partitions[0].records
    assert 0 < len(small_records) < server.THREAD_SEND_BYTES <= len(big_records)
    # the same bytes as the segment holds, whichever path sent them
    log_file = running.broker.partition_log("big-fetch", 0).segments[0].log_path
    assert bytes(big_records) == log_file.read_bytes()
    assert bytes(small_records) == log_file.read_bytes()[:len(small_records)]


def _big_fetches_on_a_fresh_broker(monkeypatch, fetches: int) -> list[int]:
    """Fetch ~4 MB `fetches` times from a new broker; each answer must hold the segment's bytes.
    The threads that ran _send_blocking."""
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            create_topic(conn, "big-fetch", 1)
            _produce_batches(conn, "big-fetch", batches=4, records=1000, size=1000)
            with recording_threads(monkeypatch, server, "_send_blocking") as senders:
                responses = [conn.send(FETCH, _fetch_request(running, "big-fetch", 16 << 20))
                             for _ in range(fetches)]
        finally:
            conn.close()
        log_file = running.broker.partition_log("big-fetch", 0).segments[0].log_path
        for response in responses:
            assert bytes(response.responses[0].partitions[0].records) == log_file.read_bytes()
        assert loop_thread_id() not in senders
    return senders


def test_without_sender_processes_a_big_fetch_response_is_sent_from_a_worker_thread(monkeypatch):
    """Where sender processes are off (or cannot start), a worker thread sends instead."""
    monkeypatch.setattr(sender_pool, "MAX_PROCESSES", 0)
    assert len(_big_fetches_on_a_fresh_broker(monkeypatch, 1)) == 1


def test_a_sender_process_that_cannot_start_leaves_the_sends_to_worker_threads(monkeypatch, tmp_path, caplog):
    """No program to run (a broken install): the job it never read is sent by a worker thread,
    the connection lives on, and no new process is tried for the next responses."""
    monkeypatch.setattr(sender_pool, "_PROGRAM", str(tmp_path / "missing.py"))
    assert len(_big_fetches_on_a_fresh_broker(monkeypatch, 2)) == 2
    assert caplog.text.count("A sender process ended before it was ready") == 1
    assert _sender_pids() == set()


def test_a_sender_process_serves_other_consumers_while_one_does_not_read(monkeypatch):
    """One process, two jobs: a client that reads nothing more keeps its job waiting for its
    socket, and another consumer's big response is sent meanwhile."""
    monkeypatch.setattr(sender_pool, "MAX_PROCESSES", 1)
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        stalled = socket.socket()
        try:
            create_topic(conn, "big-fetch", 1)
            _produce_batches(conn, "big-fetch", batches=4, records=1000, size=1000)
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect((running.host, running.port))
            stalled.sendall(b"".join(bytes(p) for p in encode_request(
                conn.version_for(FETCH), 1, _fetch_request(running, "big-fetch", 64 << 20), client_id="stalled")))
            time.sleep(0.5)  # its answer waits in the process for the client
            assert len(_sender_pids()) == 1
            for _ in range(3):
                big = conn.send(FETCH, _fetch_request(running, "big-fetch", 16 << 20))
                log_file = running.broker.partition_log("big-fetch", 0).segments[0].log_path
                assert bytes(big.responses[0].partitions[0].records) == log_file.read_bytes()
            assert len(_sender_pids()) == 1
        finally:
            stalled.close()
            conn.close()


def test_a_sender_process_that_dies_closes_its_connection_and_is_replaced(broker_conn, caplog):
    """A killed sender process: the connection whose response it was sending is closed (a partial
    frame cannot be finished) with a log line; the next big response starts a new process."""
    running, conn = broker_conn
    create_topic(conn, "big-fetch", 1)
    _produce_batches(conn, "big-fetch", batches=4, records=1000, size=1000)
    conn.send(FETCH, _fetch_request(running, "big-fetch", 16 << 20))
    (first,) = _sender_pids()
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect((running.host, running.port))
    stalled.sendall(b"".join(bytes(p) for p in encode_request(
        conn.version_for(FETCH), 1, _fetch_request(running, "big-fetch", 64 << 20), client_id="stalled")))
    time.sleep(0.5)  # the answer does not fit in the socket buffers: the process waits for the client
    os.kill(first, signal.SIGKILL)
    stalled.settimeout(10)
    received = 0
    while chunk := stalled.recv(1 << 20):  # whatever was sent, then end of stream
        received += len(chunk)
    stalled.close()
    assert 0 < received < 4 << 20
    deadline = time.monotonic() + 10
    while "sender process ended while sending" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "The sender process ended while sending to" in caplog.text
    big = conn.send(FETCH, _fetch_request(running, "big-fetch", 16 << 20))
    log_file = running.broker.partition_log("big-fetch", 0).segments[0].log_path
    assert bytes(big.responses[0].partitions[0].records) == log_file.read_bytes()
    assert first not in _sender_pids() and len(_sender_pids()) == 1


def _evict_from_page_cache(path) -> bool:
    """Write `path`'s pages back and drop them from the page cache; False if they stayed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            os.preadv(fd, (bytearray(1),), os.fstat(fd).st_size - 1, os.RWF_NOWAIT)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="preadv RWF_NOWAIT is Linux-only")
def test_a_fetch_of_data_not_in_the_page_cache_is_sent_from_a_sender_process(broker_conn, monkeypatch):
    """A consumer replaying old data (not in the page cache) must not stop the loop for the disk:
    even a small response goes to a sender process then; once the data is cached, the loop sends it."""
    running, conn = broker_conn
    create_topic(conn, "cold-fetch", 1)
    _produce_batches(conn, "cold-fetch", batches=4, records=250, size=1000)  # ~1 MB
    log_file = running.broker.partition_log("cold-fetch", 0).segments[0].log_path
    if not _evict_from_page_cache(log_file):
        pytest.skip(f"the file system kept {log_file} in the page cache after POSIX_FADV_DONTNEED")
    with recording_sender_jobs(monkeypatch) as answers:
        cold = conn.send(FETCH, _fetch_request(running, "cold-fetch", 1 << 20))
        assert answers() == [(sender_process.STATUS_SENT, "")]
        warm = conn.send(FETCH, _fetch_request(running, "cold-fetch", 1 << 20))
        assert len(answers()) == 1  # sendfile brought the pages in: the loop sent this one
    cold_records = cold.responses[0].partitions[0].records
    assert 0 < len(cold_records) < server.THREAD_SEND_BYTES
    assert bytes(cold_records) == bytes(warm.responses[0].partitions[0].records)
    assert bytes(cold_records) == log_file.read_bytes()[:len(cold_records)]


def test_shutdown_does_not_wait_for_a_consumer_that_stopped_reading():
    """A sender process sending to a client that reads nothing more does not keep the broker from
    stopping, and ends with it."""
    broker = running_broker()
    running = broker.__enter__()
    stalled = socket.socket()
    try:
        conn = BrokerConnection(running.host, running.port)
        try:
            create_topic(conn, "stalled", 1)
            _produce_batches(conn, "stalled", batches=8, records=1000, size=1000)
            version = conn.version_for(FETCH)
        finally:
            conn.close()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect((running.host, running.port))
        stalled.sendall(b"".join(bytes(p) for p in encode_request(
            version, 1, _fetch_request(running, "stalled", 64 << 20), client_id="stalled")))
        time.sleep(1)  # the ~8 MB answer cannot fit in the socket buffers: its sender waits for the client
    finally:
        # stopping in a thread of its own: a sender that never gives up would hang it, not this test
        stopper = threading.Thread(target=broker.__exit__, args=(None, None, None), daemon=True)
        stopper.start()
        stopper.join(20)
        stalled.close()
    assert not stopper.is_alive(), "the broker did not stop while a send waited for a client"
    assert _sender_pids() == set()


def test_under_write_pressure_produce_writes_from_a_worker_thread_and_the_loop_serves_on(monkeypatch):
    """While the disk pushes back (write_pressure), a produce's pwrite runs in a worker thread: the
    loop answers other requests meanwhile, and a second produce to the same partition waits for
    the first (offsets stay in order) instead of writing on the loop."""
    from odradek.logstore import write_pressure
    from odradek.logstore.segment import LogSegment

    monkeypatch.setattr(write_pressure, "under_pressure", lambda: True)
    gate, entered = threading.Event(), threading.Event()
    writers: list[int] = []
    original = LogSegment.write_at

    def gated_write_at(self, position, data):
        if "pressure-0" not in str(self.log_path):
            return original(self, position, data)
        writers.append(threading.get_ident())
        if not gate.is_set():
            entered.set()
            assert gate.wait(10)
        return original(self, position, data)

    monkeypatch.setattr(LogSegment, "write_at", gated_write_at)
    with running_broker() as running:
        conns = [BrokerConnection(running.host, running.port) for _ in range(3)]
        try:
            create_topic(conns[0], "pressure", 1)
            cls = request_class(PRODUCE)
            answers: dict[int, object] = {}

            def produce(i: int, records: int) -> None:
                batch = bytearray(build_batch([SimpleRecord(b"x" * 100, timestamp=int(time.time() * 1000))
                                               for _ in range(records)]))
                answers[i] = conns[i].send(PRODUCE, cls(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
                    cls.TopicProduceData(name="pressure", partition_data=[cls.PartitionProduceData(index=0, records=batch)])]))

            first = threading.Thread(target=produce, args=(0, 5))
            first.start()
            assert entered.wait(10)
            second = threading.Thread(target=produce, args=(1, 3))
            second.start()
            time.sleep(0.3)
            # the loop is free: another connection gets its answer while the write is held
            metadata = conns[2].send(3, request_class(3)(topics=None))
            assert [b.node_id for b in metadata.brokers] == [running.broker.node_id]
            assert not answers and second.is_alive()
            gate.set()
            first.join(10)
            second.join(10)
        finally:
            gate.set()
            for conn in conns:
                conn.close()
        partition = [answers[i].responses[0].partition_responses[0] for i in (0, 1)]
        assert [(p.error_code, p.base_offset) for p in partition] == [(0, 0), (0, 5)]
        assert running.broker.partition_log("pressure", 0).log_end_offset == 8
        assert len(writers) == 2 and loop_thread_id() not in writers
