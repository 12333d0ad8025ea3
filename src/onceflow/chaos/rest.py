"""The REST service of the deduplication article's flows: it records every POST it gets.

A POST is a side effect outside every transaction, so a redelivered event calls it again;
the chaos audit reads the calls back from the service's SQLite file like any other output.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CALLS_QUERY = "SELECT event_id AS id, key FROM rest_calls ORDER BY seq"


class RestService:
    """``POST /calls`` with a JSON body ``{"id": ..., "key": ...}``; one row per call."""

    def __init__(self, database: Path) -> None:
        self.database = Path(database)
        self._db = sqlite3.connect(self.database, check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS rest_calls"
            " (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT, key TEXT)"
        )
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.database}"

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/calls"

    def record(self, event_id: str, key: str | None) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO rest_calls (event_id, key) VALUES (?, ?)", (event_id, key)
            )

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    call = json.loads(self.rfile.read(length))
                    service.record(str(call["id"]), call.get("key"))
                except (ValueError, KeyError, TypeError) as error:
                    self.send_error(400, f"bad call: {error}")
                    return
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> RestService:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._db.close()
