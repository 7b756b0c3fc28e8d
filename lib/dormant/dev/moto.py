"""An embedded moto server for `dormant dev` and the test suite: `python -m dormant.dev.moto PORT`.

It is moto's own server app with DynamoDB requests serialized: moto's conditional writes are not
atomic under concurrent requests (two commits of one version could both succeed), and Dormant's
correctness rests on them.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any


class SerializedDynamoDB:
    """WSGI middleware: one DynamoDB request at a time."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))  # the whole response, inside the lock


def run_moto(port: int, host: str = "127.0.0.1") -> None:
    """What `moto_server -H HOST -p PORT` runs, with SerializedDynamoDB around it (blocks)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # type: ignore[attr-defined]  # as moto_server sets it
    run_simple(host, port, SerializedDynamoDB(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        raise SystemExit("usage: python -m dormant.dev.moto PORT")
    run_moto(int(sys.argv[1]))
