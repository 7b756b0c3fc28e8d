"""ConsumedMessages: which wake-up messages need no wake-up (dormant.aws.consumed). The worker's use of it is in
tests/integration/test_burst_wakeups.py."""

from __future__ import annotations

from dormant.aws.consumed import ConsumedMessages
from dormant.ports import ActorRef, Creation, InboxMessage
from dormant.sqs.transport import WakeMessage

REF = ActorRef(name="workflow-counter", key=("k",))


def wake(message_id: str = "m1", *, created_at: float = 100.0, **extra: object) -> WakeMessage:
    message = InboxMessage(id=message_id, queue="counter", body={"delta": 1}, created_at=created_at,
                           **extra)  # type: ignore[arg-type]
    return WakeMessage.for_ref(REF, message=message)


def test_a_message_consumed_by_a_later_load_needs_no_wake_up() -> None:
    consumed = ConsumedMessages()
    consumed.add(REF.id, {"m1": 101.0, "m2": 101.0})
    assert consumed.done(REF.id, wake("m1")) and consumed.done(REF.id, wake("m2"))
    assert not consumed.done(REF.id, wake("m3"))  # not consumed here
    assert not consumed.done(ActorRef(name="workflow-counter", key=("other",)).id, wake("m1"))  # another actor


def test_a_re_send_of_a_consumed_id_after_the_consuming_load_still_wakes() -> None:
    consumed = ConsumedMessages()
    consumed.add(REF.id, {"m1": 101.0})
    assert not consumed.done(REF.id, wake("m1", created_at=101.0))  # not provably before the load
    assert not consumed.done(REF.id, wake("m1", created_at=250.0))  # e.g. to a re-created actor


def test_only_queue_message_wake_ups_are_recognised() -> None:
    consumed = ConsumedMessages()
    consumed.add(REF.id, {"m1": 101.0})
    assert not consumed.done(REF.id, WakeMessage.for_ref(REF))  # "look at this actor": always runs
    timer = wake("m1").model_copy(update={"due": 50.0})
    assert not consumed.done(REF.id, timer)
    creating = wake("m1").model_copy(update={"creation": Creation(input=None)})
    assert consumed.done(REF.id, creating)  # a first send's: the actor that consumed the message was created
    assert not consumed.done(REF.id, wake("m1", kind="action"))


def test_a_later_sighting_widens_what_is_known_consumed() -> None:
    consumed = ConsumedMessages()
    consumed.add(REF.id, {"m1": 101.0})
    consumed.add(REF.id, {"m1": 300.0})  # a later load saw it consumed too
    consumed.add(REF.id, {"m1": 200.0})  # an older sighting arriving late narrows nothing
    assert consumed.done(REF.id, wake("m1", created_at=250.0))


def test_the_memory_is_bounded_oldest_first() -> None:
    consumed = ConsumedMessages(limit=3)
    consumed.add(REF.id, dict.fromkeys("abc", 101.0))
    consumed.add(REF.id, {"d": 102.0})
    assert len(consumed) == 3
    assert not consumed.done(REF.id, wake("a")) and consumed.done(REF.id, wake("d"))


async def test_a_wake_up_reports_what_it_consumed_and_what_its_load_saw_consumed() -> None:
    """WakeReport.consumed (what the worker feeds this with): a message the wake-up consumed at its commit's start,
    one consumed before at the load's start."""
    from dormant.testing import TestEnv
    from examples.counter import registry

    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("workflow-counter", ["k"])
        await handle.send("counter", {"delta": 1}, message_id="first")
        await env.run_until_idle()
        assert env.reports[-1].consumed == {"first": env.clock.now()}
        await env.advance(5)
        await handle.send("counter", {"delta": 1}, message_id="second")
        await env.run_until_idle()
        assert env.reports[-1].consumed == {"first": env.clock.now(), "second": env.clock.now()}
