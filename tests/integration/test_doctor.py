"""`dormant doctor` (issue 26.1): actors whose S3 objects were deleted while still referred to (what the shared-value
bug did) are found, repaired by content where another object holds it, and otherwise made loadable and visibly
failed, on DynamoDB Local with S3 on moto: in-process, over the HTTP API and through the CLI. After a check that
finds nothing, nothing stored changed."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.http.app import create_app
from dormant.ports import ActorRef
from dormant.settings import Settings
from dormant.workflow.history import WorkflowState
from tests.api.support import serve
from tests.aws_env import AwsTestEnv
from tests.large_app import digest, registry
from tests.references import dangling, listing, scan

BIG = 100_000


async def cli(args: list[str], env: dict[str, str] | None = None) -> Any:
    """`dormant ARGS` as an operator types it (in a thread: it runs its own event loop; the API runs in this one)."""
    return await asyncio.to_thread(CliRunner().invoke, app, args, env=env)


@pytest.fixture
async def env(aws_endpoints: dict[str, str]) -> AsyncIterator[AwsTestEnv]:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints, snapshot_every=4)) as created:
        yield created


def key_of(objects: set[str], value: Any) -> str:
    """The object holding `value` (keys name the SHA-256 of the stored JSON)."""
    sha = hashlib.sha256(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    found = [key for key in objects if key.rsplit("/", 1)[-1].startswith(sha)]
    assert len(found) >= 1, f"no object holds the value ({sha})"
    return sorted(found)[0]


async def delete_object(env: AwsTestEnv, key: str) -> None:
    await env.s3.delete_object(Bucket=env.settings.bucket, Key=key)


async def table(env: AwsTestEnv) -> list[dict[str, Any]]:
    return sorted(await scan(env.store.client, env.settings.table),  # type: ignore[attr-defined]
                  key=lambda item: item["sk"]["S"])


async def test_an_intact_actor_is_reported_intact_and_the_check_changes_nothing(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["fine"])
    await handle.send("echo", {"text": "e" * BIG})
    await handle.send("append", {"kb": 100})
    await env.run_until_idle()
    before = await table(env), await listing(env.s3, env.settings.bucket)
    report = await handle.check_values()
    assert report.outcome == "intact" and report.references >= 2 and not report.problems, report
    assert report.intact_versions and report.intact_versions[-1] == (await handle.status()).version
    assert (await table(env), await listing(env.s3, env.settings.bucket)) == before


async def test_a_message_whose_object_went_is_recovered_from_another_with_the_same_content(env: AwsTestEnv) -> None:
    """The shape the bug left: two pending messages with one content, one's object deleted."""
    handle = env.client.get_or_create("large-notebook", ["shared"])
    await handle.send("append", {"kb": 0})
    await env.run_until_idle()
    await handle.pause()
    text = "j" * BIG
    first = await handle.send("echo", {"text": text})
    await handle.send("echo", {"text": text})
    objects = await listing(env.s3, env.settings.bucket)
    pending = {item["sk"]["S"][2:]: item["m"]["S"] for item in await table(env) if "m" in item}
    deleted = json.loads(pending[first.id])["body"]["text"]["__dormant_blob__"]
    assert deleted in objects
    await delete_object(env, deleted)
    async with AwsTestEnv(registry, store=env.store) as fresh:  # a new process: nothing cached
        again = fresh.client.get_or_create("large-notebook", ["shared"])
        check = await again.check_values()
        assert check.outcome == "lost" and [(p.where, p.object, p.outcome) for p in check.problems] == [
            (f"inbox message {first.id}", deleted, "missing")]
        repaired = await again.check_values(repair=True)
        assert repaired.outcome == "repaired" and repaired.problems[0].outcome == "recovered", repaired
        after = await again.check_values()
        assert after.outcome == "intact" and after.references == check.references and not after.problems
        await again.unpause()
        await fresh.run_until_idle()
        assert (await again.state()).digests == [digest(text)] * 2 and not fresh.failures
        assert await dangling(fresh.store.client, fresh.s3, fresh.settings.table,  # type: ignore[attr-defined]
                              fresh.settings.bucket) == {}


