"""Search attributes: typed values that an actor's steps and actions set, indexed so that operators find actors by
them (docs/operations.md, "Search attributes"; the index: dormant.core.searchplan, docs/storage.md).

- **Declared** on the actor: `actor("order", search={"customer": str, "amount": int})`. Names are 1 to 64 of
  `A-Z a-z 0-9 _` not starting with a digit; types are `str`, `int`, `float`, `bool` and `datetime`; at most 20 per
  actor type (dormant.core.limits). A bad declaration raises WorkflowDefinitionError when the actor is defined.
- **Set** from a step or an action through `c.search`, a mapping: `s.search["customer"] = "42"`,
  `s.search.set(amount=120, vip=True)`, `del s.search["customer"]` (or `= None`) to unset. Each value is checked
  against its declared type at once (InvalidSearchAttributeError names the attribute and the rule, never the value)
  and recorded with the step's or the action's commit: a failed attempt's changes are dropped with it, and a
  replayed step does not set them again.
- **Stored** as name -> `[type code, JSON value]` beside the state (datetimes as ISO 8601 in UTC, to the
  microsecond), so a load knows them and a changed declaration is told from the stored values (`visible`,
  `stale`).
- **Searched** with conditions, as text (`customer=42`, `amount>100`, `name^=ab`): `parse_conditions`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from dormant.core.limits import (
    SEARCH_ATTRIBUTES,
    SEARCH_INTEGER,
    SEARCH_NAME,
    SEARCH_STRING,
    WHERE_CONDITIONS,
    WHERE_TEXT,
)
from dormant.errors import InvalidSearchAttributeError, InvalidSearchConditionError
from dormant.workflow.errors import WorkflowDefinitionError

TYPE_CODES: dict[type, str] = {str: "s", int: "i", float: "f", bool: "b", datetime: "t"}
TYPE_NAMES = {"s": "str", "i": "int", "f": "float", "b": "bool", "t": "datetime"}
_A_TYPE = {"s": "a str", "i": "an int", "f": "a float", "b": "a bool", "t": "a datetime"}
Operator = Literal["=", "<", "<=", ">", ">=", "^="]
OPERATORS: dict[str, tuple[Operator, ...]] = {
    "s": ("=", "<", "<=", ">", ">=", "^="), "i": ("=", "<", "<=", ">", ">="), "f": ("=", "<", "<=", ">", ">="),
    "t": ("=", "<", "<=", ">", ">="), "b": ("=",),
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONDITION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(<=|>=|\^=|=|<|>)(.*)", re.DOTALL)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
Stored = list[Any]  # [type code, JSON value]


class Refused(ValueError):
    """Why a value cannot be an attribute's (the reason names the rule, never the value)."""


# -- declarations --------------------------------------------------------------------------------------------------
def check_declaration(actor: str, search: Mapping[str, Any]) -> dict[str, str]:
    """The declared attributes as name -> type code; WorkflowDefinitionError for a bad name or type, or too many."""
    if not isinstance(search, Mapping):
        raise WorkflowDefinitionError(f'actor "{actor}": search must be a mapping of attribute names to types')
    if len(search) > SEARCH_ATTRIBUTES.maximum:
        raise WorkflowDefinitionError(f'actor "{actor}" declares {len(search)} search attributes: '
                                      f"{SEARCH_ATTRIBUTES.name} are {SEARCH_ATTRIBUTES.describe()}")
    declared: dict[str, str] = {}
    for name, kind in search.items():
        if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > SEARCH_NAME.maximum:
            raise WorkflowDefinitionError(f'actor "{actor}": search attribute name {name!r} is invalid: a '
                                          f"{SEARCH_NAME.name} is {SEARCH_NAME.describe()}")
        code = TYPE_CODES.get(kind) if isinstance(kind, type) else None
        if code is None:
            raise WorkflowDefinitionError(f'actor "{actor}": search attribute "{name}" has type {kind!r}; a search '
                                          "attribute is one of str, int, float, bool, datetime")
        declared[name] = code
    return declared


# -- values ----------------------------------------------------------------------------------------------------------
def stored_value(code: str, value: Any) -> Any:
    """The JSON form of `value` as an attribute of type `code`; Refused if it is not one."""
    if code == "s":
        if not isinstance(value, str):
            raise Refused("the value must be a str")
        return _checked_string(value)
    if code == "i":
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused("the value must be an int (not a bool or a float)")
        return _checked_integer(value)
    if code == "f":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Refused("the value must be a float or an int")
        return _checked_float(value)
    if code == "b":
        if not isinstance(value, bool):
            raise Refused("the value must be a bool")
        return value
    if not isinstance(value, datetime):
        raise Refused("the value must be a datetime")
    return _checked_datetime(value)


