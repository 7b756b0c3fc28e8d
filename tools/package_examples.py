"""`make package-examples`: the repository's template.yaml, infra/*.tf and functions/ written from what the wheel
ships for `dormant package` (lib/dormant/deploy/files), the one place they are edited.

    python tools/package_examples.py [--check]   # --check: exit 1 and name the files that differ
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from dormant.deploy.render import repository_files  # noqa: E402  (lib/ first on the path)


def main(argv: list[str]) -> int:
    stale = [name for name, text in repository_files().items()
             if not (ROOT / name).is_file() or (ROOT / name).read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for name in stale:
            print(f"{name} differs from lib/dormant/deploy/files: edit it there and run `make package-examples`")
        return 1 if stale else 0
    for name in stale:
        (ROOT / name).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / name).write_text(repository_files()[name], encoding="utf-8")
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
