"""Work done in a Lambda function's init phase instead of its first request.

The init phase is what a SnapStart snapshot captures (template.yaml / infra/ `snap_start`): everything
imported and built there is restored, not redone, on a cold start. Without SnapStart the total is the same,
but the first request no longer pays for the session and the clients.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dormant.settings import Settings


def open_api_service(app: Any, settings: Settings) -> None:
    """Open the HTTP app's AWS clients in the event loop Mangum runs requests on (create Mangum first: it
    sets that loop up). The clients open no connection until the first request. Without both queue URLs
    (resolving them would call SQS) or inside a running event loop (a test), it leaves that to the first request."""
    if not (settings.queue_url and settings.timer_queue_url):
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.get_event_loop().run_until_complete(app.state.services.get())
