"""Child processes that never outlive this one.

Three layers, because each alone has a gap:

* every child runs in its own session (``start_new_session``), so a Ctrl-C meant for the
  parent does not reach it behind its back, and is SIGKILLed by ``kill_all``
  at interpreter exit (``atexit``);
* on Linux each child asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``), which covers a SIGKILLed parent where no Python code
  runs. The kernel sends it when the *thread* that forked the child ends, so every child
  is forked by one daemon thread that lives as long as the interpreter.

The child asks through util-linux's ``setpriv --pdeathsig KILL``, not a ``preexec_fn``:
Python code run in a child forked from a thread other than the main one first frees the
other threads' thread-locals, and finalizers there act on state shared with the parent.
py4j's (PySpark's) closes the main thread's connection to the JVM with ``shutdown()``,
which cuts the parent's socket too: PySpark then silently opens a new connection, on a new
JVM thread without the active SparkSession, and ``format("onceflow-database")`` is no
longer found. A shell between ``setpriv`` and the command exits if the parent died before
the prctl. Without ``setpriv`` the ``preexec_fn`` is the fallback.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_PR_SET_PDEATHSIG = 1
_children: set[subprocess.Popen[Any]] = set()
_children_lock = threading.Lock()
_requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[Any]], Future[Any]]] = (
    queue.SimpleQueue()
)
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()
# Loaded here, not in the forked child, where dlopen could wait on a lock held at fork.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_SETPRIV = shutil.which("setpriv") if _prctl is not None else None
_CHECK_PARENT = '[ "$PPID" = "$0" ] || exit 1; exec "$@"'


def popen(command: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` whose child dies with this process (see the module docstring)."""
    parent = os.getpid()

    def start() -> subprocess.Popen[Any]:
        if _SETPRIV is not None:
            # the shell, started after the prctl, exits if the parent is already gone
            return subprocess.Popen(
                [
                    _SETPRIV,
                    "--pdeathsig",
                    "KILL",
                    "--",
                    "/bin/sh",
                    "-c",
                    _CHECK_PARENT,
                    str(parent),
                    *command,
                ],
                start_new_session=True,
                **kwargs,
            )
        return subprocess.Popen(
            command,
            start_new_session=True,
            preexec_fn=lambda: _die_with(parent),
            **kwargs,
        )

    done: Future[subprocess.Popen[Any]] = Future()
    _requests.put((start, done))
    _ensure_spawner()
    process = done.result()
    with _children_lock:
        _children.add(process)
    return process


def forget(process: subprocess.Popen[Any]) -> None:
    """Stop tracking a child that has exited."""
    with _children_lock:
        _children.discard(process)


def kill_all() -> None:
    """SIGKILL every child still running (interpreter exit)."""
    with _children_lock:
        children = list(_children)
        _children.clear()
    for process in children:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                process.wait(10)


atexit.register(kill_all)


def _ensure_spawner() -> None:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_serve, name="onceflow-spawner", daemon=True)
            _spawner.start()


def _serve() -> None:
    while True:
        start, done = _requests.get()
        try:
            done.set_result(start())
        except BaseException as error:
            done.set_exception(error)


def _die_with(parent: int) -> None:
    """In the forked child, before exec: SIGKILL me when ``parent`` goes away."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
