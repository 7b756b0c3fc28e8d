"""What each test module took, for scheduling the suite on pytest-xdist workers longest first
(tests/xdist_scheduling.py): read from tests/durations.json, written from a JUnit XML report by `make durations`.

The numbers only order the work: a module missing from the file (a new one) is estimated from its test count, and a
stale file makes the run slower, never wrong.

    python -m tests.durations build/tier1.xml      # rewrites tests/durations.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from functools import cache
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")
SECONDS_PER_TEST = 0.3  # a module's estimate when the file does not know it


@cache
def known() -> dict[str, float]:
    """Module path ("tests/e2e/test_dev_stack.py") -> seconds."""
    try:
        return {str(k): float(v) for k, v in json.loads(FILE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def estimate(scope: str, tests: int) -> float:
    """Seconds a scheduling scope (a module, or a group of tests) is expected to take."""
    return known().get(scope, tests * SECONDS_PER_TEST)


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per module in a JUnit XML report (pytest --junitxml)."""
    seconds: Counter[str] = Counter()
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        seconds[module] += float(case.get("time") or 0.0)
    return {module: round(total, 1) for module, total in sorted(seconds.items())}


if __name__ == "__main__":
    found = from_junit(Path(sys.argv[1]))
    FILE.write_text(json.dumps(found, indent=0, sort_keys=True) + "\n")
    print(f"{FILE}: {len(found)} modules, {sum(found.values()):.0f} s")
