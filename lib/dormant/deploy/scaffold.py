"""`dormant new NAME`: a project of its own in ./NAME whose tests pass at once.

    NAME/pyproject.toml      dormant as a dependency (a range), pytest settings, a `test` extra
    NAME/Makefile            test, dev, package, deploy
    NAME/README.md           what to run
    NAME/NAME/app.py         one actor (a step, a queue wait, a durable sleep) and the registry
    NAME/tests/test_app.py   its TestEnv tests
"""

from __future__ import annotations

import keyword
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from dormant.deploy.errors import InvalidProjectNameError, ProjectExistsError

# names a project's package would hide, or that the packaged bundle holds beside it
TAKEN = frozenset({"dormant", "functions", "tests", "test"})


def check_name(name: str) -> str:
    if not name.isidentifier() or not name.isascii() or keyword.iskeyword(name) or name != name.lower():
        raise InvalidProjectNameError(
            f"{name!r} is not a Python package name: use lowercase letters, digits and underscores, starting with a "
            "letter (e.g. shop or order_service)")
    if name in TAKEN or name in sys.stdlib_module_names:
        raise InvalidProjectNameError(f"{name!r} would hide the module of that name (Python's or Dormant's): "
                                      "choose another name")
    return name


def dormant_range() -> str:
    """`dormant>=X.Y.Z,<next`: this version up to the next breaking one (the minor while below 1.0)."""
    try:
        current = version("dormant")
    except PackageNotFoundError:  # a source tree that was never installed
        return "dormant"
    parts = [int(p) if p.isdigit() else 0 for p in current.split(".")[:2]] + [0, 0]
    major, minor = parts[0], parts[1]
    upper = f"0.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"dormant>={current},<{upper}"


def files(name: str) -> dict[str, str]:
    """relative path -> text of the project named `name`."""
    dependency = dormant_range()
    return {
        "pyproject.toml": PYPROJECT.format(name=name, dependency=dependency,
                                           dev=dependency.replace("dormant", "dormant[dev]", 1)),
        "Makefile": MAKEFILE.format(name=name),
        "README.md": README.format(name=name),
        ".gitignore": GITIGNORE,
        f"{name}/__init__.py": f'"""The {name} app (its actors are in {name}.app)."""\n',
        f"{name}/app.py": APP.format(name=name),
        "tests/test_app.py": TEST.format(name=name),
    }


def create(name: str, parent: Path) -> Path:
    """Writes the project to parent/name; refuses (writing nothing) a bad name or a folder that holds something."""
    check_name(name)
    root = parent / name
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ProjectExistsError(f"{root} exists and is not empty: choose another name or remove it first")
    for relative, text in files(name).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
# Your app's own dependencies go here too: `dormant package` puts them in the Lambda layer.
dependencies = ["{dependency}"]

[project.optional-dependencies]
# `dormant dev`'s embedded AWS server
dev = ["{dev}"]
test = ["pytest>=8", "pytest-asyncio>=0.24"]

[tool.setuptools]
packages = ["{name}"]

