"""dormant.core.clients: the clients Dormant makes skip what need not be done per request (no request is made)."""

from __future__ import annotations

import pytest

from dormant.core.clients import aiobotocore_session, botocore_session, open_client
from dormant.core.responses import LeanParserFactory
from dormant.settings import Settings

SETTINGS = Settings(endpoint_url="http://127.0.0.1:1",
                    region="us-east-1")


def test_the_sessions_parse_dynamodb_lean() -> None:
    assert isinstance(botocore_session().get_component("response_parser_factory"), LeanParserFactory)
    assert isinstance(aiobotocore_session().get_component("response_parser_factory"), LeanParserFactory)


@pytest.mark.parametrize("kind", ["threads", "aiobotocore"])
async def test_own_inputs_are_not_validated_again_and_the_user_agent_is_made_once(
        kind: str) -> None:
    from botocore.exceptions import EndpointConnectionError, ParamValidationError

    # a parameter of the wrong type: a client that validates refuses it before sending; Dormant's send it (to no
    # server here)
    calls = {"dynamodb": ("get_item", {"TableName": "t", "Key": {"pk": {"S": "x"}}, "ConsistentRead": "yes"}),
             "sqs": ("get_queue_url", {"QueueName": 7})}
    for service, (operation, params) in calls.items() if kind == "threads" else [("dynamodb", calls["dynamodb"])]:
        plain = botocore_session().create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:1")
        with pytest.raises(ParamValidationError):
            getattr(plain, operation)(**params)
        async with open_client(service, SETTINGS, kind=kind, attempts=1,  # type: ignore[arg-type]
                               connect_timeout=1) as client:
            assert client.meta.config.user_agent.count(" dormant") == 1
            with pytest.raises(EndpointConnectionError):
                await getattr(client, operation)(**params)
