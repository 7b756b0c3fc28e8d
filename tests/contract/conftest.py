"""The contract suite's backends: every test that takes `store` (or `backend`) runs once per backend.

Tier 1 (every `make test`): `memory` (MemoryEventStore, TestEnv's), `dynamodb_local` (AWS's own emulator: the suite's
DynamoDB) and `moto`. Tier 2 (the release tier, marked `tier2`; `-m "not tier2"` leaves it out): `dynalite`,
`dynamodb_local_threads` (the DynamoDB store on botocore's clients in threads, what the Lambda functions run) and
`localstack` (also marked `localstack`: one LocalStack serves them all, tests/xdist_scheduling.py). test_parity.py's
AWS side (`aws_settings`) is tiered the same way: DynamoDB Local with moto's SQS and S3, then LocalStack. One backend
alone: `-k` on its id, e.g. `pytest tests/contract -k dynalite` (`-k "memory and not parity"` for memory: the parity
tests' names say "memory").

The DynamoDB store runs as deployed: a fresh table per test, and a bucket for values too big for an item (S3 on the
moto server; LocalStack's own S3 there). Every store reads the test's `StoreClock`, which stands still unless the test
moves it (`backend.clock.advance`): TTLs and windows measured on the store's clock are tested in no time.

A backend known to break a rule says so with the `backend_xfail` mark, which turns into a strict xfail on the backends
it names (so the test fails the moment the backend is fixed, and the mark must go):

    @pytest.mark.backend_xfail(memory="dedupes forever (issue 27): ...")
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from dormant.dynamodb.store import DynamoEventStore
from dormant.memory.store import MemoryEventStore
from dormant.ports import EventStore
from dormant.settings import Settings
from tests.integration.conftest import server_for, shared_session
from tests.localstack import ON_LOCALSTACK
from tests.servers import ServerProcess

# (moto's DynamoDB is tier 2 by tests/conftest.py's rule: the DynamoDB store on one server in tier 1)
TIER1_BACKENDS = ("memory", "dynamodb_local")
TIER2_BACKENDS = ("moto", "dynalite", "dynamodb_local_threads", "localstack")
BACKENDS = [*TIER1_BACKENDS, "moto", "dynalite", "dynamodb_local_threads",
            pytest.param("localstack", marks=ON_LOCALSTACK)]
BACKEND_PARAMETERS = ("backend", "aws_settings")  # the fixtures here whose parameter is a backend (tier 2 marked)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tier2: a contract test on a release-tier backend (dynalite, LocalStack, "
                                       "botocore's clients in threads): `-m 'not tier2'` is tier 1")
    config.addinivalue_line("markers", "backend_xfail(**reasons): strict xfail on the backends named (backend id = "
                                       "reason; `dynamodb` names every DynamoDB-store backend)")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `tier2` the tests on a tier-2 backend (here, not as their parameters' marks: this module is imported
    before its pytest_configure registers the mark)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(params.get(name) in TIER2_BACKENDS for name in BACKEND_PARAMETERS):
            item.add_marker("tier2")


class StoreClock:
    """The store's clock in a contract test: seconds since the epoch, standing still unless moved. Callable (what
    DynamoEventStore's `clock=` takes) and a dormant.ports.Clock (`now`, `realtime`, `sleep_until`)."""

    realtime = False

    def __init__(self, start: float) -> None:
        self._now = start
        self._moved = asyncio.Event()

    def __call__(self) -> float:
        return self._now

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the store's clock cannot go back")
        self._now += seconds
        self._moved.set()
        self._moved = asyncio.Event()

    async def sleep_until(self, moment: float) -> None:
        while self._now < moment:
            await self._moved.wait()


@dataclass(slots=True)
class Backend:
    """One backend under test: its store, the store's clock and (DynamoDB) the settings it runs on."""

    name: str
    store: EventStore
    clock: StoreClock
    settings: Settings | None = None

    @property
    def on_dynamodb(self) -> bool:
        return isinstance(self.store, DynamoEventStore)

    def another_process(self) -> EventStore:
        """The same stored data through a store that has read nothing yet (a cold process on DynamoDB: no cached
        versions or fingerprints); in memory, the store itself (there is no other process)."""
        if isinstance(self.store, DynamoEventStore):
            return DynamoEventStore(self.store.client, self.store.settings, clock=self.clock,
                                    blobs=self.store.values.blobs)
        return self.store


def memory_store(clock: StoreClock) -> MemoryEventStore:
    """MemoryEventStore on the test's clock, if it takes one (issue 27: its dedupe window is measured on its clock;
    the clock is passed under whichever name the store's constructor gives it)."""
    accepted = [name for name in inspect.signature(MemoryEventStore).parameters if name in ("clock", "now")]
    options: dict[str, Any] = dict.fromkeys(accepted, clock)
    return MemoryEventStore(**options)


def _settings(name: str, request: pytest.FixtureRequest) -> tuple[Settings, list[ServerProcess]]:
    """The settings of a DynamoDB backend, and the servers to reset after the test."""
    suffix = uuid.uuid4().hex[:12]
    common: dict[str, Any] = {"table": f"dormant-{suffix}", "bucket": f"dormant-{suffix}", "region": "us-east-1"}
    if name == "localstack":
        localstack = server_for(request, "localstack")
        return Settings(endpoint_url=localstack.endpoint, **common), [localstack]
    dynamodb = server_for(request, name.removesuffix("_threads"))
    moto = server_for(request, "moto")  # S3 (and, for `moto`, DynamoDB too)
    kind = "threads" if name.endswith("_threads") else "aiobotocore"
    settings = Settings(endpoint_url=moto.endpoint, dynamodb_endpoint_url=dynamodb.endpoint, aws_clients=kind,
                        **common)
    return settings, list({id(server): server for server in (dynamodb, moto)}.values())


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each backend in turn (see the module docstring), on a clock that starts at the real time (so the TTLs of
    what the store writes are in the future for servers that expire items by themselves)."""
    name: str = request.param
    _expected_failure(request, name)
    clock = StoreClock(float(int(time.time())))
    if name == "memory":
        yield Backend(name, memory_store(clock), clock)
        return
    settings, servers = _settings(name, request)
    session = None if settings.aws_clients == "threads" else shared_session()
    async with DynamoEventStore.connect(settings, session=session, clock=clock) as store:
        await store.create_table()
        assert store.values.blobs is not None
        await store.values.blobs.client.create_bucket(Bucket=settings.bucket)
        yield Backend(name, store, clock, settings)
    for server in servers:
        server.reset()


@pytest.fixture
def store(backend: Backend) -> EventStore:
    """The backend's store."""
    return backend.store


def _expected_failure(request: pytest.FixtureRequest, name: str) -> None:
    marker = request.node.get_closest_marker("backend_xfail")
    if marker is None:
        return
    reasons: dict[str, str] = marker.kwargs
    unknown = set(reasons) - {*TIER1_BACKENDS, *TIER2_BACKENDS, "dynamodb"}
    if unknown:
        raise ValueError(f"backend_xfail names no backend: {sorted(unknown)}")
    reason = reasons.get(name) or (reasons.get("dynamodb") if name != "memory" else None)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
