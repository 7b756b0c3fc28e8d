"""The deployment files of an app: the shipped template.yaml and Terraform module (`files/`) with the app's registry
and the packaged code's paths put in. Pure: text in, text out.

The shipped files are Dormant's own deployment (its repository's template.yaml, infra/ and functions/ equal them),
whose defaults serve `examples.app:registry`; each substitution below must match exactly once, so a change to
the files that moves one fails here (and in the tests) instead of packaging a template that still names examples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from dormant.deploy.errors import InvalidAppSpecError, ShippedFilesChangedError

EXAMPLES_APP = "examples.app:registry"
APP_SPEC = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")  # what template.yaml's App admits
# Where `dormant package` puts the code, beside template.yaml: what `sam build` copies (the packaged Makefile)
BUNDLE_DIR = "bundle"
LAYER_DIR = "layer"
TERRAFORM_DIR = "terraform"
# the Lambda entry points, as their handlers name them (functions.worker.handler.handler, ...)
FUNCTIONS = ("functions/api/handler.py", "functions/worker/handler.py", "functions/authorizer/handler.py")


@dataclass(frozen=True, slots=True)
class Substitution:
    old: str
    new: str


def shipped() -> Traversable:
    """The deployment files in the installed package."""
    return files("dormant.deploy").joinpath("files")


def shipped_text(*parts: str) -> str:
    node = shipped()
    for part in parts:
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def terraform_names() -> list[str]:
    return sorted(node.name for node in shipped().joinpath("terraform").iterdir() if node.name.endswith(".tf"))


def check_app(app: str) -> str:
    if not APP_SPEC.fullmatch(app):
        raise InvalidAppSpecError(f"--app {app!r}: expected module:attribute, e.g. shop.app:registry")
    return app


def apply(text: str, substitutions: list[Substitution], where: str) -> str:
    for substitution in substitutions:
        count = text.count(substitution.old)
        if count != 1:  # the shipped file changed under the generator: fail loudly, never half-substitute
            raise ShippedFilesChangedError(f"{where}: {substitution.old!r} occurs {count} times, expected once")
        text = text.replace(substitution.old, substitution.new)
    return text


def template_yaml(app: str) -> str:
    """The SAM template of `app`, its code in bundle/ and layer/ beside it (built by the packaged Makefile)."""
    check_app(app)
    text = shipped_text("template.yaml")
    text = apply(text, [
        Substitution(f"Default: {EXAMPLES_APP}\n", f"Default: {app}\n"),
        Substitution("(make build-*: APP_DIR, default examples/).", "(`dormant package`: bundle/)."),
        Substitution("ContentUri: functions/\n", f"ContentUri: {LAYER_DIR}/\n"),
    ], "template.yaml")
    count = text.count("CodeUri: functions/\n")
    if count != 3:  # the worker's, the API's and the authorizer's
        raise ShippedFilesChangedError(f"template.yaml: CodeUri: functions/ occurs {count} times, expected 3")
    return text.replace("CodeUri: functions/\n", f"CodeUri: {BUNDLE_DIR}/\n")


def terraform_file(name: str, app: str) -> str:
    """One file of the Terraform module of `app` (its zips in .build/ beside it, as infra/'s default)."""
    check_app(app)
    text = shipped_text("terraform", name)
    if name == "variables.tf":
        text = apply(text, [Substitution(f'default     = "{EXAMPLES_APP}"', f'default     = "{app}"')],
                     "terraform/variables.tf")
    return text


SAM_MAKEFILE = f"""\
# `sam build --template-file template.yaml` runs these targets (BuildMethod: makefile) with ARTIFACTS_DIR set: they
# copy what `dormant package` built beside this file, the functions' bundle and the dependency layer.
build-WorkerFunction build-ApiFunction build-AuthorizerFunction:
\tmkdir -p "$(ARTIFACTS_DIR)"
\tcp -R {BUNDLE_DIR}/. "$(ARTIFACTS_DIR)"

build-DependenciesLayer:
\tmkdir -p "$(ARTIFACTS_DIR)"
\tcp -R {LAYER_DIR}/. "$(ARTIFACTS_DIR)"
"""


def readme(app: str) -> str:
    return f"""\
# The deployment of {app}

Written by `dormant package --app {app}`; build it again after a change rather than editing it.

- `template.yaml`: the SAM template; `sam build --template-file template.yaml`, then `sam deploy --guided`.
- `terraform/`: the same resources as a Terraform module, its code in `terraform/.build/`; `terraform init`
  and `terraform apply` in that folder.
- `{BUNDLE_DIR}/`: the functions' code (Dormant, its Lambda entry points, your package); `{LAYER_DIR}/python/`: the
  dependencies, built for Lambda's Python 3.13 on arm64.
"""


def repository_files() -> dict[str, str]:
    """Dormant's own deployment as its repository holds it (path -> text): the shipped files, examples' defaults
    kept (`make package-examples` writes them; tests/unit/test_deploy_files.py compares)."""
    found = {"template.yaml": shipped_text("template.yaml")}
    found |= {f"infra/{name}": shipped_text("terraform", name) for name in terraform_names()}
    found |= {name: shipped_text(*name.split("/")) for name in FUNCTIONS}
    return found
