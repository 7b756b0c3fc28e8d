"""The `dormant` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from dormant.offline import load_registry, parse_export, replay_snapshot


def _replay(args: argparse.Namespace) -> int:
    registry = load_registry(args.app)
    with open(args.file, encoding="utf-8") as handle:
        snapshot = parse_export(handle)
    report = asyncio.run(replay_snapshot(registry, snapshot))
    print(f"{report.ref}: {report.outcome} ({report.replayed} entries replayed)")
    print(report.detail)
    return 0 if report.outcome == "ok" else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dormant", description="Durable actor workflows on AWS.")
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="replay an exported actor history against the current code "
                                                "(offline, touches nothing); exit 1 on divergence")
    replay.add_argument("file", help="history export (JSON lines)")
    replay.add_argument("--app", required=True, help="module:attribute of the registry (as DORMANT_APP)")
    replay.set_defaults(run=_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except Exception as error:  # a CLI reports errors, it does not dump tracebacks
        print(f"dormant {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
