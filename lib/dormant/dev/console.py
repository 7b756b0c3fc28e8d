"""The dev console: one timestamped line per HTTP request and per wake-up, errors with their actor.

    2026-12-01 09:46:09.123 INFO  http  POST /actors/workflow-counter/main/queues/counter -> 202 in 4.1 ms
    2026-12-01 09:46:09.140 INFO  wake  workflow-counter['main'] sleeping: 1 step, 1 commit, 1 message in 12.3 ms ...
    2026-12-01 09:46:09.141 ERROR wake  checkout['o-1'] failed (receive 2): StorageError: ...

The lines come from the `dormant.http` (dormant.http.access) and `dormant.wake` (dormant.aws.observability)
loggers; this module only chooses a readable format and the level (`--log-level`). Messages carry request
paths, keys and error texts that callers chose: each is kept on its line with its controls escaped
(dormant.core.safetext), and the lines of a traceback are indented, so nothing can forge a line or act on the terminal.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

from dormant.core.safetext import PrintableFormatter, printable

TAGS = {"dormant.http": "http", "dormant.wake": "wake", "dormant.sqs.poller": "sqs", "dormant.aws.worker": "worker",
        "dormant.dev.moto": "moto", "uvicorn.error": "api"}
_HANDLER_NAME = "dormant-dev-console"


class ConsoleFormatter(PrintableFormatter):
    """`date time.ms LEVEL tag message`, tracebacks indented below (both escaped: dormant.core.safetext)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        tag = TAGS.get(record.name) or record.name.rpartition(".")[2]
        line = f"{moment}.{int(record.msecs):03d} {record.levelname:<5} {tag:<5} {printable(record.getMessage())}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_console(level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send dormant's (and uvicorn's) log records to `stream` (stderr) as console lines at `level`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(ConsoleFormatter())
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning or error")
    for name in ("dormant", "uvicorn.error"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(numeric)
        logger.propagate = False
    # The per-wake-up detail the worker logs at INFO is repeated by the wake-up line: keep it for debug.
    logging.getLogger("dormant.aws.worker").setLevel(max(numeric, logging.WARNING)
                                                     if numeric > logging.DEBUG else logging.DEBUG)
    logging.getLogger("dormant.dynamodb.store").setLevel(max(numeric, logging.WARNING)
                                                    if numeric > logging.DEBUG else logging.DEBUG)
    # uvicorn's own INFO lines (started, shutting down) repeat what `dormant dev` prints
    logging.getLogger("uvicorn.error").setLevel(max(numeric, logging.WARNING)
                                                if numeric > logging.DEBUG else logging.DEBUG)
    return handler