async def test_a_message_whose_body_is_lost_is_taken_out_and_the_actor_runs_on(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["lost-message"])
    await handle.send("append", {"kb": 0})
    await env.run_until_idle()
    await handle.pause()
    lost = await handle.send("echo", {"text": "u" * BIG})
    await handle.send("echo", {"text": "small"})
    pending = {item["sk"]["S"][2:]: item["m"]["S"] for item in await table(env) if "m" in item}
    await delete_object(env, json.loads(pending[lost.id])["body"]["text"]["__dormant_blob__"])
    async with AwsTestEnv(registry, store=env.store) as fresh:
        again = fresh.client.get_or_create("large-notebook", ["lost-message"])
        with pytest.raises(Exception, match="is not in bucket"):
            await again.status()
        report = await again.check_values(repair=True)
        assert report.outcome == "lost" and report.dropped_messages == [lost.id] and not report.marked_failed
        assert [p.outcome for p in report.problems] == ["lost"]
        await again.unpause()
        await fresh.run_until_idle()
        assert (await again.state()).digests == [digest("small")]
        await again.send("echo", {"text": "later"})
        await fresh.run_until_idle()
        assert (await again.state()).digests == [digest("small"), digest("later")] and not fresh.failures


async def test_a_lost_value_of_the_live_version_is_marked_failed_and_a_reset_brings_the_actor_back(
        env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["lost-state"])
    await handle.send("append", {"kb": 0})
    await env.run_until_idle()
    before = (await handle.status()).version
    await handle.send("append", {"kb": 100, "fill": "q"})
    await env.run_until_idle()
    await delete_object(env, key_of(await listing(env.s3, env.settings.bucket), "q" * BIG))
    async with AwsTestEnv(registry, store=env.store) as fresh:
        again = fresh.client.get_or_create("large-notebook", ["lost-state"])
        async with serve(create_app(registry, Settings(dev=True), service=fresh.service)) as url:
            status = await cli(["status", "large-notebook", "lost-state", "--url", url])
            assert status.exit_code != 0  # the actor cannot load: 503
            checked = await cli(["doctor", "large-notebook", "--url", url],
                                         env={"COLUMNS": "200", "NO_COLOR": "1"})
            assert checked.exit_code == 1 and "lost-state: lost" in checked.output and "the state" in checked.output
            repaired = await cli(["doctor", "large-notebook", "lost-state", "--repair", "--json",
                                                "--url", url])
            assert repaired.exit_code == 1, repaired.output
            report = json.loads(repaired.output)[0]
            assert report["marked_failed"] and report["outcome"] == "lost", report
            assert before in report["intact_versions"]
        status_after = await again.status()
        assert status_after.workflow is WorkflowState.FAILED and "StoredValueLostError" in (status_after.error or "")
        assert f"reset it to version {report['intact_versions'][-1]}" in (status_after.error or "")
        await again.reset(report["intact_versions"][-1], reason="values lost")
        await fresh.run_until_idle()
        assert (await again.status()).workflow is not WorkflowState.FAILED
        assert (await again.state()).chunks == [""]
        assert await dangling(fresh.store.client, fresh.s3, fresh.settings.table,  # type: ignore[attr-defined]
                              fresh.settings.bucket) == {}
        await again.send("append", {"kb": 1})
        await fresh.run_until_idle()
        assert [len(chunk) for chunk in (await again.state()).chunks] == [0, 1000] and not fresh.failures


async def test_every_actor_of_a_type_is_checked_and_only_the_broken_ones_are_shown(env: AwsTestEnv) -> None:
    for key in ("a", "b", "c"):
        await env.client.get_or_create("large-notebook", [key]).send("append", {"kb": 40, "fill": key})
    await env.run_until_idle()
    await delete_object(env, key_of(await listing(env.s3, env.settings.bucket), "b" * 40_000))
    async with AwsTestEnv(registry, store=env.store) as fresh, \
            serve(create_app(registry, Settings(dev=True), service=fresh.service)) as url:
        result = await cli(["doctor", "large-notebook", "--url", url],
                                    env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert result.exit_code == 1, result.output
        assert "b: lost" in result.output and "a: " not in result.output and "c: " not in result.output
        assert "3 actor(s) of large-notebook checked: 2 intact, 0 repaired, 1 lost" in result.output
        missing = await cli(["doctor", "large-notebook", "nobody", "--url", url])
        assert missing.exit_code == 2 and "does not exist" in missing.output
        assert ActorRef(name="large-notebook", key=("nobody",)).id not in {
            item["pk"]["S"] for item in await table(fresh)}  # a check creates nothing
