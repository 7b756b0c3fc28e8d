"""CPU of the large-values side of a commit with a bucket configured, when nothing is big (the deployment's case:
template.yaml and infra/ deploy a bucket): `LargeValues.check_draft` then `store_draft` of a queue loop's commit
(tests/integration/test_aws_store.loop_iteration) whose state holds 0, 20 or 200 small items.

    .venv/bin/python benchmarks/offload_sizing.py                              # this checkout
    PYTHONPATH=/tmp/base/lib:. .venv/bin/python benchmarks/offload_sizing.py   # another tree's library
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from dormant.s3.large_values import LargeValues
from dormant.settings import Settings
from tests.contract.support import ref
from tests.integration.test_aws_store import loop_iteration

COMMITS = 2000


class NoBlobs:
    """Stands for S3Blobs: nothing here is big enough to be written."""

    async def put_many(self, objects: dict[str, bytes]) -> None:
        raise AssertionError(f"nothing should be offloaded: {list(objects)}")


async def per_commit(state_items: int) -> float:
    values = LargeValues(NoBlobs(), Settings(bucket="bench-bucket"))  # type: ignore[arg-type]
    actor = ref()
    drafts = [loop_iteration(n) for n in range(COMMITS)]
    for draft in drafts:
        state: dict[str, Any] = {"value": 1}
        if state_items:
            state["items"] = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(state_items)]
        draft.state = state
    started = time.process_time()
    for n, draft in enumerate(drafts):
        values.check_draft(actor, draft)
        await values.store_draft(actor, {}, (), n + 2, draft)
    return (time.process_time() - started) / COMMITS


def main() -> None:
    for items in (0, 20, 200):
        rounds = [asyncio.run(per_commit(items)) for _ in range(3)]
        print(f"state of {items} items: {statistics.median(rounds) * 1e6:.1f} us per commit (median of 3)")


if __name__ == "__main__":
    main()
