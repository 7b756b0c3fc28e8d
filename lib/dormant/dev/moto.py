"""An embedded moto server for `dormant dev` and the test suite:

    python -m dormant.dev.moto PORT [--data-dir DIR] [--parent PID] [--keep-alive]

moto's own server application behind `RequestGate` (DynamoDB, SQS and S3 requests serialized, long polls that
wait outside the lock), with an indexed Query (`partitions`), lazy queue attributes (`attributes`), plain JSON
item responses (`responses`), kept-alive connections (`keepalive`), optionally persistent (`persistence`: a
snapshot and a journal in DIR) and tied to its parent (`lifeline`: it stops when PID dies, even by kill -9).
SIGTERM and SIGINT stop it within a second; per-request access lines are not logged (only warnings).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from dormant.core.safetext import PrintableFormatter, printable
from dormant.dev import attributes, partitions, responses
from dormant.dev.gate import RequestGate
from dormant.dev.keepalive import keep_alive_handler
from dormant.dev.persistence import COMPACT_BYTES, Persistence, PersistenceError

log = logging.getLogger("dormant.dev.moto")


def build_app(data_dir: Path | None = None, *, compact_bytes: int = COMPACT_BYTES
              ) -> tuple[RequestGate, Persistence | None]:
    """moto's server app wrapped in the gate; with `data_dir`, its state restored from there first."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    partitions.install()
    attributes.install()
    responses.install()
    persistence = None
    if data_dir is not None:
        persistence = Persistence(data_dir, compact_bytes=compact_bytes)
        restored = persistence.restore()
        log.warning("restored %s: generation %d, %d table(s), %d item(s), %d message(s), %d bucket(s), %d object(s), "
                    "%d journal record(s)%s", data_dir, restored.generation, restored.tables, restored.items,
                    restored.messages, restored.buckets, restored.objects, restored.records,
                    " (a torn last record was dropped)" if restored.torn else "")
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # type: ignore[attr-defined]  # as moto_server sets it
    return RequestGate(app, persistence), persistence


def run_moto(port: int, host: str = "127.0.0.1", *, data_dir: Path | None = None,
             parent_pid: int | None = None, lifeline_fd: int | None = None,
             compact_bytes: int = COMPACT_BYTES, keep_alive: bool = False) -> None:
    """Serve until SIGTERM/SIGINT or the parent's death (blocks). `keep_alive`: HTTP/1.1 keep-alive
    (dormant.dev.keepalive), what `dormant dev` runs; off, every response closes its connection as werkzeug
    does (the test suite's shared servers, restarted under clients that keep pooled connections)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access line per request
    os.environ.setdefault("MOTO_PORT", str(port))
    gate, persistence = build_app(data_dir, compact_bytes=compact_bytes)
    handler = keep_alive_handler(MotoRequestHandler) if keep_alive else MotoRequestHandler
    server = make_server(host, port, gate, threaded=True, request_handler=handler)
    stopping = threading.Event()

    def stop(*_: Any) -> None:
        if not stopping.is_set():
            stopping.set()
            gate.stop()
            threading.Thread(target=server.shutdown, name="moto-shutdown", daemon=True).start()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if parent_pid is not None:
        from dormant.dev.lifeline import watch_parent

        watch_parent(parent_pid, stop, pipe_fd=lifeline_fd)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        if persistence is not None:
            persistence.close()  # every record is already written; nothing to flush


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dormant.dev.moto")
    parser.add_argument("port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--data-dir", type=Path, help="keep the state here (snapshot + journal)")
    parser.add_argument("--parent", type=int, help="stop when this process ends")
    parser.add_argument("--compact-bytes", type=int, default=COMPACT_BYTES,
                        help="snapshot once the journal is this big (default: %(default)s)")
    parser.add_argument("--lifeline-stdin", action="store_true", help="also stop at end of file on stdin")
    parser.add_argument("--keep-alive", action="store_true", help="keep drained connections open (HTTP/1.1)")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)  # moto.log: request paths in warnings stay on their line
    handler.setFormatter(PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        run_moto(args.port, args.host, data_dir=args.data_dir, parent_pid=args.parent,
                 lifeline_fd=sys.stdin.fileno() if args.lifeline_stdin else None, compact_bytes=args.compact_bytes,
                 keep_alive=args.keep_alive)
    except PersistenceError as error:
        print(f"dormant dev: {printable(str(error))}", file=sys.stderr)
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
