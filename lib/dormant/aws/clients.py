"""The Lambda functions' AWS clients: how a function's settings choose them (`function_settings`). The client factory
itself is dormant.core.clients (below the backends, which open their own clients too), re-exported here."""

from __future__ import annotations

import os

from dormant.core.clients import (
    POOL_THREADS,
    ClientKind,
    ClientSettings,
    ThreadedClient,
    botocore_session,
    client_options,
    inline_calls,
    open_client,
    open_clients,
)
from dormant.settings import Settings

__all__ = ["POOL_THREADS", "ClientKind", "ClientSettings", "ThreadedClient", "botocore_session", "client_options",
           "function_settings", "inline_calls", "open_client", "open_clients"]


def function_settings() -> Settings:
    """`Settings()` for a Lambda function (functions/*/handler.py): `threads` clients unless DORMANT_AWS_CLIENTS
    names a kind."""
    if os.environ.get("DORMANT_AWS_CLIENTS"):
        return Settings()
    return Settings(aws_clients="threads")
