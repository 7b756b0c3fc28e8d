"""What `dormant new` and `dormant package` refuse, each with what to do instead."""

from __future__ import annotations

from dormant.workflow.errors import DormantError


class InvalidProjectNameError(DormantError, ValueError):
    """`dormant new NAME`: NAME cannot be a Python package's name (an identifier, not a keyword nor a module it
    would hide)."""


class ProjectExistsError(DormantError, FileExistsError):
    """`dormant new NAME`: ./NAME exists and is not an empty directory; nothing was written."""


class InvalidAppSpecError(DormantError, ValueError):
    """`dormant package --app`: not module:attribute."""


class AppNotFoundError(DormantError, LookupError):
    """`dormant package --app`: the registry's package is not in the project, or the module does not load."""


class LayerBuildError(DormantError, RuntimeError):
    """`dormant package`: pip could not build the dependency layer for Lambda (its output is in the message)."""


class ShippedFilesChangedError(DormantError, RuntimeError):
    """The shipped deployment files no longer hold a line `dormant package` substitutes: a bug in Dormant."""
