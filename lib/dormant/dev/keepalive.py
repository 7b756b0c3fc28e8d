"""HTTP/1.1 keep-alive for the embedded moto server.

werkzeug's development server sends `Connection: close` on every response: it cannot tell whether the app
read the whole request body, and bytes left unread would be taken for the next request line. So every
request of `dormant dev` to moto was a new TCP connection and a new server thread (about 300 a second under
load, each paying a connect, a thread start and the GIL hand-offs that come with it). This handler reads the
body in full before the app runs, so the connection is always drained and can carry the next request; only
then does it leave the `Connection: close` out. (werkzeug's own drain after each response, which reads
whatever the socket has, would block on the client's next request: while a drained request runs, the
handler's input is an empty stream, and the connection's own is put back before the next request line.)
A chunked body or an `Expect: 100-continue` request keeps werkzeug's behaviour (the body is read by the app,
and the connection closes after it), as does a client that asks for `Connection: close` itself.
"""

from __future__ import annotations

import io
from typing import Any


def keep_alive_handler(base: type[Any]) -> type[Any]:
    """A subclass of werkzeug request handler `base` (moto's) that keeps drained connections open."""

    class KeepAliveRequestHandler(base):  # type: ignore[misc]
        protocol_version = "HTTP/1.1"
        # A response goes out as two writes (headers, body); with Nagle's algorithm the second waits for the
        # client's ACK of the first, which a kept-alive client delays (up to 40 ms on Linux): every long poll's
        # answer came ~42 ms after the message that ended it.
        disable_nagle_algorithm = True
        _drained = False
        _kept: Any = None  # the connection's input, set aside while a drained request runs

        def run_wsgi(self) -> None:
            try:
                super().run_wsgi()
            finally:
                if self._kept is not None:
                    self.rfile, self._kept = self._kept, None

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            self._drained = False
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower() or self.headers.get("Expect"):
                return environ
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return environ
            body = self.rfile.read(length) if length > 0 else b""
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            self._drained = len(body) == max(length, 0)
            if self._drained:
                self._kept, self.rfile = self.rfile, io.BytesIO()
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if (keyword.lower() == "connection" and value.lower() == "close" and self._drained
                    and not self.close_connection):  # (set when the client asked to close)
                return  # the body was read in full: the connection stays open for the client's next request
            super().send_header(keyword, value)

    return KeepAliveRequestHandler
