"""The next release of the shop (docs/operations.md): a refactor renamed the first step. Orders past it no
longer replay: `dormant replay --all` catches that before the deploy."""

from shop import define

registry = define("reserve-stock")
