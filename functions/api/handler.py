"""API Lambda entry point: the HTTP API (dormant.http.app) behind API Gateway, through Mangum.

Configuration comes from the environment (dormant.settings.Settings): DORMANT_APP names the registry
(`module:attribute`), DORMANT_TABLE / DORMANT_QUEUE_* the resources, DORMANT_AUTH_MODE how API Gateway
authenticated the caller, DORMANT_INSPECTOR_TOKEN_PARAMETER the SSM parameter holding the operator token
(read at run time). The AWS clients are opened on the first request and reused by the container.
"""

from __future__ import annotations

from mangum import Mangum

from dormant.actor import load_registry
from dormant.http.app import create_app
from dormant.settings import Settings

settings = Settings()
if not settings.app:
    raise RuntimeError("set DORMANT_APP=module:attribute to the registry the API serves")
app = create_app(load_registry(settings.app), settings)
handler = Mangum(app, lifespan="off")
