"""Requests this node sends to another node of the cluster (a controller, or a broker): one
Trio connection per node, ApiVersions first, then one request at a time, as Kafka's
NetworkClient does for the controller channel and the Raft client.

PLAINTEXT only for now (the listener named by `controller.listener.names`); what the
connection cannot do is an error the caller retries with backoff.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import trio

from ..wire.errors import ProtocolError
from ..wire.frames import FrameSplitter
from ..wire.protocol import API_NAMES, decode_response, encode_request, request_class, supported_versions

log = logging.getLogger(__name__)

_API_VERSIONS = 18
_MAX_FRAME = 64 * 1024 * 1024


class NodeUnavailableError(ConnectionError):
    """The node could not be reached, closed the connection, or sent something unreadable."""


class NodeConnection:
    """One connection to another node; `request` negotiates versions on first use."""

    def __init__(self, host: str, port: int, *, client_id: str, node_id: int = -1,
                 connect_timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._stream: trio.SocketStream | None = None
        self._frames = FrameSplitter(_MAX_FRAME)
        self._correlation = itertools.count(1)
        self._lock = trio.Lock()
        #: api key -> (min, max) the node serves, from its ApiVersions answer
        self.versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"NodeConnection({self.node_id}@{self.host}:{self.port})"

    async def _connect(self) -> trio.SocketStream:
        if self._stream is not None:
            return self._stream
        try:
            with trio.fail_after(self.connect_timeout):
                stream = await trio.open_tcp_stream(self.host, self.port)
        except (OSError, trio.TooSlowError) as e:
            raise NodeUnavailableError(f"cannot connect to {self.host}:{self.port}: {e}") from None
        self._stream = stream
        self._frames = FrameSplitter(_MAX_FRAME)
        try:
            body = request_class(_API_VERSIONS)(client_software_name="odradek", client_software_version="4.4")
            version = min(3, supported_versions(_API_VERSIONS)[1])
            resp = await self._roundtrip(_API_VERSIONS, version, body)
        except BaseException:
            await self.close()
            raise
        if resp.error_code:
            await self.close()
            raise NodeUnavailableError(f"{self.host}:{self.port} refused ApiVersions (error {resp.error_code})")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return stream

    def version_for(self, api_key: int, highest: int | None = None) -> int:
        """The highest version both sides serve (at most `highest`)."""
        theirs = self.versions.get(api_key)
        ours = supported_versions(api_key)
        if theirs is None:
            raise NodeUnavailableError(f"{self.host}:{self.port} does not serve {API_NAMES.get(api_key, api_key)}")
        top = min(theirs[1], ours[1], highest if highest is not None else ours[1])
        if top < max(theirs[0], ours[0]):
            raise NodeUnavailableError(f"no common version of {API_NAMES.get(api_key, api_key)} with "
                                       f"{self.host}:{self.port}")
        return top

    async def request(self, api_key: int, body: Any, *, highest: int | None = None,
                      version: int | None = None, timeout: float = 30.0) -> tuple[int, Any]:
        """Send one request and wait for its answer; returns (version used, response body)."""
        async with self._lock:
            await self._connect()
            v = version if version is not None else self.version_for(api_key, highest)
            try:
                with trio.fail_after(timeout):
                    return v, await self._roundtrip(api_key, v, body)
            except (trio.TooSlowError, OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                    ProtocolError) as e:
                await self.close()
                raise NodeUnavailableError(f"{API_NAMES.get(api_key, api_key)} to {self.host}:{self.port} "
                                           f"failed: {e!r}") from None

    async def _roundtrip(self, api_key: int, version: int, body: Any) -> Any:
        stream = self._stream
        assert stream is not None
        corr = next(self._correlation)
        pieces = encode_request(version, corr, body, client_id=self.client_id, api_key=api_key)
        await stream.send_all(b"".join(bytes(p) for p in pieces))
        while True:
            frame = self._frames.next_frame()
            if frame is not None:
                got, resp = decode_response(frame, api_key, version)
                if got != corr:
                    raise ProtocolError(f"answer to request {got}, expected {corr}")
                return resp
            data = await stream.receive_some(256 * 1024)
            if not data:
                raise NodeUnavailableError(f"{self.host}:{self.port} closed the connection")
            self._frames.feed(data)

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await trio.aclose_forcefully(stream)
