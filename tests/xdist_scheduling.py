"""How `pytest -n N --dist loadscope` shares the suite out: a module's tests on one worker, in order (some modules'
tests build on the one before, as tests/deploy/test_stack.py's do, and module fixtures are set up once, not once per
worker; tests/deploy/test_terraform.py's session fixture applies infra/ once), and every test on LocalStack
(tests/localstack.py: ON_LOCALSTACK), whatever its module, on one worker: one LocalStack (~700 MB, a JVM), not one
per worker.

pytest-xdist 3.8.0's own way to group tests, `--dist loadgroup` with the `xdist_group` mark, is silently ignored under
pytest 9.2 (xdist renames `item._nodeid`, which pytest 9 no longer reads: seen here, the LocalStack tests ran on every
worker, each starting its own), so the group is read from node ids.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.durations import estimate

# A parameter id with a `localstack` part ("[localstack]", "[localstack-threads]", "[localstack-hung-primary]") or the
# dev-stack end-to-end module on LocalStack.
_LOCALSTACK = re.compile(r"\[(?:[^\]]*-)?localstack(?:-[^\]]*)?\]|/test_dev_localstack\.py::")


def group_of(nodeid: str) -> str | None:
    """The group a test runs in, None for its module's."""
    return "localstack" if _LOCALSTACK.search(nodeid) else None


def scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's loadscope scheduling (by module) with the groups above."""
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):  # type: ignore[misc]
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or str(super()._split_scope(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            # Longest first (tests/durations.py), not xdist's most-tests first: a module of a few long end-to-end
            # tests handed out last kept one worker busy for a minute while the other idled.
            if not self.ordered:
                self.ordered = True
                queue = sorted(self.workqueue.items(), key=lambda unit: -estimate(unit[0], len(unit[1])))
                self.workqueue.clear()
                self.workqueue.update(queue)
            super()._assign_work_unit(node)

    return Grouped(config, log)
