"""A local HTTP server that receives webhooks: it keeps each POST's headers (case-insensitive, as
HTTP's are) and body, and answers with the status the test sets."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.headers, body))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args):
        pass


def start() -> HTTPServer:
    """Serve on 127.0.0.1 in a daemon thread: `.received`, `.status` (204), `.server_port`;
    stop it with `.shutdown()`."""
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.received, server.status = [], 204  # type: ignore[attr-defined]
    # A short poll: `.shutdown()` waits for the next one, half a second by default, in every test.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    return server
