"""``onceflow console`` as a user runs it (the installed script, ``--port 0``), for the
console's browser and security tests."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from tests.integration.console_script import ENV, SCRIPT


@contextmanager
def running_console(*options: str) -> Iterator[str]:
    """``onceflow console OPTIONS --port 0``; its base URL (from its first line)."""
    command = [str(SCRIPT), "console", "--port", "0", *options]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        assert line.startswith("console on "), line + process.stderr.read()
        yield line.split()[2].split("?")[0].rstrip("/")
    finally:
        process.terminate()
        process.wait(20)


def get(url: str, data: dict[str, str] | None = None) -> tuple[int, str]:
    """(status, body) of a GET, or of a POST of ``data`` (redirects followed)."""
    from urllib.parse import urlencode

    body = urlencode(data).encode() if data is not None else None
    try:
        with urllib.request.urlopen(url, data=body, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def assert_super_user_sees_every_page(base: str, topic: str) -> None:
    """The console of a super user (``admin``) on a secured cluster, with an open
    transaction on ``topic`` by the transactional id ``{topic}-txn``."""
    for path in ("/", f"/topics/{topic}", f"/topics/{topic}/messages", "/groups",
                 "/transactions"):  # fmt: skip
        status, page = get(base + path)
        assert status == 200 and "Traceback" not in page, (path, page[:500])
    assert "as User:admin" in get(base + "/")[1]
    assert f"{topic}-txn" in get(base + "/transactions")[1]


def assert_principal_without_acls_is_refused(base: str, topic: str) -> None:
    """Each page tells ``alice`` (no ACLs) what she may not see, with 403."""
    for path in (f"/topics/{topic}", f"/topics/{topic}/messages", "/"):
        status, page = get(base + path)
        assert status == 403 and "Traceback" not in page, (path, status, page[:500])
        assert "User:alice" in page and "not allowed" in page.lower(), page[:2000]
