"""schemathesis against the served API: every operation of /openapi.json, with generated (and mutated)
requests, answers without a 5xx and with a status, content type, headers and body that the document
declares (tests/api/fuzzing.py: the app under uvicorn on its own thread over a TestEnv, wake-ups run as messages
arrive). Bounded: `DORMANT_FUZZ_EXAMPLES` examples per operation (default 6; 10 under `make check`; `make fuzz`
runs more). The release tier (tests/conftest.py: building a test per operation is seconds of every collection).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

from tests.api.fuzzing import CHECKS, EXAMPLES, TOKEN, document, served

__all__ = ["served"]  # (the module-scoped fixture the test below uses)

schema = schemathesis.openapi.from_dict(document())


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx_or_off_its_schema(case: Any, served: str) -> None:
    case.call_and_validate(base_url=served, headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS,
                           timeout=30)
