"""The limits of what Dormant can store and send, in one table (docs/limits.md is generated from `LIMITS`).

Three kinds:
- the services' own limits (DynamoDB, SQS, Lambda, API Gateway), as AWS documents them;
- where a server Dormant runs on is stricter, the strictest (moto refuses items over 405,000 bytes, AWS over
  409,600), so a value that works in `dormant dev` works deployed and the other way round;
- limits Dormant derives from its storage layout: an actor's id is part of the `status` index's sort key
  (`<status>#<actor id>`), a message id part of the inbox's sort key (`i#<id>`) and of the `pending` index's sort
  key (`<20 digits>#<id>`), and DynamoDB limits every sort key, of a table or an index, to 1,024 bytes.

Every request path (the in-process client, the HTTP API, the worker) checks these before its first write, so a
value that cannot be stored is refused with an error naming its `ServiceLimit`, and nothing is stored or sent. Sizes are
UTF-8 bytes, counted the way DynamoDB counts an item (attribute names plus values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dormant.errors import InvalidKeyError, InvalidMessageIdError, InvalidSettingError, ItemTooLargeError
from dormant.workflow.callbacks import LEGACY_MESSAGE_PREFIX, RESERVED_ID_PREFIX, is_reserved_message_id
from dormant.workflow.checked import measured
from dormant.workflow.host import DraftSizes
from dormant.workflow.sizing import json_size as json_size  # (the engine measures what it checks: one encoder)

if TYPE_CHECKING:
    from dormant.workflow.execution import CommitDraft


@dataclass(frozen=True)
class ServiceLimit:
    """One limit: what it bounds, its maximum (and minimum), its unit, and why it is what it is."""

    name: str
    maximum: int
    unit: str
    why: str
    minimum: int = 0
    source: str = "dormant"  # "dynamodb", "sqs", "s3", "lambda", "api-gateway", "dormant" (derived)

    def describe(self) -> str:
        """The limit in words, for error messages: 'at most 1,011 bytes (the `status` index's ...)'."""
        bound = f"at most {self.maximum:,} {self.unit}"
        if self.minimum:
            bound = f"{self.minimum:,} to {self.maximum:,} {self.unit}"
        return f"{bound.rstrip()} ({self.why})"