def python_value(code: str, value: Any) -> Any:
    """The value as steps see it: a datetime for `datetime` attributes, the JSON value otherwise."""
    return datetime.fromisoformat(value) if code == "t" else value


def comparable(code: str, value: Any) -> Any:
    """What conditions compare: the value itself, microseconds since the epoch for datetimes."""
    if code == "t":
        moment = datetime.fromisoformat(value)
        return (moment - _EPOCH) // _MICROSECOND
    return value


def _checked_string(value: str) -> str:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise Refused("the string holds a lone surrogate (U+D800-U+DFFF), which is not UTF-8") from None
    if size > SEARCH_STRING.maximum:
        raise Refused(f"the string is {size:,} bytes; a {SEARCH_STRING.name} is {SEARCH_STRING.describe()}")
    if _CONTROL.search(value):
        raise Refused("the string holds a control character")
    return value


def _checked_integer(value: int) -> int:
    if not SEARCH_INTEGER.minimum <= value <= SEARCH_INTEGER.maximum:
        raise Refused(f"the integer is out of range: a {SEARCH_INTEGER.name} is {SEARCH_INTEGER.describe()}")
    return value


def _checked_float(value: float) -> float:
    try:
        number = float(value)
    except OverflowError:
        raise Refused("the number is too large for a float") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise Refused("the number must be finite (not NaN or infinite)")
    return number + 0.0  # -0.0 is 0.0: they are equal, and must sort as one


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _checked_datetime(value: datetime) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise Refused("the datetime must be timezone-aware (e.g. datetime.now(UTC))")
    try:
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    except OverflowError:
        raise Refused("the datetime is out of range once in UTC") from None


# -- what an actor holds -----------------------------------------------------------------------------------------------
def visible(declared: Mapping[str, str], stored: Mapping[str, Stored]) -> dict[str, Stored]:
    """The stored attributes the declaration still knows, with the type it declares (the others are `stale`)."""
    return {name: value for name, value in stored.items() if declared.get(name) == value[0]}


def stale(declared: Mapping[str, str], stored: Mapping[str, Stored]) -> dict[str, None]:
    """Removals of the stored attributes a later declaration dropped or retyped: they go with the actor's next commit
    (docs/operations.md, "Changing the declaration")."""
    return {name: None for name, value in stored.items() if declared.get(name) != value[0]}


def plain(stored: Mapping[str, Stored]) -> dict[str, Any]:
    """name -> JSON value, as the API and the clients show an actor's attributes."""
    return {name: value[1] for name, value in sorted(stored.items())}


def apply_changes(stored: Mapping[str, Stored], changes: Mapping[str, Stored | None]) -> dict[str, Stored]:
    """The attributes after a commit's changes (None unsets)."""
    after = dict(stored)
    for name, value in changes.items():
        if value is None:
            after.pop(name, None)
        else:
            after[name] = list(value)
    return after


def changes_to(stored: Mapping[str, Stored], wanted: Mapping[str, Stored]) -> dict[str, Stored | None]:
    """The changes that turn attributes `stored` into `wanted` (what a commit carries; None unsets): how a fork takes
    the attributes of the version it forks, and a reset those of the version it resets to."""
    changes: dict[str, Stored | None] = {name: None for name in stored if name not in wanted}
    changes.update((name, list(value)) for name, value in wanted.items() if list(stored.get(name) or ()) != list(value))
    return changes


