"""The broker on an event loop thread of the calling process, for tests that kill nothing.

``InProcessBroker`` runs the same :class:`~onceflow.broker.broker.Broker` the ``onceflow
broker`` command runs, with the same settings, on an asyncio loop of its own in a daemon
thread, as franz-go's kfake runs inside its tests. It starts in a few milliseconds (no
interpreter to start, nothing to import again) and stops cleanly; real clients reach it
over 127.0.0.1 like any broker.

What it cannot do is what needs a process boundary: a SIGKILL, a power cut, a restart
after a crash, an environment of its own (the fsync fault hooks and the request traps are
read from this process's environment). Use :class:`~onceflow.broker.process.BrokerProcess`
for those. The broker logs through this process's ``logging`` (pytest shows its warnings
with a failing test).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from onceflow.broker.broker import Broker
from onceflow.broker.process import bind_ports
from onceflow.broker.security.settings import SecuritySettingError, parse_add_scram
from onceflow.config import BrokerConfig
from onceflow.log.dir_lock import DataDirInUse
from onceflow.protocol.errors import KafkaError


class InProcessBrokerError(RuntimeError):
    """The broker could not start: a setting it cannot use, a port in use, a data
    directory another broker holds. The message is the broker's own."""


class InProcessBroker:
    """``onceflow broker`` on a loop thread of this process: ``start()``, ``stop()``,
    ``bootstrap``; the same constructor arguments as ``BrokerProcess`` where they mean
    the same (``scram_users`` takes ``--add-scram``'s text form)."""

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        config: dict[str, str] | None = None,
        advertised_host: str | None = None,
        scram_users: list[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.config = dict(config or {})
        self.advertised_host = advertised_host
        self.scram_users = list(scram_users or ())
        # Listener name -> "host:port", as BrokerProcess.listeners (PLAINTEXT alone by default).
        self.listeners: dict[str, str] = {}
        self._broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of a listener named in the ``listeners`` setting."""
        return self.listeners[listener.upper()]

    @property
    def running(self) -> bool:
        """Started, not stopped, and its loop thread alive."""
        return self._broker is not None and self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> InProcessBroker:
        """Bind, open the data directory, start the coordinators; return once clients can
        connect. A restart after ``stop()`` keeps the ports the first start picked."""
        if self._broker is not None:
            raise RuntimeError("the broker is already running")
        try:
            settings, self.port, self.listeners = bind_ports(self.config, self.port, self.listeners)
            config = BrokerConfig.from_strings(settings)
            users = [parse_add_scram(text) for text in self.scram_users]
            broker = Broker(
                self.data_dir, "127.0.0.1", self.port, config, self.advertised_host, users
            )
        except (KafkaError, SecuritySettingError) as error:
            raise InProcessBrokerError(str(error)) from None
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        thread = threading.Thread(
            target=_run_loop, args=(loop, ready), name="onceflow-broker", daemon=True
        )
        thread.start()
        ready.wait()
        try:
            _wait(asyncio.run_coroutine_threadsafe(broker.start(), loop), timeout)
        except BaseException as error:
            _stop_loop(loop, thread)
            if isinstance(error, (OSError, SecuritySettingError, DataDirInUse, TimeoutError)):
                raise InProcessBrokerError(f"cannot start broker: {error}") from None
            raise
        self._broker, self._loop, self._thread = broker, loop, thread
        self.listeners = {
            listener.name: f"{listener.advertised_host}:{listener.advertised_port}"
            for listener in broker.listeners
        }
        self.port = broker.port
        thread.name = f"onceflow-broker-{self.port}"
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Close every connection and the data directory, as SIGTERM does to the command.
        Nothing happens if it is not running."""
        broker, loop, thread = self._broker, self._loop, self._thread
        if broker is None or loop is None or thread is None:
            return
        self._broker = self._loop = self._thread = None
        try:
            _wait(asyncio.run_coroutine_threadsafe(broker.stop(), loop), timeout)
        finally:
            _stop_loop(loop, thread)

    def restart(self, kill: bool = False) -> InProcessBroker:
        """Stop cleanly and start again on the same data directory and ports. A crash
        (``kill=True``) needs a ``BrokerProcess``: this raises instead of restarting
        cleanly where a crash was asked for."""
        if kill:
            self.kill()
        self.stop()
        return self.start()

    def kill(self) -> None:
        """Refused: nothing in this process can SIGKILL the broker without killing the
        caller. Raises ``InProcessBrokerError``; use a ``BrokerProcess`` to crash one."""
        raise InProcessBrokerError(
            "a broker in this process cannot be killed; run it as a BrokerProcess "
            "(the pytest plugin's kafka_broker_process) to crash it"
        )

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        _cancel_leftovers(loop)
        loop.close()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending once the broker stopped (as ``asyncio.run`` does)."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def _wait(future: Future[Any], timeout: float) -> Any:
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise
