"""The one send routine of fetch responses (`sender_process.send_steps`), used by the event loop,
its fallback thread and the sender processes: order, a full socket, a short file, a gone peer."""

from __future__ import annotations

import logging
import select
import socket

import pytest

from odradek import sender_process, server
from odradek.wire.records import FileSlice


def _drain(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def _run(out: socket.socket, peer: socket.socket, steps) -> bytes:
    """Drive the steps like a poller: whenever the socket is full, read what the peer got."""
    received = b""
    for _ in steps:
        received += _drain(peer)
        select.select([], [out], [], 5)
    return received + _drain(peer)


def test_buffers_and_file_slices_go_out_in_order_through_a_full_socket(tmp_path):
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(bytes(range(256)) * 16384)  # 4 MiB: more than the socket buffers hold
    out, peer = socket.socketpair()
    out.setblocking(False)
    peer.setblocking(False)
    with out, peer, segment.open("rb") as f:
        items = [b"head", (f.fileno(), 100, 3 << 20), b"tail"]
        received = _run(out, peer, sender_process.send_steps(out.fileno(), items))
    assert received == b"head" + segment.read_bytes()[100:100 + (3 << 20)] + b"tail"


def test_a_short_file_and_a_gone_peer_are_told_apart(tmp_path):
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * 1000)
    out, peer = socket.socketpair()
    out.setblocking(False)
    with out, peer, segment.open("rb") as f:
        with pytest.raises(sender_process.ShortFile) as short:
            list(sender_process.send_steps(out.fileno(), [(f.fileno(), 0, 2000)]))
        assert short.value.in_fd == f.fileno()
        peer.close()
        with pytest.raises(sender_process.PeerClosed):
            list(sender_process.send_steps(out.fileno(), [b"answer"]))


def test_the_loop_path_closes_the_connection_naming_the_short_segment(tmp_path, caplog):
    segment = tmp_path / "00000000000000000042.log"
    segment.write_bytes(b"x" * 1000)
    out, peer = socket.socketpair()
    out.setblocking(False)
    with out, peer, segment.open("rb") as f, caplog.at_level(logging.ERROR):
        with pytest.raises(server.ConnectionClosed):
            list(server._send_steps(out.fileno(), [b"head", FileSlice(f, 0, 2000)], "client-1"))
    assert f"Segment {f} ended early while sending to client-1; closing" in caplog.text
