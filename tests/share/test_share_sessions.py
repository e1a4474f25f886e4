"""Share sessions (KIP-932) on the partition leader: epochs, replacement, closing."""

from __future__ import annotations

from odradek.share_coordinator.coordinator import ShareCoordinator
from odradek.share_coordinator.partition_manager import SharePartitionManager, next_epoch
from odradek.wire.errors import ErrorCode


class _Broker:
    config = None
    metadata = None

    def __init__(self) -> None:
        self.woken: list = []

    def notify_appended(self, partitions=None) -> None:
        self.woken.append(partitions)


def test_epochs_open_continue_and_close():
    manager = SharePartitionManager(_Broker(), ShareCoordinator(None))
    assert manager.open_session("g", "m", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = manager.open_session("g", "m", 0)
    assert session.epoch == 1
    assert manager.open_session("g", "m", 1) is session and session.epoch == 2
    assert manager.open_session("g", "m", 1) == ErrorCode.INVALID_SHARE_SESSION_EPOCH  # a repeat
    assert manager.open_session("g", "m", 3) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert manager.open_session("g", "m", 2) is session
    assert manager.open_session("g", "other", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    # epoch 0 again replaces the session; -1 takes it for closing
    fresh = manager.open_session("g", "m", 0)
    assert fresh is not session and fresh.epoch == 1
    assert manager.open_session("g", "m", -1) is fresh
    manager.close_session("g", "m")
    assert manager.open_session("g", "m", -1) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_epoch_wraps_to_one():
    assert next_epoch(5) == 6
    assert next_epoch(2**31 - 1) == 1


def test_reset_strategies():
    from odradek.share_coordinator.partition_manager import iso_duration_seconds, reset_offset

    class _Log:
        log_start_offset, high_watermark = 5, 50

        def fetch_offset_by_timestamp(self, ts):
            class Found:
                offset = 20
            return Found() if ts > 0 else None

    assert reset_offset(_Log(), "earliest") == 5
    assert reset_offset(_Log(), "latest") == 50
    assert reset_offset(_Log(), "by_duration:PT1H") == 20
    assert reset_offset(_Log(), "by_duration:nonsense") == 50
    assert iso_duration_seconds("P1DT2H3M4.5S") == 93784.5 and iso_duration_seconds("PT") is None
