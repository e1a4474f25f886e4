"""The streams group task assignor: Kafka 4.4's default ("sticky") StickyTaskAssignor, in its steps.

Tasks are (subtopology id, partition). Active tasks are balanced over the members, stateful ones
first and stateless ones after, each kept on its previous owner while that member is below its
quota, then given to a member that held it as a standby, then to the least loaded member of the
least loaded process. Standby tasks (stateful tasks only) go to processes that do not run the task
as active, previous standby holders first, then the least loaded process. Warm-up tasks are not
assigned (see docs/streams-groups.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Tasks = dict[str, set[int]]
TaskId = tuple[str, int]

ASSIGNOR_NAME = "sticky"


@dataclass
class AssignmentMember:
    """What the assignor knows about a member: its process and what it holds now."""

    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    task_offsets: dict[TaskId, int] = field(default_factory=dict)


@dataclass
class _Process:
    process_id: str
    members: list[str] = field(default_factory=list)
    active: dict[str, set[TaskId]] = field(default_factory=dict)
    standby: dict[str, set[TaskId]] = field(default_factory=dict)
    stateless_active: int = 0

    def tasks(self) -> int:
        return sum(len(t) for t in self.active.values()) + sum(len(t) for t in self.standby.values())

    def load(self) -> float:
        return self.tasks() / len(self.members)

    def has(self, task: TaskId) -> bool:
        return any(task in t for t in self.active.values()) or any(task in t for t in self.standby.values())

    def member_load(self, member_id: str) -> int:
        return len(self.active[member_id]) + len(self.standby[member_id])


def _per_member(total: int, members: int) -> int:
    return math.ceil(total / members) if members else 0


def assign(members: list[AssignmentMember], tasks: dict[str, int], stateful: set[str],
           num_standby_replicas: int) -> dict[str, tuple[Tasks, Tasks]]:
    """member id -> (active tasks, standby tasks) for `tasks` (subtopology -> task count)."""
    if not members:
        return {}
    processes: dict[str, _Process] = {}
    member_process: dict[str, _Process] = {}
    prev_active: dict[TaskId, str] = {}
    standby_candidates: dict[TaskId, list[tuple[int, int, str]]] = {}
    for m in members:
        process = processes.setdefault(m.process_id, _Process(m.process_id))
        process.members.append(m.member_id)
        process.active[m.member_id] = set()
        process.standby[m.member_id] = set()
        member_process[m.member_id] = process
        for sub, parts in m.active.items():
            for p in parts:
                prev_active[(sub, p)] = m.member_id
        held = set()
        for source in (m.standby, m.warmup):
            for sub, parts in source.items():
                for p in parts:
                    held.add((sub, p))
                    standby_candidates.setdefault((sub, p), []).append((0, -m.task_offsets.get((sub, p), 0),
                                                                         m.member_id))
        for task, offset in m.task_offsets.items():
            if task not in held:
                standby_candidates.setdefault(task, []).append((1, -offset, m.member_id))
    prev_standby = {t: [c[2] for c in sorted(cands, key=lambda c: (c[0], c[1]))]
                    for t, cands in standby_candidates.items()}
    stateful_tasks = [(s, p) for s in sorted(tasks) if s in stateful for p in range(tasks[s])]
    stateless_tasks = [(s, p) for s in sorted(tasks) if s not in stateful for p in range(tasks[s])]
    n = len(members)
    quota_stateful = _per_member(len(stateful_tasks), n)
    quota_active = _per_member(len(stateful_tasks) + len(stateless_tasks), n)

    def under_quota(member_id: str, is_stateful: bool) -> bool:
        process = member_process[member_id]
        count = len(process.active[member_id])
        return count < (quota_stateful if is_stateful else quota_active)

    def add_active(member_id: str, task: TaskId, is_stateful: bool) -> None:
        process = member_process[member_id]
        process.active[member_id].add(task)
        if not is_stateful:
            process.stateless_active += 1

    def least_loaded_member(process: _Process) -> str:
        return min(process.members, key=lambda mid: (process.member_load(mid), process.members.index(mid)))

    def assign_active(pending: list[TaskId], is_stateful: bool) -> None:
        pending.sort(key=lambda t: (t[1], t[0]))
        rest = []
        for task in pending:  # 1. the previous active owner
            owner = prev_active.get(task)
            if owner is not None and owner in member_process and under_quota(owner, is_stateful):
                add_active(owner, task, is_stateful)
            else:
                rest.append(task)
        pending, rest = rest, []
        for task in pending:  # 2. a member that held it as standby (or has its state)
            for holder in prev_standby.get(task, []):
                if holder in member_process and under_quota(holder, is_stateful):
                    add_active(holder, task, is_stateful)
                    break
            else:
                rest.append(task)
        for task in rest:  # 3. the least loaded process, its least loaded member
            process = min(processes.values(), key=lambda pr: (pr.load(), pr.stateless_active,
                                                              list(processes).index(pr.process_id)))
            add_active(least_loaded_member(process), task, is_stateful)

    assign_active(list(stateful_tasks), True)
    assign_active(list(stateless_tasks), False)

    if num_standby_replicas > 0:
        for task in sorted(stateful_tasks, key=lambda t: (t[1], t[0])):
            for _ in range(num_standby_replicas):
                placed = False
                for holder in prev_standby.get(task, []):
                    process = member_process.get(holder)
                    if process is not None and not process.has(task):
                        process.standby[holder].add(task)
                        placed = True
                        break
                if placed:
                    continue
                free = [pr for pr in processes.values() if not pr.has(task)]
                if not free:
                    break  # fewer processes than replicas: Kafka leaves the rest unassigned too
                process = min(free, key=lambda pr: (pr.load(), list(processes).index(pr.process_id)))
                process.standby[least_loaded_member(process)].add(task)

    out: dict[str, tuple[Tasks, Tasks]] = {}
    for m in members:
        process = member_process[m.member_id]
        out[m.member_id] = (_compact(process.active[m.member_id]), _compact(process.standby[m.member_id]))
    return out


def _compact(tasks: set[TaskId]) -> Tasks:
    out: Tasks = {}
    for sub, p in tasks:
        out.setdefault(sub, set()).add(p)
    return out
