"""How `pytest -n N --dist loadgroup` shares the suite out: each test on its own, but these groups on one worker each:

- "localstack": every test on LocalStack (tests/localstack.py: ON_LOCALSTACK), so one LocalStack (~700 MB, a JVM)
  serves them rather than one per worker;
- "terraform": tests/deploy/test_terraform.py, whose session fixture applies infra/ (minutes, mostly waiting): one
  apply, not one per worker that runs one of its tests.

pytest-xdist 3.8.0 has its own `xdist_group` mark for this, but under pytest 9.2 it is silently ignored (xdist renames
`item._nodeid`, which pytest 9 no longer reads: seen here, the LocalStack tests ran on every worker, each starting its
own); so the groups are read from node ids instead.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

# A parameter id with a `localstack` part ("[localstack]", "[localstack-threads]", "[localstack-hung-primary]") or the
# dev-stack end-to-end module on LocalStack.
_LOCALSTACK = re.compile(r"\[(?:[^\]]*-)?localstack(?:-[^\]]*)?\]|/test_dev_localstack\.py::")
_TERRAFORM = "tests/deploy/test_terraform.py::"


def group_of(nodeid: str) -> str | None:
    """The group a test runs in, None for a test on its own."""
    if _LOCALSTACK.search(nodeid):
        return "localstack"
    if nodeid.startswith(_TERRAFORM):
        return "terraform"
    return None


def scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's loadgroup scheduling with the groups above."""
    from xdist.scheduler import LoadGroupScheduling

    class Grouped(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or str(super()._split_scope(nodeid))

    return Grouped(config, log)
