"""A small payment service the pipelines call: POST /payments with a JSON order pays it and
records the payment in its SQLite table (schema.sql). A request that carries an
Idempotency-Key header it has seen already is answered with the payment made the first
time (HTTP 200) instead of paying again (HTTP 201).

    python payment_service.py DATABASE_PATH [PORT]

prints `listening on http://127.0.0.1:PORT` once it serves (port 0, the default: any free
port). ``start(database_path)`` runs it as a child process and returns its URL.
"""

import json
import sqlite3
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Payments(BaseHTTPRequestHandler):
    database_path = ""

    def do_POST(self):
        if self.path != "/payments":
            self.send_error(404)
            return
        order = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers.get("Idempotency-Key")
        db = sqlite3.connect(self.database_path, timeout=30)
        try:
            with db:
                payment_id = db.execute(
                    "INSERT INTO payments (id, key, seq, amount, idempotency_key) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (order["id"], order["key"], order["seq"], order["amount"], key),
                ).lastrowid
            self.answer(201, {"payment_id": payment_id})
        except sqlite3.IntegrityError:  # this Idempotency-Key was paid already
            (payment_id,) = db.execute(
                "SELECT payment_id FROM payments WHERE idempotency_key = ?", (key,)
            ).fetchone()
            self.answer(200, {"payment_id": payment_id, "replayed": True})
        finally:
            db.close()

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


def start(database_path):
    """Run the service as a child process; its URL once it listens."""
    child = subprocess.Popen(
        [sys.executable, __file__, database_path], stdout=subprocess.PIPE, text=True
    )
    line = child.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError(f"the payment service did not start: {line!r}")
    return line.split()[-1]


if __name__ == "__main__":
    Payments.database_path = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Payments)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
