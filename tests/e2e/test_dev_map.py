"""A bounded map on a real `dormant dev`, tried as a user tries it: a job sent over HTTP maps 7 items, 3 at a time,
each waiting on a durable timer between two steps (so the actor suspends and SQS wakes it); the items' own clocks
show that never more than 3 overlapped, and `dormant history show` draws the map with its items."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.devprocess import ROOT, DevProcess, environment


def call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def test_a_map_on_dormant_dev_never_runs_more_items_at_once_than_its_bound(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", app="tests.e2e.map_app:registry").start()
    try:
        call(f"{dev.url}/actors/thumbnails/album/queues/render", "POST", {"count": 7, "bound": 3})
        deadline = time.monotonic() + 60
        while True:
            history = call(f"{dev.url}/actors/thumbnails/album/history")
            done = [e for e in history if e["location"] == "jobs/~0/done" and e.get("status") == "completed"]
            if done:
                break
            assert time.monotonic() < deadline, dev.output()[-3000:]
            time.sleep(0.5)
        entries = {e["location"]: e for e in history}
        spans = [entries[f"jobs/~0/render-all/{i}"]["output"] for i in range(7)]
        events = sorted([(began, 1) for began, _ in spans] + [(ended, -1) for _, ended in spans])
        running = peak = 0
        for _, change in events:
            running += change
            peak = max(peak, running)
        assert peak == 3, spans  # reached, and never more, across suspensions and SQS wake-ups
        assert entries["jobs/~0/done"]["output"] == 7
        shown = subprocess.run([sys.executable, "-m", "dormant.cli", "history", "show", "thumbnails", "album",
                                "--url", dev.url], cwd=ROOT, env=environment(), capture_output=True, text=True,
                               timeout=60)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "map render-all (7 items): 7 succeeded" in shown.stdout
        assert "item 6: succeeded" in shown.stdout and "step finish" in shown.stdout
    finally:
        dev.kill()
