"""uvicorn's HTTP protocol with TCP_NODELAY on every connection:
`uvicorn --http hitl_project.http:NoDelayHttpToolsProtocol`.

With `--workers N`, uvicorn binds the socket itself and asyncio then leaves Nagle's algorithm on
for accepted connections: a response written in two pieces waits for the client's delayed ACK,
about 40 ms per request (measured in bench/, the largest single cost of a round).

httptools (with uvloop, which uvicorn picks when it is installed) rather than h11: h11's pure-Python
parser and the asyncio loop were 2.3 ms of the web's CPU per round (py-spy, bench/), and the web
process's CPU per round fell by about 1.5 ms with these two.
"""

import socket

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport):  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
