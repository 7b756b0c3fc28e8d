"""Where an actor sits in its type's listing, the cursors a listing and the attention list hand out (checked
before a store uses them), a page cut from rows in order, and walking a listing page after page."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar
from urllib.parse import quote

from dormant.core.records import LISTED_STATUSES, ActorPage, ActorRef, ActorSummary
from dormant.errors import InvalidCursorError
from dormant.models import OperationPage, OperationResult
from dormant.workflow.history import WorkflowState

T = TypeVar("T")


def listing_key(status: WorkflowState, ref: ActorRef) -> str:
    """An actor's place in its type's listing: by status, then by storage id. Also the pagination cursor."""
    return f"{status_prefix(status)}{ref.id}"


def status_prefix(status: WorkflowState) -> str:
    """What the listing keys of the actors listed in `status` begin with."""
    return f"{status.value}#"


def type_prefix(actor_type: str) -> str:
    """What the storage ids (ActorRef.id) of the actors of a type begin with."""
    return quote(actor_type, safe="") + "/"


def check_cursor(actor_type: str, status: WorkflowState | None, cursor: str) -> str:
    """`cursor` if it is a listing key of `actor_type` (and of `status`, when filtering); else InvalidCursorError."""
    listed, _, actor_id = cursor.partition("#")
    ids = type_prefix(actor_type)
    if (listed not in {s.value for s in LISTED_STATUSES} or not actor_id.startswith(ids)
            or len(actor_id) == len(ids) or (status is not None and listed != status.value)):
        raise InvalidCursorError("the cursor was not handed out by this listing (pass back the `cursor` of the "
                                 "previous page unchanged, with the same actor type and status)")
    return cursor


def check_attention_cursor(actor_type: str, cursor: str) -> str:
    """`cursor` if it is the storage id of an actor of `actor_type` (where an attention page stopped)."""
    ids = type_prefix(actor_type)
    if not cursor.startswith(ids) or len(cursor) == len(ids):
        raise InvalidCursorError("the cursor was not handed out by this attention list (pass back the `cursor` of "
                                 "the previous page unchanged, with the same actor type)")
    return cursor


def page_of(rows: Iterable[tuple[str, T]], limit: int) -> tuple[list[T], str | None]:
    """The first `limit` (at least 1) of (cursor key, row) pairs in key order, and the cursor of the next page: the
    last key on the page, None when no row is left (a store that reads rows in key order cuts its pages so)."""
    ordered = sorted(rows, key=lambda pair: pair[0])
    page = ordered[:max(1, limit)]
    return [row for _, row in page], page[-1][0] if len(ordered) > len(page) else None


async def every_summary(list_page: Callable[[str | None], Awaitable[ActorPage]]) -> AsyncIterator[ActorSummary]:
    """The summaries of a listing, page after page: `list_page(cursor)` gives the page after `cursor`."""
    cursor: str | None = None
    while True:
        page = await list_page(cursor)
        for summary in page.actors:
            yield summary
        if page.cursor is None:
            return
        cursor = page.cursor


async def every_result(page: Callable[[str | None], Awaitable[OperationPage]]) -> list[OperationResult]:
    """Every result of a bulk action, page after page (`page(cursor)` runs the page after `cursor`)."""
    results: list[OperationResult] = []
    cursor: str | None = None
    while True:
        done = await page(cursor)
        results += done.results
        if done.cursor is None:
            return results
        cursor = done.cursor
