"""uvicorn's HTTP protocol with TCP_NODELAY on every connection and a cap on a request's head:
`uvicorn --http hitl_project.http:NoDelayHttpToolsProtocol`.

With `--workers N`, uvicorn binds the socket itself and asyncio then leaves Nagle's algorithm on for
accepted connections: a response written in two pieces waits for the client's delayed ACK, the
largest single cost of a round (docs/performance.md, "Measured choices").

httptools (with uvloop, which uvicorn picks when it is installed) rather than h11, whose pure-Python
parser costs the web more CPU per round.
"""

import socket

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# The most a request line and its headers may take, as uvicorn's h11 parser allows by default
# (h11_max_incomplete_event_size). httptools sets no limit and joins a header's pieces as they
# arrive, in time that grows with the square of its size: one unauthenticated 100 MB header held a
# web process's event loop, and every call it serves, for 10 seconds.
MAX_HEAD_BYTES = 16 * 1024
TOO_LARGE = b"Request header fields too large"


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    # Bytes read of the current request's head; None once its headers are complete.
    _head_bytes: int | None = 0

    def connection_made(self, transport):  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        # The parser gets at most MAX_HEAD_BYTES of a head: one that has not ended by then is
        # refused. A read may hold the head and the start of the body: the head ends within it.
        while self._head_bytes is not None and self._head_bytes + len(data) > MAX_HEAD_BYTES:
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:
                self._refuse_head()
                return
            self._head_bytes += room
            super().data_received(data[:room])
            data = data[room:]
            if self.transport.is_closing():
                return
        if self._head_bytes is not None:
            self._head_bytes += len(data)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes = 0  # a kept-alive connection's next request starts with its head

    def _refuse_head(self) -> None:
        if self.transport.is_closing():
            return
        self.logger.warning("Request head over %d bytes refused.", MAX_HEAD_BYTES)
        head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
        self.transport.write(head + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(TOO_LARGE) + TOO_LARGE)
        self.transport.close()
