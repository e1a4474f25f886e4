"""Eligible leader replicas in PartitionChangeRecords (kraft.elr), as Kafka's PartitionChangeBuilder
with ELR on writes them."""

from __future__ import annotations

from odradek.kraft.elr import NO_LEADER, partition_change
from odradek.kraft.image import PartitionState


def _part(replicas, isr, leader, elr=(), lke=()) -> PartitionState:
    return PartitionState(list(replicas), list(isr), leader, 5, 7, [], elr=list(elr), last_known_elr=list(lke))


def test_a_follower_leaving_below_min_isr_becomes_eligible() -> None:
    part = _part([1, 2, 3], [1, 2], 1)
    assert partition_change(part, [1], min_isr=2) == {"eligible_leader_replicas": [2], "isr": [1]}
    # at or above min ISR nothing is eligible beyond the ISR
    assert partition_change(_part([1, 2, 3], [1, 2, 3], 1), [1, 2], min_isr=2) == {"isr": [1, 2]}


def test_the_last_leader_fenced_leaves_an_empty_isr_and_the_last_known_leader() -> None:
    part = _part([1, 2, 3], [1], 1, elr=[2])
    assert partition_change(part, [], leader=NO_LEADER, min_isr=2) == {
        "leader": -1, "eligible_leader_replicas": [1, 2], "isr": [], "last_known_elr": [1]}


def test_an_eligible_replica_leads_cleanly_and_is_the_new_isr() -> None:
    part = _part([1, 2, 3], [], -1, elr=[1, 2], lke=[1])
    assert partition_change(part, [], leader=2, min_isr=2) == {
        "leader": 2, "eligible_leader_replicas": [1], "isr": [2], "last_known_elr": []}


def test_an_unclean_election_clears_the_eligible_replicas() -> None:
    part = _part([1, 2, 3], [], -1, elr=[1], lke=[1])
    assert partition_change(part, [], leader=3, unclean=True, min_isr=2) == {
        "leader": 3, "isr": [3], "eligible_leader_replicas": [], "last_known_elr": []}


def test_without_elr_the_last_isr_member_stays() -> None:
    part = _part([1, 2], [1], 1)
    assert partition_change(part, [], leader=NO_LEADER, elr_enabled=False) == {"leader": -1}
