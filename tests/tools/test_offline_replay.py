"""`dormant replay`: exported histories replay offline against new code, and divergence is reported."""

from pathlib import Path

import pytest

from dormant.cli import main
from dormant.runtime.offline import ExportFormatError, export_lines, parse_export, replay_snapshot
from dormant.testing import TestEnv
from tests.tools.replay_apps import registry_v1, registry_v2


async def _export(tmp_path: Path) -> Path:
    async with TestEnv(registry_v1) as env:
        handle = env.client.get_or_create("gate", ["order-1"])
        await handle.status()
        await env.run_until_idle()
        snapshot = await env.store.load(handle.ref)
        assert snapshot is not None
        path = tmp_path / "gate.jsonl"
        path.write_text("\n".join(export_lines(snapshot)))
        return path


async def test_export_round_trip_replays_cleanly(tmp_path: Path) -> None:
    path = await _export(tmp_path)
    snapshot = parse_export(path.read_text().splitlines())
    report = await replay_snapshot(registry_v1, snapshot)
    assert report.outcome == "ok"
    assert report.replayed == 2  # both recorded steps were served from history, none ran
    assert "sleeping" in report.detail


async def test_changed_code_reports_the_divergence(tmp_path: Path) -> None:
    path = await _export(tmp_path)
    report = await replay_snapshot(registry_v2, parse_export(path.read_text().splitlines()))
    assert report.outcome == "diverged"
    assert 'history has:   step "reserve"' in report.detail
    assert 'code asks for: step "reserve-stock"' in report.detail
    assert "replay_apps.py:" in report.detail


async def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = await _export(tmp_path)
    assert await _run_cli(["replay", str(path), "--app", "tests.tools.replay_apps:registry_v1"]) == 0
    assert await _run_cli(["replay", str(path), "--app", "tests.tools.replay_apps:registry_v2"]) == 1
    assert "diverged" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert await _run_cli(["replay", str(bad), "--app", "tests.tools.replay_apps:registry_v1"]) == 2
    assert "not a history export line" in capsys.readouterr().err


def test_parse_export_requires_a_header() -> None:
    with pytest.raises(ExportFormatError, match="header"):
        parse_export(['{"type": "entry", "location": "a", "kind": "step", "name": "a", "seq": 1}'])


async def _run_cli(argv: list[str]) -> int:
    # The CLI calls asyncio.run itself: run it in a worker thread, outside this test's event loop.
    import asyncio

    return await asyncio.to_thread(main, argv)
