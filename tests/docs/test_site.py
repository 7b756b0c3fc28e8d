"""The documentation site (mkdocs.yml) builds strictly: a broken link or anchor, or a page missing from the nav,
fails it; the API reference has every public module. Tier 2: it needs tools/docs-venv (`make docs-tools`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT

REFERENCE = ("actor", "client", "errors", "models", "settings", "testing")


def mkdocs() -> Path:
    tools = os.environ.get("DORMANT_DOCS_TOOLS")
    found = ROOT / tools / "mkdocs" if tools else ROOT / "tools" / "docs-venv" / "bin" / "mkdocs"  # relative: ROOT's
    if not found.exists():
        message = f"no mkdocs at {found} (`make docs-tools`)"
        if tools:  # under `make check`: a missing tool is a failure
            pytest.fail(message)
        pytest.skip(message)
    return found


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([str(mkdocs()), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
                          cwd=config.parent, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_the_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    pages = {path.relative_to(ROOT / "docs").with_suffix("") for path in (ROOT / "docs").rglob("*.md")}
    built = {page for page in pages if (tmp_path / "site" / page / "index.html").exists()
             or (tmp_path / "site" / f"{page}.html").exists()}
    assert built == pages
    for module in REFERENCE:
        html = (tmp_path / "site" / "reference" / module / "index.html").read_text()
        assert f'id="dormant.{module}"' in html and html.count('class="doc doc-heading"') >= 3, module
    assert 'id="dormant.actor.actor"' in (tmp_path / "site" / "reference" / "actor" / "index.html").read_text()


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    """What `--strict` with mkdocs.yml's validation settings refuses (a site of one page: no theme, no plugins)."""
    import yaml

    validation = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["validation"]
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "t", "docs_dir": "docs", "validation": validation}))
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "testing.md", tmp_path / "docs" / "testing.md")
    (tmp_path / "docs" / "index.md").write_text("# t\n\n[the suite](testing.md#no-such-section)\n")
    result = build(config, tmp_path / "site")
    assert result.returncode == 1 and "no-such-section" in result.stdout + result.stderr, result.stderr
