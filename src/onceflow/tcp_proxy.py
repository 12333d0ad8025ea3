"""A TCP proxy that can cut or slow a link: between a pipeline worker and the broker (the
fault engine's network faults), or in front of an Apache Kafka node's replication listener
(``KafkaCluster(replication_proxies=True)``: the node's followers cut off from it).

``cut()`` closes every open connection and refuses new ones (the listening socket stays,
so clients see resets, as on a broken link) until ``restore()``. ``cut(coordinator_only=
True)`` cuts only the connections that carry group-coordination requests (a Kafka client
talks to its group coordinator on a connection of its own): the worker loses its group
while it still fetches from the partition leader, the partition a multi-broker network can
split a client along. ``delay(seconds)`` holds every chunk of data back that long in both
directions (a congested or far link). The proxy reads the size and API key of each
request the client sends, nothing else. With ``source`` it connects to the broker from
that address (any of 127.0.0.0/8 on loopback), so that the broker sees each proxied
worker as a host of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading

# JoinGroup, Heartbeat, LeaveGroup, SyncGroup, ConsumerGroupHeartbeat. Not FindCoordinator:
# a client sends it on any connection, the one it fetches on too, and a client split from
# its coordinator's broker still gets an answer from the others
COORDINATION_APIS = frozenset({11, 12, 13, 14, 68})


class _Link:
    """One client connection, and whether it talks to the group coordinator (read from the
    size and API key at the head of each request the client sends)."""

    HEAD = 6  # int32 size, then int16 API key

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.writers = (client, upstream)
        self.coordinator = False
        self._head = b""
        self._skip = 0  # bytes left of the request being passed through

    def abort(self) -> None:
        for writer in self.writers:
            writer.transport.abort()

    def consume(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._skip:
                taken = min(self._skip, len(view))
                self._skip -= taken
                view = view[taken:]
                continue
            need = self.HEAD - len(self._head)
            self._head += bytes(view[:need])
            view = view[need:]
            if len(self._head) < self.HEAD:
                return
            size, api_key = struct.unpack(">ih", self._head)
            self.coordinator |= api_key in COORDINATION_APIS
            self._skip, self._head = size - 2, b""


class TcpProxy:
    def __init__(
        self, listen: tuple[str, int], target: tuple[str, int], source: str | None = None
    ) -> None:
        self.listen = listen
        self.target = target
        self.source = source
        self._cut: str | None = None  # None, "all", "coordinator"
        self._delay = 0.0
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self.cuts = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, *self.listen)
        )
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut == "all":
            writer.transport.abort()
            return
        try:
            local = (self.source, 0) if self.source is not None else None
            up_reader, up_writer = await asyncio.open_connection(*self.target, local_addr=local)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, link), self._pipe(up_reader, writer, None)
            )
        finally:
            self._links.discard(link)
            link.abort()

    def _abort(self) -> None:
        for link in list(self._links):
            if self._cut == "all" or link.coordinator:
                link.abort()
                self._links.discard(link)

    def cut(self, coordinator_only: bool = False) -> None:
        """Drop every connection (or only those to the group coordinator) now and refuse
        such connections until restore()."""
        self.cuts += 1
        self._cut = "coordinator" if coordinator_only else "all"
        self._loop.call_soon_threadsafe(self._abort)

    def delay(self, seconds: float) -> None:
        """Hold every chunk back ``seconds`` until restore()."""
        self._delay = seconds

    def restore(self) -> None:
        self._cut = None
        self._delay = 0.0

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link | None
    ) -> None:
        """Copy ``reader`` to ``writer``; ``link`` when this is the client's direction."""
        try:
            while data := await reader.read(65536):
                if link is not None:
                    link.consume(data)
                    if link.coordinator and self._cut == "coordinator":
                        link.abort()
                        return
                if self._delay:
                    await asyncio.sleep(self._delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"proxy on {self.listen} did not start")
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self._loop.close()

    async def _shutdown(self) -> None:
        for link in list(self._links):
            link.abort()
        self._links.clear()
        if self._server is not None:
            self._server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
