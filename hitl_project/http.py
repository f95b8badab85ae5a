"""uvicorn's HTTP protocol with TCP_NODELAY on every connection (`uvicorn --http hitl_project.http:NoDelayH11Protocol`).

With `--workers N`, uvicorn binds the socket itself and asyncio then leaves Nagle's algorithm on
for accepted connections: a response written in two pieces waits for the client's delayed ACK,
about 40 ms per request (measured in bench/, the largest single cost of a round).
"""

import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport):  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
