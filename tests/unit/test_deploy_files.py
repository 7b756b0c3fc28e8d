"""One deployment, one place: the wheel ships Dormant's template.yaml, Terraform module and Lambda entry points
(lib/dormant/deploy/files) for `dormant package`, and the repository's template.yaml, infra/*.tf and functions/ are
those very files (`make package-examples` writes them). A packaged app's files differ from them only in the app
and the code paths, so it gets the same queues, indexes, bucket, alarms, auth modes and roles."""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from pathlib import Path

import pytest

from dormant.deploy import layer, package, render
from dormant.deploy.errors import InvalidAppSpecError, ShippedFilesChangedError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(render.repository_files()))
def test_the_repository_s_deployment_is_what_the_wheel_ships(name: str) -> None:
    shipped = render.repository_files()[name]
    committed = (ROOT / name).read_text(encoding="utf-8")
    assert committed == shipped, (
        f"{name} differs from lib/dormant/deploy/files (edit it there, then `make package-examples`):\n"
        + "".join(difflib.unified_diff(shipped.splitlines(True), committed.splitlines(True), "shipped", name)))


def test_every_terraform_file_is_shipped() -> None:
    assert render.terraform_names() == sorted(p.name for p in (ROOT / "infra").glob("*.tf"))


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    removed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith("- ")]
    added = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith("+ ")]
    return list(zip([r[2:].strip() for r in removed], [a[2:].strip() for a in added], strict=True))


def test_the_packaged_template_differs_only_in_the_app_and_the_code_paths() -> None:
    packaged = render.template_yaml("shop.app:registry")
    assert changed_lines(render.shipped_text("template.yaml"), packaged) == [
        ("Default: examples.app:registry", "Default: shop.app:registry"),
        ("(make build-*: APP_DIR, default examples/).", "(`dormant package`: bundle/)."),
        ("ContentUri: functions/", "ContentUri: layer/"),
        ("CodeUri: functions/", "CodeUri: bundle/"),
        ("CodeUri: functions/", "CodeUri: bundle/"),
        ("CodeUri: functions/", "CodeUri: bundle/"),
    ]


def test_the_packaged_terraform_module_differs_only_in_the_app() -> None:
    for name in render.terraform_names():
        shipped, packaged = render.shipped_text("terraform", name), render.terraform_file(name, "shop.app:registry")
        expected = [('default     = "examples.app:registry"', 'default     = "shop.app:registry"')] \
            if name == "variables.tf" else []
        assert changed_lines(shipped, packaged) == expected, name


@pytest.mark.parametrize("app", ["shop", "shop.app", "shop.app:", ":registry", "shop app:registry", "1shop:registry",
                                 "shop.app:registry\nDefault: x", "shop.app:registry\n"])
def test_an_app_that_is_not_module_attribute_is_refused(app: str) -> None:
    with pytest.raises(InvalidAppSpecError):
        render.template_yaml(app)


def test_a_substitution_that_no_longer_matches_fails_loudly() -> None:
    with pytest.raises(ShippedFilesChangedError, match="occurs 0 times"):
        render.apply("nothing here", [render.Substitution("CodeUri: functions/", "CodeUri: bundle/")], "t.yaml")


def makefile_value(name: str) -> str:
    (value,) = re.findall(rf"^{name} \?= (.*)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    return value.strip()


def test_the_repository_s_layer_and_a_packaged_one_make_the_same_choices() -> None:
    """The Makefile builds examples' layer in the repository (build-DependenciesLayer, trim-layer); dormant.deploy.layer
    builds a user's: the same platform, the same packages left out, the same service models kept."""
    assert makefile_value("LAMBDA_PYTHON") == layer.LAMBDA_PYTHON
    assert makefile_value("LAMBDA_PLATFORM") == layer.LAMBDA_PLATFORM
    assert set(makefile_value("LAYER_EXCLUDE").split()) == layer.EXCLUDED
    assert set(makefile_value("LAYER_SERVICES").split()) == layer.SERVICES
    trimmed = re.findall(r'"\$\(LAYER_SITE\)"?/?([\w*.\-/]+)', (ROOT / "Makefile").read_text())
    assert {"bin", "pip", "pip-*.dist-info", "pydantic/v1"} <= {t.strip('"/') for t in trimmed}


def test_the_repository_s_bundle_and_a_packaged_one_hold_the_same_code() -> None:
    """tools/bundle.py zips examples' bundle for infra/ (as make build-WorkerFunction copies it for sam build);
    dormant.deploy.package bundles a user's app: the same files (but the templates the wheel ships)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        bundle = importlib.import_module("bundle")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    ours = set(bundle.code_files(ROOT / "examples"))
    packaged = set(package.code_files(package.AppSource(ROOT / "examples", ROOT)))
    assert {n for n in ours if not n.startswith("dormant/deploy/files/")} == packaged
