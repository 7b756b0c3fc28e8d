"""The life of values kept in S3, as a model-based property test (issue 26.1): random sends of large values, some
repeated (the same content in several pending messages, in the state and in history) and some unique, pauses,
wake-ups with compaction and ring laps, sweeps, deletions, and kill -9 between any two storage calls of a send or a
wake-up. After every step, the test reads the whole table and the whole bucket on its own (no store code) and checks:

- **nothing stored refers to a missing object**: every reference in every item a reader can load (each commit of
  the live actor's ring, each pending inbox item, responses and events) names an object in the bucket, and so does
  every reference inside those objects (a value made of parts);
- **no object lives forever**: once time passes beyond the sweep's grace period and the actor commits, every
  object under its prefix is referred to, or released by a version still in the ring (deleted a lap later); its
  deletion removes them all.

A kill is the process dying at that call (before it reaches the server, or after the server applied it but before
the answer): the store and the service are dropped with their caches and a new "process" goes on; the wake-up whose
process died, and the messages its request carried, come again, as SQS redelivers them.

Runs on DynamoDB Local and on moto (DynamoDB), S3 on moto. DORMANT_OFFLOAD_EXAMPLES sets how many runs, each of up to
DORMANT_OFFLOAD_STEPS steps; `make fuzz` runs 3,000 steps per backend.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiobotocore.session import get_session  # type: ignore[import-untyped]
from hypothesis import HealthCheck, Phase, settings, strategies
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore, create_table
from dormant.errors import StorageError
from dormant.ports import ActorRef, Creation, InboxMessage
from dormant.runtime.clocks import OffsetClock
from dormant.runtime.service import ActorService
from dormant.runtime.wake import wake_actor
from dormant.s3.blobs import S3Blobs
from dormant.settings import Settings
from dormant.workflow.errors import DormantError
from tests.large_app import registry
from tests.references import listing, parts, readable_references, scan

EXAMPLES = int(os.environ.get("DORMANT_OFFLOAD_EXAMPLES", "10"))  # `make fuzz`: 50 runs of 60 steps per backend
STEPS = int(os.environ.get("DORMANT_OFFLOAD_STEPS", "40"))
GRACE = 1000.0  # seconds: more than any message waits in flight here (SQS keeps one 14 days; the grace is 15)
THRESHOLD = 1024  # the lowest the settings allow: values of ~1.5 KB go to S3, a state of a few chunks has parts
# Shrinking replays hundreds of I/O-bound runs: only where asked (DORMANT_SHRINK=1), to read a failure's shortest form
PHASES = list(Phase) if os.environ.get("DORMANT_SHRINK") == "1" else [Phase.explicit, Phase.reuse, Phase.generate]
KILLS = strategies.none() | strategies.tuples(strategies.integers(0, 14), strategies.booleans())  # of a send
SHARED = ["s" * 1500, "t" * 2500, "u" * 4000]  # contents that several messages carry


class Killed(BaseException):
    """The process died (kill -9): nothing after this runs, nothing catches it."""


class KillSwitch:
    """Counts the storage calls made through the clients it wraps; the armed one dies."""

    def __init__(self) -> None:
        self.calls = 0
        self.armed: tuple[int, bool] | None = None  # (call number, after the server applied it)

    def arm(self, at: int, after: bool) -> None:
        self.calls, self.armed = 0, (at, after)

    def disarm(self) -> bool:
        """Disarms; True if the armed kill fired."""
        fired = self.armed is None
        self.armed = None
        return fired

    async def call(self, method: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
        number, self.calls = self.calls, self.calls + 1
        if self.armed is not None and self.armed[0] == number:
            after = self.armed[1]
            self.armed = None
            if after:
                await method(**kwargs)
            raise Killed()
        return await method(**kwargs)


class Wrapped:
    """A client whose calls go through the kill switch (everything else as the client's)."""

    def __init__(self, client: Any, switch: KillSwitch) -> None:
        self._client, self._switch = client, switch

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        async def call(**kwargs: Any) -> Any:
            return await self._switch.call(attribute, kwargs)
        return call


class Carrier:
    """SQS, as far as this test needs it: the wake-ups sent, with the messages and creations they carry, kept until
    a wake-up of the actor ends without dying (then deleted, as the worker deletes a handled SQS message)."""

    def __init__(self) -> None:
        self.messages: list[InboxMessage] = []
        self.creation: Creation | None = None
        self.due = False

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        if at is not None:
            return  # no timers in this app
        self.due = True
        if message is not None:
            self.messages.append(message)
        if creation is not None:
            self.creation = creation

    async def wake_many(self, ref: ActorRef, messages: list[InboxMessage], *,
                        creation: Creation | None = None) -> list[str]:
        for index, message in enumerate(messages):
            await self.wake(ref, message=message, creation=creation if index == 0 else None)
        return [message.id for message in messages]


class OffloadLifecycle(RuleBasedStateMachine):
    """One actor of tests/large_app.py's notebook on a fresh table and bucket (see the module docstring)."""

    endpoints: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        suffix = uuid.uuid4().hex[:10]
        self.settings = Settings(**self.endpoints, table=f"lifecycle-{suffix}", bucket=f"lifecycle-{suffix}",
                                 offload_threshold_bytes=THRESHOLD, snapshot_every=4, blob_sweep_every=1,
                                 blob_orphan_grace_seconds=int(GRACE))
        self.clock = OffsetClock()  # the runtime's: real time
        # The store's clock, ahead of real time only while time "passes": S3 dates objects in real time, so a store
        # clock left ahead would make every object written afterwards look past the grace at once (a message a
        # killed send left in flight would be swept before its wake-up stores it: not what 15 days of grace allow)
        self.ahead = 0.0
        self.switch = KillSwitch()
        self.carrier = Carrier()
        self.ref = ActorRef(name="large-notebook", key=("lifecycle",))
        self.unique = 0
        self.kills = 0
        self.run(self._open())

    def run(self, operation: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(operation)

    async def _open(self) -> None:
        session = get_session()
        self.exits: list[Any] = []
        for service in ("dynamodb", "s3"):
            endpoint = self.settings.dynamodb_endpoint_url if service == "dynamodb" else None
            context = session.create_client(service, region_name="us-east-1", aws_access_key_id="test",
                                            aws_secret_access_key="test",
                                            endpoint_url=endpoint or self.settings.endpoint_url)
            client = await context.__aenter__()
            self.exits.append(context)
            setattr(self, service, client)
        await create_table(self.dynamodb, self.settings)
        await self.s3.create_bucket(Bucket=self.settings.bucket)
        self._new_process()

    def _new_process(self) -> None:
        """A fresh store and service (nothing cached): what a new Lambda container or a restarted worker has."""
        blobs = S3Blobs(Wrapped(self.s3, self.switch), self.settings.bucket)
        self.store = DynamoEventStore(Wrapped(self.dynamodb, self.switch), self.settings, blobs=blobs,
                                      clock=lambda: time.time() + self.ahead)
        self.service = ActorService(registry, self.store, self.carrier, self.clock)  # type: ignore[arg-type]
        self.handle = Client(self.service).get_or_create(self.ref.name, list(self.ref.key))

    async def _killable(self, operation: Callable[[], Awaitable[Any]], kill: tuple[int, bool] | None) -> None:
        if kill is not None:
            self.switch.arm(*kill)
        try:
            await operation()
        except Killed:
            self.kills += 1
            self._new_process()
        except StorageError as error:  # a send cut off: reported to its caller, who may send again
            assert "is not in bucket" not in str(error), error
        except DormantError:
            pass  # an operator's request refused (a pause of a missing actor...): refused, nothing changed
        finally:
            self.switch.disarm()

    # -- rules ---------------------------------------------------------------------------------------------------
    def _send(self, queue: str, body: dict[str, Any], kill: tuple[int, bool] | None) -> None:
        self.run(self._killable(lambda: self.handle.send(queue, body), kill))

    @rule(shared=strategies.integers(0, len(SHARED)), kill=KILLS)
    def send_echo(self, shared: int, kill: tuple[int, bool] | None) -> None:
        if shared == len(SHARED):
            self.unique += 1
            text = f"unique {self.unique} " + "v" * 1800
        else:
            text = SHARED[shared]
        self._send("echo", {"text": text}, kill)

    @rule(kb=strategies.sampled_from([0, 2]), fill=strategies.sampled_from("ab"), kill=KILLS)
    def send_append(self, kb: int, fill: str, kill: tuple[int, bool] | None) -> None:
        self._send("append", {"kb": kb, "fill": fill}, kill)

    @rule(size=strategies.sampled_from([10, 3000]), kill=KILLS)
    def send_result(self, size: int, kill: tuple[int, bool] | None) -> None:
        self._send("result", {"size": size}, kill)

    @rule(kill=strategies.none() | strategies.tuples(strategies.integers(0, 40), strategies.booleans()))
    def wake(self, kill: tuple[int, bool] | None) -> None:
        """The wake-up SQS hands out (again, if its process died), with what it carries."""
        carried, creation = list(self.carrier.messages), self.carrier.creation

        async def operation() -> None:
            await wake_actor(self.service, self.ref, messages=carried, creation=creation)
            self.carrier.messages = [m for m in self.carrier.messages if m not in carried]  # handled: deleted
            self.carrier.creation = None if self.carrier.creation is creation else self.carrier.creation
            self.carrier.due = bool(self.carrier.messages)

        self.run(self._killable(operation, kill))

    @rule()
    def pause(self) -> None:
        self.run(self._killable(lambda: self.handle.pause("model"), None))

    @rule()
    def unpause(self) -> None:
        self.run(self._killable(self.handle.unpause, None))

    @precondition(lambda self: not self.carrier.messages)
    @rule()
    def time_passes(self) -> None:
        """Past the sweep's grace: nothing is in flight (SQS keeps a message 14 days, the grace is 15); a commit then
        sweeps every object older than that."""
        self.ahead = GRACE + 1
        try:
            self._send("append", {"kb": 0}, None)
            self.wake(None)
        finally:
            self.ahead = 0.0

    @rule()
    def delete(self) -> None:
        self.run(self._killable(self.handle.delete, None))

    # -- what must hold ------------------------------------------------------------------------------------------
    @invariant()
    def nothing_refers_to_a_missing_object(self) -> None:
        self.run(self._check_references())

    async def _check_references(self) -> tuple[dict[str, str], set[str], set[str]]:
        references, released = readable_references(await scan(self.dynamodb, self.settings.table))
        objects = await listing(self.s3, self.settings.bucket)
        missing = {key: where for key, where in references.items() if key not in objects}
        assert not missing, f"items refer to objects that are not in the bucket: {missing}"
        # References inside the objects (a value made of parts): those of a readable object must be there; those of
        # a released one (a version still in the ring) may go only with it.
        bucket = self.settings.bucket
        readable = await parts(self.s3, bucket, references, objects, must=True)
        return references, released, readable | await parts(self.s3, bucket, released & objects, objects, must=False)

    def teardown(self) -> None:
        try:
            if self.switch.armed is None:
                self.run(self._no_object_lives_forever())
        finally:
            for context in reversed(self.exits):
                self.run(context.__aexit__(None, None, None))
            self.loop.close()

    async def _no_object_lives_forever(self) -> None:
        """Everything delivered and run, time past the grace, then commits until a sweep ran: every object is
        referred to or released by the ring; a deletion leaves none."""
        self.switch.disarm()
        if await self._status() == "paused":
            await self.handle.unpause()
        await wake_actor(self.service, self.ref, messages=list(self.carrier.messages), creation=self.carrier.creation)
        self.carrier.messages = []
        self.ahead = GRACE + 1  # (nothing is in flight any more, and these commits write no object)
        for _ in range(2):  # commits (each followed by a sweep: blob_sweep_every=1) past the grace
            await self.handle.send("append", {"kb": 0})
            await wake_actor(self.service, self.ref)
            self.carrier.messages = []
        _, released, referred = await self._check_references()
        objects = await listing(self.s3, self.settings.bucket)
        durable = {key for key in objects if key.startswith("actors/")}
        stranded = durable - referred - released
        assert not stranded, f"objects nothing refers to outlived a sweep past the grace: {sorted(stranded)}"
        await self.handle.delete()
        left = {key for key in await listing(self.s3, self.settings.bucket)}
        assert not left, f"objects outlived the actor's deletion: {sorted(left)}"

    async def _status(self) -> str:
        snapshot = await self.store.load(self.ref)
        return snapshot.workflow.state.value if snapshot is not None else "missing"


@pytest.fixture(params=["dynamodb_local", "moto"])
def endpoints(request: pytest.FixtureRequest) -> dict[str, str]:
    s3 = request.getfixturevalue("moto_server")
    dynamodb = request.getfixturevalue("dynamodb_local_server") if request.param == "dynamodb_local" else s3
    return {"endpoint_url": s3, "dynamodb_endpoint_url": dynamodb}


@pytest.mark.timeout(900)
def test_no_item_refers_to_a_missing_object_and_no_object_lives_forever(endpoints: dict[str, str]) -> None:
    OffloadLifecycle.endpoints = endpoints
    run_state_machine_as_test(OffloadLifecycle, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=False,
        suppress_health_check=list(HealthCheck), phases=PHASES))


def test_the_reference_scan_sees_what_the_store_writes() -> None:
    """The checker itself: a commit's compressed payload and an inbox item's JSON are both read."""
    payload = zlib.compress(json.dumps({"s": {"x": {"__dormant_blob__": "actors/a/b-v2", "n": 3}}}).encode())
    items = [{"sk": {"S": "c#000"}, "c": {"S": "1"}, "z": {"B": payload}, "r": {"SS": ["actors/a/old-v1"]}},
             {"sk": {"S": "i#m1"}, "m": {"S": '{"body":{"__dormant_blob__":"actors/a/c-mx","n":3}}'}},
             {"sk": {"S": "c#001"}, "c": {"S": "0"}, "z": {"B": zlib.compress(
                 b'{"__dormant_blob__":"actors/a/dead-v9","n":1}')}}]  # another incarnation: not readable
    found, released = readable_references(items)
    assert found == {"actors/a/b-v2": "c#000", "actors/a/c-mx": "i#m1"} and released == {"actors/a/old-v1"}
