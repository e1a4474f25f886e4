"""`__cluster_metadata-0/quorum-state`: the KRaft node's election state (Kafka's FileQuorumStateStore).

One JSON object, no trailing newline, written to `quorum-state.tmp` and renamed. Kafka writes
data_version 0 while kraft.version is 0 (a static `controller.quorum.voters` quorum, which is
what Odradek's log is) and data_version 1 once kraft.version >= 1 (KIP-853). Both are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .snapshot import write_atomically

QUORUM_STATE_FILE = "quorum-state"


@dataclass(slots=True)
class QuorumState:
    """Leader id and epoch as last written; `voters` only in data_version 0 files."""

    leader_id: int = -1
    leader_epoch: int = 0
    voted_id: int = -1
    voters: list[int] = field(default_factory=list)
    data_version: int = 0
    voted_directory_id: str = "AAAAAAAAAAAAAAAAAAAAAA"

    def render(self) -> bytes:
        """The file's bytes, field order and spacing as Jackson writes them for Kafka."""
        if self.data_version == 0:
            obj: dict[str, object] = {
                "clusterId": "",
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in self.voters],
                "data_version": 0,
            }
        else:
            obj = {
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "votedDirectoryId": self.voted_directory_id,
                "data_version": self.data_version,
            }
        return json.dumps(obj, separators=(",", ":")).encode("utf-8")

    def write(self, metadata_dir: Path) -> None:
        write_atomically(Path(metadata_dir) / QUORUM_STATE_FILE, self.render())

    @classmethod
    def read(cls, metadata_dir: Path) -> QuorumState | None:
        """The stored state, or None when the file does not exist."""
        path = Path(metadata_dir) / QUORUM_STATE_FILE
        if not path.exists():
            return None
        obj = json.loads(path.read_text("utf-8"))
        voters = [int(v["voterId"]) for v in obj.get("currentVoters") or []]
        return cls(
            leader_id=int(obj.get("leaderId", -1)),
            leader_epoch=int(obj.get("leaderEpoch", 0)),
            voted_id=int(obj.get("votedId", -1)),
            voters=voters,
            data_version=int(obj.get("data_version", 0)),
            voted_directory_id=str(obj.get("votedDirectoryId", "AAAAAAAAAAAAAAAAAAAAAA")),
        )
