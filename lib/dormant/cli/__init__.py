"""The `dormant` command."""

from dormant.cli.main import main

__all__ = ["main"]