# -- the services' limits ----------------------------------------------------------------------------------------
DYNAMODB_ITEM = ServiceLimit(
    "DynamoDB item",
    409_600,
    "bytes",
    "DynamoDB's item size limit, 400 KB: attribute names and values",
    source="dynamodb",
)
ITEM = ServiceLimit(
    "stored item",
    400_000,
    "bytes",
    "DynamoDB allows 409,600 bytes (400 KB) and moto, which `dormant dev` "
    "runs on, refuses items over 405,000: every item Dormant writes stays within 400,000",
    source="dormant",
)
INDEXED_ITEM = ServiceLimit(
    "item in the pending index",
    200_000,
    "bytes",
    "an item with a local secondary index key is "
    "stored twice (table and index), and DynamoDB counts both copies against 400 KB: an inbox item "
    "is refused over 204,800 bytes by DynamoDB",
    source="dynamodb",
)
PARTITION_KEY = ServiceLimit(
    "partition key",
    2_048,
    "bytes",
    "DynamoDB's limit on a partition key value, of a table or a global index",
    source="dynamodb",
)
SORT_KEY = ServiceLimit(
    "sort key", 1_024, "bytes", "DynamoDB's limit on a sort key value, of a table or an index", source="dynamodb"
)
TABLE_NAME = ServiceLimit(
    "table name", 255, "characters", "DynamoDB: 3 to 255 of a-z A-Z 0-9 _ - .", minimum=3, source="dynamodb"
)
INDEX_NAME = ServiceLimit(
    "index name", 255, "characters", "DynamoDB: 3 to 255 of a-z A-Z 0-9 _ - .", minimum=3, source="dynamodb"
)
BATCH_WRITE = ServiceLimit(
    "BatchWriteItem",
    25,
    "items",
    "DynamoDB: 25 puts or deletes per request (Dormant writes "
    "tombstones, responses, events and deletions in pages of 25)",
    source="dynamodb",
)
BATCH_GET = ServiceLimit("BatchGetItem", 100, "keys", "DynamoDB: 100 keys per request", source="dynamodb")
QUERY_PAGE = ServiceLimit(
    "Query page",
    1_048_576,
    "bytes",
    "DynamoDB returns at most 1 MB per Query page (Dormant follows LastEvaluatedKey)",
    source="dynamodb",
)
EXPRESSION = ServiceLimit(
    "expression",
    4_096,
    "bytes",
    "DynamoDB: a condition or key expression is at most 4 KB (Dormant's "
    "are fixed and short: no user value is ever part of an expression)",
    source="dynamodb",
)
SQS_MESSAGE = ServiceLimit(
    "SQS message",
    262_144,
    "bytes",
    "SQS: 256 KiB per message (AWS now accepts 1 MiB; moto and LocalStack enforce 256 KiB)",
    source="sqs",
)
SQS_DELAY = ServiceLimit(
    "SQS delay", 900, "seconds", "SQS: DelaySeconds of at most 15 minutes (longer timers hop)", source="sqs"
)
SQS_GROUP_ID = ServiceLimit(
    "FIFO message group id", 128, "characters", "SQS: longer actor ids are hashed into a group id", source="sqs"
)
QUEUE_NAME = ServiceLimit(
    "queue name",
    80,
    "characters",
    "SQS: 1 to 80 of a-z A-Z 0-9 _ -, with `.fifo` at the end of a FIFO queue's name",
    minimum=1,
    source="sqs",
)
LAMBDA_PAYLOAD = ServiceLimit(
    "Lambda request or response",
    6_291_456,
    "bytes",
    "Lambda: 6 MB per synchronous invocation's "
    "request and response (what API Gateway sends the API function and gets back)",
    source="lambda",
)
API_GATEWAY_PAYLOAD = ServiceLimit(
    "API Gateway payload", 10_485_760, "bytes", "API Gateway (HTTP API): 10 MB per request", source="api-gateway"
)
WEBSOCKET_FRAME = ServiceLimit(
    "WebSocket message", 131_072, "bytes",
    "API Gateway (WebSocket API): 128 KB per message, in frames of 32 KB; an event whose frame would pass 120 KB is "
    "pushed without its payload, which the client reads over HTTP; an action's result whose frame would pass it is "
    "answered `result_too_large` (call it over HTTP); `dormant dev` closes a socket whose message passes 128 KB, as "
    "API Gateway does (docs/realtime.md)", source="api-gateway"
)

S3_OBJECT_KEY = ServiceLimit(
    "S3 object key",
    1_024,
    "bytes",
    "S3: object keys are at most 1,024 bytes (Dormant's are about 150: a prefix, the actor id's hash, a content hash)",
    source="s3",
)
BUCKET_NAME = ServiceLimit(
    "S3 bucket name",
    63,
    "characters",
    "S3: 3 to 63 of a-z 0-9 . -, starting and ending with a letter or a digit",
    minimum=3,
    source="s3",
)
VALUE = ServiceLimit(
    "stored value",
    32 * 1024 * 1024,
    "bytes",
    "one value Dormant stores — a state, a step result, a "
    "message body, an action's arguments, an actor's input, a response, an event payload — as JSON. Values "
    "over the offload threshold are kept in S3 and the log holds a reference; this ceiling keeps a wake-up "
    "within a 512 MB Lambda function's memory (raise MemorySize for state of many small objects)",
)

RECORD_ROOM = ServiceLimit(
    "workflow record in the room kept for a failure",
    2_048,
    "bytes",
    "an actor's live history (what one snapshot item holds) keeps 2,048 bytes of a stored item free: a commit that "
    "adds history, state, responses or events must leave them, and only a commit that adds nothing but a workflow "
    "record of at most 2,048 bytes may use them (marking the actor failed, an operator's resume, terminate or pause, "
    "a workflow ending without a new entry), so recording a failure always fits, however close to the limit the "
    "history has grown",
)
FAILURE_TEXT = ServiceLimit(
    "error text of an unstorable commit's failure",
    1_024,
    "bytes",
    "an actor failed because a commit of its workflow cannot be stored keeps at most this much of the error's text "
    "on its workflow record, within the room kept for a failure (the whole text is logged)",
)

