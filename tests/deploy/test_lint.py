"""cfn-lint 1.53.3 on template.yaml (it runs the SAM translator, so a dangling reference inside a SAM resource
is an error) and `terraform fmt -check` on infra/; broken copies prove both checks fail when they should."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy.support import INFRA, TEMPLATE, deploy_tool, run, terraform, tool_environment

# (file name, what to break, the dangling name cfn-lint must report)
BROKEN_TEMPLATES = [
    # inside a SAM event source: cfn-lint 1.54+ and `sam validate --lint` miss this one
    ("dangling-event-queue.yaml", "Queue: !GetAtt TimerQueue.Arn", "Queue: !GetAtt TimerQueu.Arn", "TimerQueu"),
    ("dangling-env.yaml", "DORMANT_TABLE: !Ref ActorTable", "DORMANT_TABLE: !Ref ActorTabel", "ActorTabel"),
]


@pytest.fixture(scope="module")
def cfn_lint_findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """cfn-lint's findings per file: template.yaml and its broken copies, in one run (it takes seconds)."""
    tool = deploy_tool("cfn-lint")
    directory = tmp_path_factory.mktemp("cfn-lint")
    text = TEMPLATE.read_text()
    files = [TEMPLATE]
    for name, old, new, _ in BROKEN_TEMPLATES:
        assert old in text, f"template.yaml no longer has {old!r}: update the broken copy"
        (directory / name).write_text(text.replace(old, new, 1))
        files.append(directory / name)
    result = run([tool, "--format", "parseable", *files], env=tool_environment())
    assert result.returncode in (0, 2, 4, 6, 8, 10, 12, 14), result.stderr  # a crash is not a finding
    findings: dict[str, list[str]] = {str(path): [] for path in files}
    for line in result.stdout.splitlines():
        path = line.split(":", 1)[0]
        assert path in findings, f"unexpected cfn-lint output: {line}\n{result.stderr}"
        findings[path].append(line)
    return findings


def test_cfn_lint_passes_the_template(cfn_lint_findings: dict[str, list[str]]) -> None:
    assert cfn_lint_findings[str(TEMPLATE)] == []


@pytest.mark.parametrize(("name", "dangling"), [(name, dangling) for name, _, _, dangling in BROKEN_TEMPLATES])
def test_cfn_lint_catches_a_dangling_reference(name: str, dangling: str, cfn_lint_findings: dict[str, list[str]]
                                               ) -> None:
    findings = next(found for path, found in cfn_lint_findings.items() if path.endswith(name))
    errors = [line for line in findings if ":E1010:" in line or ":E1020:" in line]
    assert errors and all(f"'{dangling}'" in line for line in errors), findings


def test_terraform_files_are_formatted(tmp_path: Path) -> None:
    binary = terraform()
    env = tool_environment(TF_CLI_CONFIG_FILE=str(tmp_path / "none.tfrc"))
    (tmp_path / "none.tfrc").write_text("")
    result = run([binary, "fmt", "-check", "-diff", "-recursive", INFRA], env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    # ... and the check does fail on a misformatted copy
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns(".build", ".terraform*"))
    main = copy / "main.tf"
    main.write_text(main.read_text().replace("  billing_mode                = ", "  billing_mode = ", 1))
    result = run([binary, "fmt", "-check", "-recursive", copy], env=env)
    assert result.returncode != 0 and "main.tf" in result.stdout
