"""A listener's sockets and the loop that accepts connections on them, within the
connection limits (:mod:`onceflow.broker.connection_quotas`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Callable

from onceflow.broker.connection_quotas import ConnectionQuotas
from onceflow.broker.framing import FrameProtocol
from onceflow.broker.listeners import Listener

log = logging.getLogger(__name__)

BACKLOG = 1024  # connections the kernel queues while the broker is not accepting (or is slow)
ACCEPT_BATCH = 100  # connections accepted in one go before other work runs
ACCEPT_RETRY_SECONDS = 0.1  # after an accept failure such as too many open files

ProtocolFactory = Callable[[str], FrameProtocol]  # the client's IP -> its protocol


class Acceptor:
    def __init__(
        self, listener: Listener, quotas: ConnectionQuotas, protocol_for: ProtocolFactory
    ) -> None:
        self.listener = listener
        self.quotas = quotas
        self._protocol_for = protocol_for
        self._sockets: list[socket.socket] = []
        self._loops: list[asyncio.Task[None]] = []
        self._connecting: set[asyncio.Task[None]] = set()

    async def bind(self) -> int:
        """Bind and listen; the port bound (what port 0 became). :meth:`serve` accepts."""
        loop = asyncio.get_running_loop()
        host = self.listener.host or None
        port = self.listener.port
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                if port == 0 and self._sockets:  # every address on the port the first got
                    address = (address[0], self._sockets[0].getsockname()[1], *address[2:])
                self._sockets.append(_listening_socket(family, kind, proto, address))
        except BaseException:
            self.close()
            raise
        return self._sockets[0].getsockname()[1]

    def serve(self) -> None:
        """Start accepting connections on the bound sockets."""
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            self._loops.append(loop.create_task(self._accept(sock)))

    def close(self) -> None:
        for task in self._loops:
            task.cancel()
        for sock in self._sockets:
            sock.close()

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        name = self.listener.name
        while True:
            await self.quotas.wait_for_slot(name)
            try:
                client, address = await loop.sock_accept(listening)
            except OSError as error:
                log.warning("cannot accept a connection on %s: %s", self.listener, error)
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            self._admit(client, address[0])
            # Take the others already waiting now, as asyncio's own server does.
            for _ in range(ACCEPT_BATCH):
                if not self.quotas.slot_available(name):
                    break
                try:
                    client, address = listening.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as error:
                    log.warning("cannot accept a connection on %s: %s", self.listener, error)
                    break
                self._admit(client, address[0])

    def _admit(self, client: socket.socket, ip: str) -> None:
        name = self.listener.name
        if not self.quotas.admit(name, ip):
            log.info(
                "refused a connection from %s on %s: that address has its maximum of "
                "%d connections (max.connections.per.ip)",
                ip,
                name,
                self.quotas.limit_for(ip),
            )
            client.close()
            return
        client.setblocking(False)
        task = asyncio.get_running_loop().create_task(self._connect(client, ip))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, client: socket.socket, ip: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(functools.partial(self._protocol_for, ip), client)
        except OSError as error:
            self.quotas.release(self.listener.name, ip)
            client.close()
            log.info("connection from %s on %s failed: %s", ip, self.listener.name, error)


def _listening_socket(family: int, kind: int, proto: int, address: tuple) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind(address)
        except OSError as error:
            raise OSError(
                error.errno,
                f"error while attempting to bind on address {address!r}: {error.strerror}",
            ) from None
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