# -- derived from the storage layout -----------------------------------------------------------------------------
_LONGEST_STATUS = "rolling_back"  # dormant.workflow.history.WorkflowState's longest value
ACTOR_ID = ServiceLimit(
    "actor id",
    SORT_KEY.maximum - len(_LONGEST_STATUS) - 1,
    "bytes",
    "an actor's storage id — its type and key parts, percent-encoded, joined by '/' — is part of the "
    "`status` index's sort key `<status>#<actor id>`, which DynamoDB limits to 1,024 bytes; a non-ASCII "
    "character takes 6 to 12 bytes once encoded",
)
KEY_PART = ServiceLimit(
    "actor key part", 512, "characters", "each part of an actor key: 1 to 512 characters of valid UTF-8", minimum=1
)
LIMIT_KEY = ServiceLimit(
    "limit key", 256, "bytes", "a keyed limit's key (`ctx.step(..., limit_key=...)`): 1 to 256 bytes of UTF-8, "
    "without control characters; it is kept in the key's limit items and shown to operators", minimum=1
)
# `<20-digit nanoseconds>#` before the id in the `pending` index's sort key (dormant.dynamodb.messages)
_ORDER_PREFIX = 21
MESSAGE_ID = ServiceLimit(
    "message id",
    SORT_KEY.maximum - _ORDER_PREFIX,
    "bytes",
    "a message id (an Idempotency-Key) is part of the `pending` index's sort key `<20 digits>#<id>`, "
    "which DynamoDB limits to 1,024 bytes",
    minimum=1,
)
HTTP_MESSAGE_ID = ServiceLimit(
    "Idempotency-Key header",
    128,
    "characters",
    "over HTTP an Idempotency-Key is 1 to 128 printable ASCII characters without spaces",
    minimum=1,
)
CARRIED_MESSAGE = ServiceLimit(
    "message as its wake-up carries it",
    240 * 1024,
    "bytes",
    "a send's wake-up carries the message (and the actor's input when the send creates the actor) "
    "in one SQS message of 256 KiB; the rest is the envelope",
)

_KEY_HASH = 17  # `!<16 hex digits of the actor id's hash>` after a value in the `search` index's sort key
SEARCH_ATTRIBUTES = ServiceLimit(
    "search attributes per actor type",
    20,
    "attributes",
    "each search attribute an actor has set is one item in the `search` index, and each carries a copy of all of "
    "them (the other conditions of a search are checked on it): a change rewrites them all",
)
SEARCH_NAME = ServiceLimit(
    "search attribute name",
    64,
    "characters",
    "1 to 64 of A-Z a-z 0-9 _, not starting with a digit: part of the `search` index's partition key and of the "
    "`where` syntax",
    minimum=1,
)
SEARCH_STRING = ServiceLimit(
    "search attribute string",
    256,
    "bytes",
    "a `str` attribute's value, as UTF-8, without control characters: it is part of the `search` index's sort key "
    f"(two hex digits a byte, then the actor id's hash), which DynamoDB limits to {SORT_KEY.maximum:,} bytes; "
    f"{(SORT_KEY.maximum - _KEY_HASH) // 2} would fit, 256 keeps each index item (and its copy of every attribute) "
    "small",
)
SEARCH_INTEGER = ServiceLimit(
    "search attribute integer",
    2**63 - 1,
    "",
    "an `int` attribute is a signed 64-bit integer (its index encoding is 16 hex digits, so that numbers sort as "
    "numbers)",
    minimum=-(2**63),
)
WHERE_CONDITIONS = ServiceLimit(
    "search conditions",
    10,
    "conditions",
    "a search takes 1 to 10 `where` conditions: the most selective is read from the `search` index, the others "
    "filter what that reads",
    minimum=1,
)
WHERE_TEXT = ServiceLimit(
    "search condition text",
    600,
    "characters",
    "one `where` condition as text: an attribute name, an operator and a value",
)

