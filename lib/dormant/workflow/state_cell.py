"""The actor's state during a run: its model, the JSON of its last commit to compare with, and what to revert to."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from dormant.workflow.errors import InvalidStateError
from dormant.workflow.sizing import STRING_SIZES, SWEEP_PER_WAKE, JsonShape, Unmeasured, shaped_sizes
from dormant.workflow.values import check_json_shape, describe_errors


class StateCell:
    """The actor's state model plus the JSON of its last commit (for revert and dirty checks)."""

    def __init__(self, model_type: type[BaseModel], committed: dict[str, Any]) -> None:
        self.model_type = model_type
        self.committed = committed
        # The state after an ephemeral step that changed it (not committed yet, but kept): what a failed attempt
        # reverts to until the next commit. None: the committed state.
        self.kept: dict[str, Any] | None = None
        self.value: BaseModel = model_type.model_validate(committed)
        # The last dump `check` returned and what its check learned (for measuring it: `known_size`).
        self._checked: tuple[dict[str, Any], JsonShape] | None = None
        # `known_size`'s answer for that dump (a step's check asks it, then its commit)
        self._sized: tuple[dict[str, Any], tuple[int, tuple[Unmeasured, ...]]] | None = None
        STRING_SIZES.sweep(SWEEP_PER_WAKE)  # (big strings of states gone since: let go, a few per cell)

    def dump(self) -> dict[str, Any]:
        return self.value.model_dump(mode="json")

    def revert(self) -> None:
        self.value = self.model_type.model_validate(self.kept if self.kept is not None else self.committed)

    def check(self, after: str) -> dict[str, Any]:
        """The state's JSON, proven to load back into its model; InvalidStateError (naming fields and rules,
        never values) if `after` (a step, an action...) left it otherwise. Run before anything commits it."""
        name = self.model_type.__name__
        try:
            dump = self.value.model_dump(mode="json", warnings=False)
        except PydanticSerializationError:
            raise InvalidStateError(f"{after} left the state ({name}) holding a value that cannot be "
                                    "serialized") from None
        # (its lists of strings compared with the last commit's, which were measured: only what changed is checked)
        shape = check_json_shape(dump, f"the state ({name}) after {after}", self.committed)
        try:
            self.model_type.model_validate(dump)
        except ValidationError as error:
            raise InvalidStateError(f"{after} left the state not matching {name}: {describe_errors(error)}"
                                    ) from None
        self._checked = (dump, shape)
        return dump

    def known_size(self, dump: dict[str, Any]) -> tuple[int, tuple[Unmeasured, ...]] | None:
        """The JSON size of `dump`, the last one `check` returned, from what its check learned: its big strings each
        measured once while they live, no search for a float's marks when it holds no float. The size but for the
        strings new in a list of strings since the last commit, and those (not measured yet: their bounds decide
        most, dormant.workflow.values.shaped_sizes). None for any other dump (its store measures it, as every
        value)."""
        checked = self._checked
        if checked is None or checked[0] is not dump:
            return None
        sized = self._sized
        if sized is None or sized[0] is not dump:  # (measured once per dump: the same strings left unmeasured)
            sized = self._sized = (dump, shaped_sizes(dump, checked[1]))
        return sized[1]
