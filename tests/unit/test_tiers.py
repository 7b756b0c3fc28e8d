"""The two tiers' rule (tests/conftest.py `tier_of`): which test `make test` runs and which only `make check` does.

The rule reads node ids, markers and parameters; these items stand for the tests it sorts (a real collection takes
seconds: the rule is checked on what it reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import tier_of


@dataclass
class _CallSpec:
    params: dict[str, Any]


@dataclass
class _Item:
    nodeid: str
    params: dict[str, Any] = field(default_factory=dict)
    markers: tuple[str, ...] = ()

    @property
    def callspec(self) -> _CallSpec:
        return _CallSpec(self.params)

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name in self.markers else None


@pytest.mark.parametrize(("nodeid", "params", "tier"), [
    # the DynamoDB store: on DynamoDB Local in tier 1, on every other server in tier 2
    ("tests/contract/test_log.py::test_x[dynamodb_local]", {"backend": "dynamodb_local"}, 1),
    ("tests/contract/test_log.py::test_x[memory]", {"backend": "memory"}, 1),
    ("tests/contract/test_log.py::test_x[moto]", {"backend": "moto"}, 2),
    ("tests/contract/test_checks.py::test_x[moto-version-read]", {"backend": "moto", "read": "version-read"}, 2),
    ("tests/integration/test_aws_store.py::test_x[moto]", {"store": "moto"}, 2),
    ("tests/integration/test_worker.py::test_x[moto]", {"aws": "moto"}, 2),
    ("tests/integration/test_worker.py::test_x[dynamodb_local-threads]", {"aws": "dynamodb_local-threads"}, 2),
    ("tests/integration/test_large_values.py::test_x[moto]", {"endpoints": "moto"}, 2),
    ("tests/integration/test_limits.py::test_x[moto]", {"env": "moto"}, 2),
    ("tests/integration/test_search.py::test_x[moto]", {"dynamo": "moto"}, 2),
    ("tests/integration/test_flow.py::test_x[moto]", {"server_name": "moto"}, 2),
    ("tests/integration/test_dedupe_window.py::test_x[moto]", {"clocked": "moto"}, 2),
    ("tests/integration/test_aws_store.py::test_x[dynalite]", {"store": "dynalite"}, 2),
    # "moto" as SQS's server, or as `dormant dev`'s embedded default: tier 1
    ("tests/integration/test_transport.py::test_x[moto]", {"endpoint": "moto"}, 1),
    ("tests/e2e/test_dev_stack.py::test_x[moto]", {"dynamodb": "moto"}, 1),
    ("tests/e2e/test_dev_stack.py::test_dev_runs_the_whole_stack_and_stops_on_ctrl_c[moto]", {"dynamodb": "moto"}, 1),
    ("tests/e2e/test_dev_stack.py::test_dev_runs_the_whole_stack_and_stops_on_ctrl_c[local]", {"dynamodb": "local"},
     2),
    # LocalStack, whatever the parameter's name
    ("tests/integration/test_transport.py::test_x[localstack]", {"endpoint": "localstack"}, 2),
    # whole paths and single tests
    ("tests/deploy/test_sam.py::test_x", {}, 2),
    ("tests/api/test_fuzz_operations.py::test_x[GET /x]", {}, 2),
    ("tests/api/test_fuzz.py::test_x", {}, 1),
    ("tests/examples/test_x.py::test_x[aws]", {"backend": "aws"}, 2),
    ("tests/examples/test_x.py::test_x[memory]", {"backend": "memory"}, 1),
])
def test_each_test_is_in_its_tier(nodeid: str, params: dict[str, Any], tier: int) -> None:
    assert tier_of(_Item(nodeid, params)) == tier  # type: ignore[arg-type]


def test_a_tier2_marker_puts_any_test_in_tier_2() -> None:
    assert tier_of(_Item("tests/unit/test_x.py::test_x", markers=("tier2",))) == 2  # type: ignore[arg-type]
    assert tier_of(_Item("tests/unit/test_x.py::test_x")) == 1  # type: ignore[arg-type]