LIMITS: tuple[ServiceLimit, ...] = (
    ITEM,
    INDEXED_ITEM,
    DYNAMODB_ITEM,
    PARTITION_KEY,
    SORT_KEY,
    ACTOR_ID,
    KEY_PART,
    LIMIT_KEY,
    MESSAGE_ID,
    HTTP_MESSAGE_ID,
    CARRIED_MESSAGE,
    TABLE_NAME,
    INDEX_NAME,
    QUEUE_NAME,
    BATCH_WRITE,
    BATCH_GET,
    QUERY_PAGE,
    EXPRESSION,
    SQS_MESSAGE,
    SQS_DELAY,
    SQS_GROUP_ID,
    LAMBDA_PAYLOAD,
    API_GATEWAY_PAYLOAD,
    WEBSOCKET_FRAME,
    VALUE,
    RECORD_ROOM,
    FAILURE_TEXT,
    S3_OBJECT_KEY,
    BUCKET_NAME,
    SEARCH_ATTRIBUTES,
    SEARCH_NAME,
    SEARCH_STRING,
    SEARCH_INTEGER,
    WHERE_CONDITIONS,
    WHERE_TEXT,
)
"""Every limit, in the order docs/limits.md lists them."""


# -- checks --------------------------------------------------------------------------------------------------------
def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def draft_sizes(draft: CommitDraft) -> DraftSizes:
    """The JSON sizes of `draft`'s values, measured on the first call and kept on the draft: the limit check, the
    commit and the kept-versions ring each need them, and none measures them again."""
    sizes = draft.sizes
    if sizes is None:
        sizes = draft.sizes = measured(draft)
    return sizes


def json_bytes(value: Any) -> int:
    """Bytes of `value` as the stores write it: compact JSON, UTF-8."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def cut_text(text: str, maximum: int, note: str) -> str:
    """`text` if it is at most `maximum` bytes of UTF-8, else its start and then `note`, within `maximum` in all
    (cut between characters; an empty string if even `note` does not fit)."""
    if utf8_size(text) <= maximum:
        return text
    room = maximum - utf8_size(note)
    if room < 0:
        return ""
    return text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore") + note


def check_actor_id(actor_id: str) -> None:
    """InvalidKeyError if an actor's storage id is over ACTOR_ID."""
    size = utf8_size(actor_id)
    if size > ACTOR_ID.maximum:
        raise InvalidKeyError(
            f"the actor's storage id (its type name and key parts, percent-encoded) is {size:,} "
            f"bytes; an actor id is {ACTOR_ID.describe()}. Use a shorter key"
        )


def check_message_id(message_id: object) -> str:
    """A caller's message id (an Idempotency-Key) if it can name a stored message and is not in the namespace of
    Dormant's own ids (a callback's completion), else InvalidMessageIdError (never echoing it)."""
    if not isinstance(message_id, str) or not message_id:
        raise InvalidMessageIdError("a message id must be a non-empty string")
    try:
        size = len(message_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidMessageIdError("a message id must be valid UTF-8 (it contains a lone surrogate)") from None
    if size > MESSAGE_ID.maximum:
        raise InvalidMessageIdError(f"the message id is {size:,} bytes; a message id is {MESSAGE_ID.describe()}")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in message_id):
        raise InvalidMessageIdError("a message id must not contain control characters")
    if is_reserved_message_id(message_id):
        raise InvalidMessageIdError(
            f"a message id must not start with `{RESERVED_ID_PREFIX}` nor be `{LEGACY_MESSAGE_PREFIX}` and 32 hex "
            "digits: those ids are Dormant's own, for the completions of callbacks (docs/semantics.md, Callbacks)")
    return message_id


_DYNAMODB_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.\-]*[a-z0-9]")
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_\-]+")


def check_table_name(name: str, setting: str = "table") -> str:
    """The name if DynamoDB accepts it for a table, else InvalidSettingError naming the setting."""
    if not (TABLE_NAME.minimum <= len(name) <= TABLE_NAME.maximum) or not _DYNAMODB_NAME.fullmatch(name):
        raise InvalidSettingError(f"setting {setting}: a DynamoDB table name is {TABLE_NAME.describe()}")
    return name


def check_bucket_name(name: str, setting: str = "bucket") -> str:
    """The name if S3 accepts it for a bucket, else InvalidSettingError naming the setting."""
    if (
        not (BUCKET_NAME.minimum <= len(name) <= BUCKET_NAME.maximum)
        or not _BUCKET_NAME.fullmatch(name)
        or ".." in name
    ):
        raise InvalidSettingError(f"setting {setting}: an S3 bucket name is {BUCKET_NAME.describe()}")
    return name


