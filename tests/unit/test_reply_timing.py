"""When a waiting send reads for its answer (dormant.runtime.reply_timing): the first read learned at the median
of the answers' times, the later ones spaced by their spread, and what a wait may teach."""

from __future__ import annotations

import asyncio
import random
import statistics
import time

import pytest

from dormant.dynamodb.outputs import changed, poll
from dormant.runtime.reply_timing import (
    FIRST_DEFAULT,
    FIRST_MAX,
    PAUSE_MAX,
    PAUSE_MIN,
    READ_SECONDS,
    ReplyTiming,
)


def wait_for(timing: ReplyTiming, answer_at: float) -> tuple[float, int]:
    """One wait for an answer that is there `answer_at` seconds in: (when it was found, reads made)."""
    schedule = timing.schedule("desk")
    elapsed = 0.0
    while True:
        elapsed += schedule.pause(elapsed)
        found = elapsed >= answer_at
        schedule.looked(elapsed, found)
        if found:
            return elapsed, schedule.reads


def test_the_first_read_settles_at_the_median_of_the_answers_times() -> None:
    timing, draw = ReplyTiming(), random.Random(29)
    answers = [draw.uniform(0.3, 0.5) for _ in range(600)]  # median 0.4 s, far from the default
    for answer_at in answers:
        wait_for(timing, answer_at)
    recent = []
    for answer_at in answers[:200]:
        recent.append(timing.expected("desk"))
        wait_for(timing, answer_at)
    assert statistics.median(recent) == pytest.approx(0.4, rel=0.1)
    assert timing.expected("other") == FIRST_DEFAULT  # learned per actor type


def test_a_learned_schedule_reads_a_few_times_and_finds_the_answer_soon_after_it_is_there() -> None:
    timing, draw = ReplyTiming(), random.Random(5)
    for _ in range(300):
        wait_for(timing, draw.uniform(0.12, 0.18))
    waits = [(answer_at, *wait_for(timing, answer_at)) for answer_at in
             [draw.uniform(0.12, 0.18) for _ in range(200)]]
    assert statistics.mean(reads for _, _, reads in waits) < 2.5
    assert statistics.mean(found - answer_at for answer_at, found, _ in waits) < 0.03


def test_later_reads_are_spaced_by_the_spread_and_widen_for_a_late_answer() -> None:
    timing = ReplyTiming()
    schedule = timing.schedule("desk")
    assert schedule.pause(0.0) == FIRST_DEFAULT  # nothing before the first read
    schedule.looked(FIRST_DEFAULT, False)
    soon = schedule.pause(FIRST_DEFAULT)
    assert PAUSE_MIN <= soon < 0.1
    later = schedule.pause(FIRST_DEFAULT + 2.0)
    assert later == pytest.approx((2.0 * READ_SECONDS) ** 0.5) and later > soon
    assert schedule.pause(FIRST_DEFAULT + 1000.0) == PAUSE_MAX


def test_a_first_read_made_early_teaches_only_when_it_found_the_answer() -> None:
    timing = ReplyTiming()
    early = timing.schedule("desk")  # woken early (the dev stack's commit signal, a deadline) and missed
    early.looked(FIRST_DEFAULT / 2, False)
    early.looked(FIRST_DEFAULT * 2, True)
    assert timing.expected("desk") == FIRST_DEFAULT
    found = timing.schedule("desk")  # woken early and found: it was there by the scheduled time too
    found.looked(FIRST_DEFAULT / 2, True)
    assert timing.expected("desk") < FIRST_DEFAULT
    missed = timing.schedule("desk")
    before = timing.expected("desk")
    missed.looked(before, False)
    missed.looked(before + 0.05, True)
    assert timing.expected("desk") > before


def test_waits_that_no_answer_ends_teach_nothing() -> None:
    """Sends to a queue whose receive does not answer (or to a stopped actor) must not push the first read of the
    answered ones late."""
    timing = ReplyTiming()
    for _ in range(100):
        unanswered = timing.schedule("desk")
        for elapsed in (FIRST_DEFAULT, FIRST_DEFAULT + 0.05, FIRST_DEFAULT + 0.1):
            unanswered.looked(elapsed, False)
    assert timing.expected("desk") == FIRST_DEFAULT
    assert timing.schedule("desk").late == timing.schedule("other").late


async def test_the_dynamodb_poll_reads_on_the_schedule_once_by_its_deadline() -> None:
    timing = ReplyTiming()
    timing.learn_first("desk", FIRST_MAX, False)  # a first read far beyond this wait's deadline
    reads: list[float] = []

    async def fetch() -> str | None:
        reads.append(0.0)
        return None

    assert await poll(fetch, 0.05, schedule=timing.schedule("desk")) is None
    assert len(reads) == 1  # no read before the schedule's first, one at the deadline


async def test_a_commit_signal_ends_a_scheduled_pause_at_once() -> None:
    """`dormant dev`: the worker's commit in the same process makes the waiting request read now."""
    timing = ReplyTiming()
    timing.learn_first("desk", FIRST_MAX, False)
    answered = asyncio.Event()

    async def fetch() -> str | None:
        return "answer" if answered.is_set() else None

    waiting = asyncio.ensure_future(poll(fetch, 600.0, key="actor-1", schedule=timing.schedule("desk")))
    answered.set()
    deadline = time.monotonic() + 30
    while not waiting.done() and time.monotonic() < deadline:
        changed("actor-1")
        await asyncio.wait([waiting], timeout=0.01)
    assert waiting.done() and waiting.result() == "answer"
