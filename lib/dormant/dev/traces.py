"""`dormant dev`'s traces: spans kept in a bounded ring in memory (the dashboard's timeline shows them per actor)
and, with `OTEL_TRACES_EXPORTER` or `OTEL_EXPORTER_OTLP_ENDPOINT` set, exported as well (a local Jaeger, any
collector). On unless `OTEL_SDK_DISABLED=true`; without the OpenTelemetry SDK installed there are no spans and the
timeline draws from history alone."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from dormant.runtime import tracing

log = logging.getLogger("dormant.dev")
RING_SPANS = 5000  # about a hundred wake-ups' worth of steps: enough to look at, bounded for a long session


def dev_tracing(size: int = RING_SPANS) -> Callable[[], None]:
    """Turn the dev stack's tracing on; returns what turns it back to what it was."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() in tracing.TRUE:
        return tracing.install(None)
    try:
        built = tracing.build(exporters=None if tracing.requested() else [], ring=tracing.SpanRing(size))
    except ImportError:
        log.info("no OpenTelemetry SDK here (pip install opentelemetry-sdk): the dashboard's timeline shows history "
                 "only")
        return tracing.install(None)
    return tracing.install(built)