def check_queue_name(name: str, setting: str, *, fifo: bool | None = None) -> str:
    """The name if SQS accepts it (`fifo`: it must, or must not, end in `.fifo`), else InvalidSettingError."""
    stem = name.removesuffix(".fifo")
    if not (QUEUE_NAME.minimum <= len(name) <= QUEUE_NAME.maximum) or not _QUEUE_NAME.fullmatch(stem):
        raise InvalidSettingError(f"setting {setting}: an SQS queue name is {QUEUE_NAME.describe()}")
    if fifo is True and not name.endswith(".fifo"):
        raise InvalidSettingError(f"setting {setting}: this queue is a FIFO queue, so its name must end in `.fifo`")
    if fifo is False and name.endswith(".fifo"):
        raise InvalidSettingError(
            f"setting {setting}: this queue is a standard queue, so its name cannot end in `.fifo`"
        )
    return name


def value_too_large(actor_type: str, what: str, size: int) -> ItemTooLargeError:
    """The refusal of a value over the per-value ceiling VALUE, on every store. It names the actor's type, never its
    key: the error reaches the client, and must not repeat what it sent."""
    error = ItemTooLargeError(f"{what} of an actor of type {actor_type!r} is {size:,} bytes as JSON, over the limit "
                              f"({VALUE.name}): {VALUE.describe()}")
    error.limit = VALUE
    return error


def check_values(actor_type: str, values: Iterable[tuple[str, Any]]) -> None:
    """ItemTooLargeError if one of the (what, value) pairs is over the per-value ceiling VALUE as JSON."""
    for what, value in values:
        if value is None or isinstance(value, (bool, int, float)) or not value:
            continue  # (a number, or an empty string, list or object: a few bytes; a send's `args` most often)
        size = json_size(value)
        if size > VALUE.maximum:
            raise value_too_large(actor_type, what, size)


def check_draft(actor_type: str, draft: CommitDraft) -> None:
    """`check_values` of every value `draft` stores (`draft_values`), from its sizes measured once (`draft_sizes`)."""
    sizes = draft.sizes  # (the engine measured them, mostly: else measured here, once)
    if sizes is None:
        sizes = draft_sizes(draft)
    maximum = VALUE.maximum
    if sizes.state_most + sizes.upserts_total + sum(sizes.responses) + sum(sizes.events) <= maximum:
        return  # (all of them within the ceiling, so each one: the common case, without a loop in Python)
    for entry, size in zip(draft.upserts, sizes.upserts, strict=True):
        if size > maximum:
            raise value_too_large(actor_type, f"history entry {entry.get('location')!r}", size)
    if sizes.state > maximum:
        raise value_too_large(actor_type, "the state", sizes.state)
    for size in sizes.responses:
        if size > maximum:
            raise value_too_large(actor_type, "a response", size)
    for (name, _), size in zip(draft.events, sizes.events, strict=True):
        if size > maximum:
            raise value_too_large(actor_type, f"the payload of event {name!r}", size)


def draft_values(draft: CommitDraft) -> list[tuple[str, Any]]:
    """(what, value) of every value a commit stores: its entries' outputs and messages, state, responses, events."""
    values: list[tuple[str, Any]] = [(f"history entry {entry.get('location')!r}", entry) for entry in draft.upserts]
    values.append(("the state", draft.state))
    values += [("a response", response) for response in draft.responses.values()]
    values += [(f"the payload of event {name!r}", payload) for name, payload in draft.events]
    return values


def markdown_table() -> str:
    """`LIMITS` as the Markdown table docs/limits.md carries (tests/unit/test_limits.py keeps them in step)."""
    rows = ["| limit | bound | source | why |", "|---|---|---|---|"]
    for limit in LIMITS:
        bound = f"{limit.minimum:,} to {limit.maximum:,}" if limit.minimum else f"at most {limit.maximum:,}"
        rows.append(f"| {limit.name} | {f'{bound} {limit.unit}'.rstrip()} | {limit.source} | {limit.why} |")
    return "\n".join(rows)