class SearchAttributes(MutableMapping[str, Any]):
    """`c.search` in steps and actions: the actor's search attributes, as a mapping (see the module docstring).

    Reads see what this step or action set, then what earlier commits stored. Writes are checked at once and
    recorded in `changes`, which the engine commits with the step (or the action)."""

    def __init__(self, actor: str, declared: Mapping[str, str], current: Mapping[str, Stored],
                 changes: dict[str, Stored | None]) -> None:
        self._actor = actor
        self._declared = declared
        self._current = current
        self.changes = changes

    def _code(self, name: str) -> str:
        code = self._declared.get(name) if isinstance(name, str) else None
        if code is None:
            # (The name is not repeated: it may come from anywhere.)
            raise InvalidSearchAttributeError(f'actor type "{self._actor}" declares no search attribute of that '
                                              f"name; declared: {sorted(self._declared)}")
        return code

    def _stored(self, name: str) -> Stored | None:
        if name in self.changes:
            return self.changes[name]
        found = self._current.get(name)
        return found if found is not None and self._declared.get(name) == found[0] else None

    def _checked(self, name: str, value: Any) -> Stored | None:
        code = self._code(name)
        if value is None:
            return None
        try:
            return [code, stored_value(code, value)]
        except Refused as refused:
            raise InvalidSearchAttributeError(f'search attribute "{name}" of actor type "{self._actor}" is '
                                              f"{_A_TYPE[code]}: {refused}") from None

    def __getitem__(self, name: str) -> Any:
        found = self._stored(name)
        if found is None:
            raise KeyError(name)
        return python_value(found[0], found[1])

    def __setitem__(self, name: str, value: Any) -> None:
        self.changes[name] = self._checked(name, value)

    def __delitem__(self, name: str) -> None:
        """Unset the attribute (unsetting one that is not set does nothing)."""
        self._code(name)
        self.changes[name] = None

    def set(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        """Set several at once: all are checked before any is set."""
        checked = {name: self._checked(name, value) for name, value in {**(values or {}), **more}.items()}
        self.changes.update(checked)

    def __iter__(self) -> Iterator[str]:
        names = sorted({*self._current, *self.changes})
        return iter([name for name in names if self._stored(name) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"SearchAttributes({dict(self.items())!r})"


# -- conditions --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One search condition: `attribute op value`, the value in the attribute's JSON form."""

    attribute: str
    op: Operator
    value: Any
    code: str

    def holds(self, stored: Stored | None) -> bool:
        """Whether an actor's stored value of the attribute satisfies it (a value of another type never does)."""
        if stored is None or stored[0] != self.code:
            return False
        have, want = comparable(self.code, stored[1]), comparable(self.code, self.value)
        match self.op:
            case "=":
                return bool(have == want)
            case "<":
                return bool(have < want)
            case "<=":
                return bool(have <= want)
            case ">":
                return bool(have > want)
            case ">=":
                return bool(have >= want)
        return isinstance(have, str) and have.startswith(want)


def parse_conditions(actor: str, declared: Mapping[str, str], texts: Sequence[str]) -> list[Condition]:
    """`where` conditions as text (`customer=42`, `amount>=100`, `name^=ab`, `due<2026-01-01T00:00:00Z`) read
    against the declared attributes; InvalidSearchConditionError names the condition by position and the rule."""
    if isinstance(texts, str) or not WHERE_CONDITIONS.minimum <= len(texts) <= WHERE_CONDITIONS.maximum:
        raise InvalidSearchConditionError(f"a search takes {WHERE_CONDITIONS.describe()}")
    return [_parse(actor, declared, index + 1, text) for index, text in enumerate(texts)]


def _parse(actor: str, declared: Mapping[str, str], position: int, text: Any) -> Condition:
    where = f"where condition {position}"
    if not isinstance(text, str) or len(text) > WHERE_TEXT.maximum:
        raise InvalidSearchConditionError(f"{where} must be a string of {WHERE_TEXT.describe()}")
    found = _CONDITION.fullmatch(text)
    if found is None:
        raise InvalidSearchConditionError(
            f"{where} is not `attribute<op>value`: an attribute name, then one of = < <= > >= ^= (starts with), then "
            "the value (e.g. customer=42, amount>100)")
    name, op, raw = found.groups()
    code = declared.get(name)
    if code is None:
        if not declared:
            raise InvalidSearchConditionError(f'{where}: actor type "{actor}" declares no search attributes')
        raise InvalidSearchConditionError(f'{where} names no search attribute of actor type "{actor}"; declared: '
                                          f"{sorted(declared)}")
    if op not in OPERATORS[code]:
        raise InvalidSearchConditionError(f'{where}: attribute "{name}" is {_A_TYPE[code]}, which takes the '
                                          f"operators {' '.join(OPERATORS[code])}")
    try:
        value = _from_text(code, raw)
    except Refused as refused:
        raise InvalidSearchConditionError(f'{where}: attribute "{name}" is {_A_TYPE[code]}: {refused}') from None
    return Condition(attribute=name, op=op, value=value, code=code)


def _from_text(code: str, raw: str) -> Any:
    if code == "s":
        return _checked_string(raw)
    if code == "i":
        if not _INTEGER.fullmatch(raw):
            raise Refused("the value must be an integer (digits, with an optional sign)")
        return _checked_integer(int(raw))
    if code == "f":
        if not _FLOAT.fullmatch(raw):
            raise Refused("the value must be a decimal number (e.g. 12.5, -3, 1e6)")
        return _checked_float(float(raw))
    if code == "b":
        lowered = raw.lower()
        if lowered not in ("true", "false", "1", "0"):
            raise Refused("the value must be true or false")
        return lowered in ("true", "1")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise Refused("the value must be an ISO 8601 date or time (e.g. 2026-01-31 or 2026-01-31T12:00:00Z; "
                      "without an offset it is UTC)") from None
    return _checked_datetime(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
