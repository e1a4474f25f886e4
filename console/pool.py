"""A small pool of Kafka clients shared by the console's request threads.

:class:`~odradek.tools.client.KafkaClient` is blocking and not thread-safe: each web request
borrows one client. A client is returned after success or a Kafka error answer (its
connections are still in step); after anything else (a dropped connection, a timeout) it is
closed, since a half-read response would confuse the next request.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager

from ..tools.client import KafkaClient, KafkaError
from ..tools.client_security import ClientSecurity


class ClientPool:
    """Up to `size` idle clients of one cluster; more are opened while all are busy."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None = None, *, size: int = 4,
                 timeout: float = 15.0, client_id: str = "odradek-console") -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.timeout = timeout
        self.client_id = client_id
        self._idle: queue.LifoQueue[KafkaClient] = queue.LifoQueue(maxsize=size)

    @contextmanager
    def client(self) -> Iterator[KafkaClient]:
        try:
            client = self._idle.get_nowait()
        except queue.Empty:
            client = KafkaClient(self.bootstrap, client_id=self.client_id, timeout=self.timeout,
                                 security=self.security)
        reusable = False
        try:
            yield client
            reusable = True
        except KafkaError:
            reusable = True
            raise
        finally:
            if reusable:
                self._give_back(client)
            else:
                client.close()

    def _give_back(self, client: KafkaClient) -> None:
        try:
            self._idle.put_nowait(client)
        except queue.Full:
            client.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
