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


def test_a_timer_batch_pays_the_receive_that_closes_its_window_unless_it_fills() -> None:
    """The deployment's timer event source gathers for 1 s: a batch it does not fill ends with a receive that
    returns nothing. The measured column counts it with the batch, so the floor does too; not for a full batch,
    nor for a source without a window."""
    sleep = dict(ONE, commits=2, timers=1)
    alone = Floor(**sleep).usage()  # type: ignore[arg-type]
    assert alone.sqs_standard == 1 + 2 + 1  # the timer's send, its receive and delete, the closing receive
    full = Floor(**sleep, timer_batch=10).usage()  # type: ignore[arg-type]
    assert full.sqs_standard == pytest.approx(1 + 0.2)
    no_window = Floor(**sleep, timer_window=False).usage()  # type: ignore[arg-type]
    assert no_window.sqs_standard == 1 + 2
    assert Floor(**ONE).usage().sqs_standard == 0  # type: ignore[arg-type]  # no timer, no timer batch


def test_the_floor_gathers_timer_batches_as_the_deployment_does() -> None:
    """The floor's timer batch size and window are template.yaml's (checked against infra/ by prices.deployment)."""
    from benchmarks.pricing import TIMER_BATCH_MAX

    deploy = prices.deployment()
    assert deploy.timer_batch_size == TIMER_BATCH_MAX
    assert deploy.timer_batching_window > 0  # Floor.timer_window's default: a window that can end unfilled
