"""Eligible leader replicas (KIP-966) in the PartitionChangeRecords Odradek's controller writes.

Kafka's PartitionChangeBuilder, with ELR on (eligible.leader.replicas.version 1, Kafka 4.4's
default) and the last known leader kept for balanced recovery (4.4's default):

* while the target ISR is at least `min.insync.replicas`, the ELR is empty; below it, the ELR is
  the old ISR and ELR members that leave the ISR (so they may still lead cleanly);
* a leader elected from the ELR (the ISR being empty) is the new ISR and leaves the ELR;
* an unclean election empties the ELR;
* the ISR may become empty; the first time it does, the last known ELR names the leader the
  partition had; it is cleared once the partition has a leader again.
"""

from __future__ import annotations

from typing import Any

#: PartitionChangeRecord.leader values: no leader, and (the field's default) no change.
NO_LEADER = -1
NO_LEADER_CHANGE = -2


def partition_change(part: Any, target_isr: list[int], *, leader: int = NO_LEADER_CHANGE, unclean: bool = False,
                     min_isr: int = 1, elr_enabled: bool = True) -> dict[str, Any]:
    """The PartitionChangeRecord fields (besides the ids) that take `part` to `target_isr` and
    `leader` (NO_LEADER_CHANGE: the same). An unclean election's ISR is the new leader alone."""
    fields: dict[str, Any] = {}
    elr = list(part.elr)
    if elr_enabled:
        if len(target_isr) >= min_isr:
            elr = []
        else:
            elr = sorted((set(part.elr) | set(part.isr)) - set(target_isr))
    if leader != NO_LEADER_CHANGE:
        fields["leader"] = leader
        if leader >= 0 and unclean:
            fields["isr"] = [leader]
        elif leader >= 0 and leader in elr:
            target_isr = [leader]
            elr = [r for r in elr if r != leader]
    if unclean or not elr_enabled:
        elr = []
    if elr_enabled and elr != list(part.elr):
        fields["eligible_leader_replicas"] = elr
    if "isr" not in fields and (target_isr or elr_enabled) and target_isr != list(part.isr):
        fields["isr"] = list(target_isr)
    if elr_enabled:
        if fields.get("isr") == [] and list(part.last_known_elr) != [part.leader]:
            fields["last_known_elr"] = [part.leader]  # the first time the partition is leaderless
        elif (leader >= 0 or (part.leader != NO_LEADER and leader != NO_LEADER)) and part.last_known_elr:
            fields["last_known_elr"] = []
    return fields
