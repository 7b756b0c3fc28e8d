"""The priced table's floors (benchmarks/pricing.py): the architecture's, and the one with this design's dedupe rule,
which adds per message a tombstone and an ordered entry written and removed (docs/storage.md)."""

from __future__ import annotations

import pytest

from benchmarks import prices
from benchmarks.pricing import Floor, total

ONE = dict(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1)


def test_the_dedupe_rule_costs_three_write_units_per_message() -> None:
    floor = Floor(**ONE)  # type: ignore[arg-type]
    plain, ruled = floor.usage(), floor.guaranteed_usage()
    assert (ruled.write_units - plain.write_units, ruled.index_write_units - plain.index_write_units) == (1, 2)
    deploy = prices.deployment()  # what template.yaml configures
    extra = total(ruled, deploy) - total(plain, deploy)
    assert extra == pytest.approx(3 * prices.DYNAMODB_WRITE_UNIT)


def test_a_creation_is_not_a_message() -> None:
    floor = Floor(**{**ONE, "commits": 3}, messages=0)  # type: ignore[arg-type]
    assert floor.guaranteed_usage() == floor.usage()


def test_ten_per_batch_still_pays_per_message() -> None:
    batched = Floor(requests=1, inbox_writes=1, sends=1, deliveries=0.1, loads=0.1, commits=1)
    assert batched.guaranteed_usage().index_write_units == 2
