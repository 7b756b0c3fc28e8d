"""The API that schemathesis fuzzes (tests/api/fuzzing.py): the document it fuzzes is the served one, and what the
fuzzer found, kept as plain tests. The fuzzing of every operation itself is tests/api/test_fuzz_operations.py (the
release tier: `make check`, `make fuzz`).
"""

from __future__ import annotations

from tests.api.fuzzing import TOKEN, document, served

__all__ = ["served"]  # (the module-scoped fixture the tests below use)


def test_the_fuzzed_document_is_the_served_one(served: str) -> None:
    import httpx

    assert httpx.get(f"{served}/openapi.json", timeout=30).json() == document()


def test_a_hostile_timeout_on_a_wait_nothing_answers_ends_at_the_cap(served: str) -> None:
    """What the fuzzer found (`wait=true&timeout=7.7e306` to an actor asleep for an hour): capped at the API's wait
    (api_max_wait), the wait times out with its defined answer."""
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{served}/actors/sleeper/hostile-timeout/queues/go"
    first = httpx.post(url, json=1, headers=headers, timeout=30)  # taken at once: the workflow then naps for an hour
    assert first.status_code == 202, first.text
    answer = httpx.post(f"{url}?wait=true&timeout=7.7e306", json=2, headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["status"]) == (200, "timedOut"), answer.text