[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
pythonpath = ["."]
testpaths = ["tests"]
"""

MAKEFILE = """\
# The project's commands, with the tools of its virtual environment:
#   python3 -m venv .venv && .venv/bin/pip install -e ".[dev,test]"
BIN ?= .venv/bin
APP := {name}.app:registry

.PHONY: test dev package deploy

test:
\t$(BIN)/python -m pytest

# the whole stack on this machine (no AWS account): API on http://127.0.0.1:8787, dashboard at /ui
dev:
\t$(BIN)/dormant dev --app $(APP)

# the deployment in build/: template.yaml (SAM), terraform/, the functions' bundle and the dependency layer
package:
\t$(BIN)/dormant package --app $(APP) --out build

# with the AWS SAM CLI and your AWS credentials (or: cd build/terraform && terraform init && terraform apply)
deploy: package
\tsam build --template-file build/template.yaml
\tsam deploy --guided
"""

README = """\
# {name}

Durable actor workflows on AWS with [Dormant](https://github.com/dormant/dormant). The actors are in
`{name}/app.py`, their tests in `tests/`.

```console
$ python3 -m venv .venv
$ .venv/bin/pip install -e ".[dev,test]"
$ make test       # the tests, in memory on a virtual clock
$ make dev        # the whole stack locally: API on http://127.0.0.1:8787, dashboard at /ui
$ make package    # the deployment in build/: template.yaml (SAM), terraform/, the code and its layer
$ make deploy     # sam build and sam deploy --guided (AWS credentials needed)
```

(Dormant from a wheel rather than your package index: `.venv/bin/pip install /path/to/dormant-*.whl -e ".[dev,test]"`.)

Try it under `make dev`:

```console
$ curl -X POST localhost:8787/actors/order/order-1/queues/payments -H 'Content-Type: application/json' \\
    -d '{{"amount_cents": 1250}}'
$ curl localhost:8787/actors/order/order-1/state
```
"""

GITIGNORE = """\
.venv/
__pycache__/
*.egg-info/
.pytest_cache/
build/
.aws-sam/
.dormant/
"""

APP = '''\
"""The {name} app: its actors and the registry the functions serve (`--app {name}.app:registry`).

An order opens, waits for its payment (a queue message), records it, waits out a cooling-off hour (a durable
sleep: the actor costs nothing meanwhile, and the wait survives restarts and deploys) and ships.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

COOLING_OFF_SECONDS = 3600.0


class Payment(BaseModel):
    amount_cents: int = Field(gt=0)


class Order(BaseModel):
    status: str = "new"
    paid_cents: int = 0


orders = actor("order", state=Order, queues={{"payments": queue(Payment)}})


@orders.workflow
async def run(ctx: WorkflowContext) -> None:
    def open_order(s: StepContext) -> None:
        s.state.status = "awaiting-payment"

    await ctx.step("open", open_order)
    payment = await ctx.queue.next("wait-payment")

    def record_payment(s: StepContext) -> None:
        s.state.status = "paid"
        s.state.paid_cents = payment.body.amount_cents

    await ctx.step("record-payment", record_payment)
    await ctx.sleep("cooling-off", COOLING_OFF_SECONDS)

    def ship(s: StepContext) -> None:
        s.state.status = "shipped"

    await ctx.step("ship", ship)


@orders.action
def get_order(c: ActionContext) -> Order:
    return c.state


registry = setup(orders)
'''

TEST = '''\
"""The order's life on TestEnv: in memory, on a virtual clock (the cooling-off hour passes at once)."""

import pytest

from dormant.errors import InvalidMessageError
from dormant.testing import TestEnv
from {name}.app import COOLING_OFF_SECONDS, registry


async def test_an_order_ships_after_its_payment_and_the_cooling_off() -> None:
    async with TestEnv(registry) as env:
        order = env.client.get_or_create("order", ["order-1"])
        await order.send("payments", {{"amount_cents": 1250}})
        await env.run_until_idle()
        state = await order.get_order()
        assert (state.status, state.paid_cents) == ("paid", 1250)

        await env.advance(COOLING_OFF_SECONDS - 1)
        assert (await order.get_order()).status == "paid"
        await env.advance(1)
        assert (await order.get_order()).status == "shipped"


async def test_an_order_waits_for_its_payment() -> None:
    async with TestEnv(registry) as env:
        order = env.client.get_or_create("order", ["order-2"])
        assert (await order.get_order()).status == "new"  # the first call creates the actor
        await env.run_until_idle()
        await env.advance(7 * 24 * 3600)
        assert (await order.get_order()).status == "awaiting-payment"
        assert (await order.status()).waiting_for.queues == ["payments"]


async def test_a_payment_must_be_positive() -> None:
    async with TestEnv(registry) as env:
        order = env.client.get_or_create("order", ["order-3"])
        with pytest.raises(InvalidMessageError):
            await order.send("payments", {{"amount_cents": 0}})
'''
