"""`odradek streams-groups` against a running broker with a streams group made by raw heartbeats:
--list, --describe --state/--members/--offsets, --delete."""

from __future__ import annotations

import subprocess
import sys

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

Req = request_class(88)


def _join(conn: BrokerConnection, member: str, epoch: int):
    info = Req.TopicInfo
    topology = Req.Topology(epoch=0, subtopologies=[
        Req.Subtopology(subtopology_id="0", source_topics=["in"], source_topic_regex=[],
                        state_changelog_topics=[info(name="app-store-changelog", partitions=0, replication_factor=0,
                                                     topic_configs=[])],
                        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])
    body = Req(group_id="app", member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
               rebalance_timeout_ms=30000 if epoch == 0 else -1, topology=topology if epoch == 0 else None,
               active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id="p1" if epoch == 0 else None,
               client_tags=[] if epoch == 0 else None, task_offsets=[], task_end_offsets=[])
    return conn.send(88, body, 1)


def _tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "streams-groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def test_list_describe_and_delete_a_streams_group():
    with running_broker(num_partitions=2, configs={"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"}) as running:
        bootstrap = f"{running.host}:{running.port}"
        conn = BrokerConnection(running.host, running.port)
        try:
            conn.send(19, request_class(19)(topics=[request_class(19).CreatableTopic(
                name="in", num_partitions=2, replication_factor=1, assignments=[], configs=[])], timeout_ms=10000), 7)
            r = _join(conn, "m1", 0)
            assert r.error_code == 0, r
            r = _join(conn, "m1", r.member_epoch)  # the changelog exists now: tasks assigned
            assert r.error_code == 0 and r.active_tasks, r
            listed = _tool(bootstrap, "--list", "--state")
            assert listed.stdout.split("\n")[1].split() == ["app", "Stable"], listed
            state = _tool(bootstrap, "--describe", "--group", "app", "--state")
            assert state.stdout.strip().split("\n")[-1].split()[-3:] == ["sticky", "Stable", "1"], state
            members = _tool(bootstrap, "--describe", "--group", "app", "--members")
            assert "ACTIVE: 0:[0,1];" in members.stdout, members
            offsets = _tool(bootstrap, "--describe", "--group", "app")
            assert [line.split() for line in offsets.stdout.strip().split("\n")[1:]] == [["app", "in", "1", "-"], ["app", "in", "0", "-"]], offsets
            refused = _tool(bootstrap, "--delete", "--group", "app")
            assert "NON_EMPTY_GROUP" in refused.stderr and refused.returncode == 1
            assert _join(conn, "m1", -1).member_epoch == -1
            deleted = _tool(bootstrap, "--delete", "--group", "app")
            assert deleted.returncode == 0 and "('app') was successful" in deleted.stdout, deleted
        finally:
            conn.close()
