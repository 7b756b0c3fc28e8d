"""Each auth mode through the real API handler (functions/api/handler.py, Mangum) on a moto server, with the
events API Gateway sends: AWS's own samples (`sam local generate-event apigateway http-api-proxy` and
`aws-proxy`) carrying the request context of an IAM principal, of a verified JWT, or of nothing.

The handler is configured only by its environment, as template.yaml and infra/ set it: DORMANT_AUTH_MODE, the
JWT issuer and audience, and the SSM SecureString parameter holding the operator token (read at run time,
never in the environment). The registry is tests/api/vault_app.py, whose authorization hook lets the owner
(the actor's key) in and refuses everyone else.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from dormant.dynamodb.table import create_table
from dormant.http.keys import encode_key
from dormant.settings import Settings
from dormant.sqs.poller import lambda_event
from dormant.sqs.transport import create_queues
from tests.api.support import lambda_body
from tests.deploy.support import REGION, ROOT, deploy_tool, run, tool_environment
from tests.servers import MotoServer

TOKEN = "operator-" + uuid.uuid4().hex
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"
AUDIENCE = "dormant-client"
ALICE_ARN = "arn:aws:iam::123456789012:user/alice"
ADMIN_ARN = "arn:aws:sts::123456789012:assumed-role/vault-admin/ops"
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def samples() -> dict[str, dict[str, Any]]:
    """AWS's sample events, from the SAM CLI (offline)."""
    sam = deploy_tool("sam")
    found = {}
    for name in ("http-api-proxy", "aws-proxy"):
        result = run([sam, "local", "generate-event", "apigateway", name], env=tool_environment())
        assert result.returncode == 0, result.stderr
        found[name] = json.loads(result.stdout)
    assert "jwt" in found["http-api-proxy"]["requestContext"]["authorizer"]  # the shape we replace
    return found


@dataclass
class Backend:
    endpoint: str
    env: dict[str, str]  # what template.yaml gives the API function, minus the auth settings
    worker_env: dict[str, str]


@pytest.fixture(scope="module")
def backend(moto_server_process: MotoServer) -> Backend:
    endpoint = moto_server_process.endpoint
    prefix = f"auth-{uuid.uuid4().hex[:8]}"
    settings = Settings(endpoint_url=endpoint, region=REGION, table=f"{prefix}-actors",
                        queue_name=f"{prefix}-messages.fifo", timer_queue_name=f"{prefix}-timers",
                        dlq_name=f"{prefix}-dlq", fifo_dlq_name=f"{prefix}-dlq.fifo")

    async def create() -> Any:
        from aiobotocore.session import get_session  # type: ignore[import-untyped]

        session = get_session()
        async with session.create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb, \
                session.create_client("sqs", **settings.client_kwargs("sqs")) as sqs:
            await create_table(dynamodb, settings)
            return await create_queues(sqs, settings)

    urls = asyncio.run(create())
    boto3.client("ssm", endpoint_url=endpoint, region_name=REGION).put_parameter(
        Name=f"/{prefix}/inspector-token", Type="SecureString", Value=TOKEN)
    env = {"DORMANT_APP": "tests.api.vault_app:registry", "DORMANT_ENDPOINT_URL": endpoint,
           "DORMANT_TABLE": settings.table, "DORMANT_QUEUE_URL": urls.wake, "DORMANT_TIMER_QUEUE_URL": urls.timers,
           "DORMANT_QUEUE_NAME": settings.queue_name, "DORMANT_TIMER_QUEUE_NAME": settings.timer_queue_name,
           "DORMANT_INSPECTOR_TOKEN_PARAMETER": f"/{prefix}/inspector-token"}
    return Backend(endpoint, env, {k: v for k, v in env.items() if "INSPECTOR" not in k})


class Api:
    """The API Lambda module loaded with one environment, on a loop of its own (as a Lambda container)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.loop = asyncio.new_event_loop()

    def __call__(self, event: dict[str, Any]) -> tuple[int, Any]:
        asyncio.set_event_loop(self.loop)
        response = self.module.handler(event, None)
        try:
            return response["statusCode"], lambda_body(response)
        except ValueError:  # not JSON: the export's JSON lines
            return response["statusCode"], response["body"]

    def close(self) -> None:
        self.loop.run_until_complete(self.module.app.state.services.aclose())
        self.loop.close()
        asyncio.set_event_loop(None)


def _load(kind: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """functions/<kind>/handler.py imported afresh with exactly `env` as its DORMANT_* environment."""
    for variable in [v for v in os.environ if v.startswith("DORMANT_")]:
        monkeypatch.delenv(variable)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    path = ROOT / "functions" / kind / "handler.py"
    spec = importlib.util.spec_from_file_location(f"{kind}_handler_{uuid.uuid4().hex[:8]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def api(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Api]]:
    opened: list[Api] = []

    def start(mode: str, **extra: str) -> Api:
        env = {**backend.env, "DORMANT_AUTH_MODE": mode, **extra}
        handler = Api(_load("api", env, monkeypatch))
        opened.append(handler)
        return handler

    yield start
    for handler in opened:
        handler.close()


def http_event(sample: dict[str, Any], method: str, target: str, *, authorizer: dict[str, Any] | None,
               body: Any = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The HTTP API (payload 2.0) sample, for this request, with `authorizer` as its request context's."""
    event = copy.deepcopy(sample)
    path, _, query = target.partition("?")
    event.update(rawPath=path, rawQueryString=query, cookies=[], pathParameters=None, stageVariables=None,
                 headers={"host": "abc.execute-api.us-east-1.amazonaws.com", **JSON, **(headers or {})},
                 queryStringParameters=dict(part.split("=", 1) for part in query.split("&")) if query else None,
                 body=None if body is None else json.dumps(body), isBase64Encoded=False)
    context = event["requestContext"]
    context["http"].update(method=method, path=path)
    context.pop("authentication", None)
    context.pop("authorizer")
    if authorizer is not None:
        context["authorizer"] = authorizer
    return event


def rest_event(sample: dict[str, Any], method: str, target: str, *, identity: dict[str, Any] | None = None,
               claims: dict[str, Any] | None = None, body: Any = None) -> dict[str, Any]:
    """The REST API (payload 1.0) sample: an IAM signer in `identity`, or Cognito claims in `authorizer`."""
    event = copy.deepcopy(sample)
    path, _, query = target.partition("?")
    event.update(path=path, httpMethod=method, resource="/{proxy+}", pathParameters={"proxy": path[1:]},
                 queryStringParameters=dict(part.split("=", 1) for part in query.split("&")) if query else None,
                 multiValueQueryStringParameters=None, stageVariables=None,
                 headers={"Host": "abc.execute-api.us-east-1.amazonaws.com", **JSON},
                 multiValueHeaders=None, body=None if body is None else json.dumps(body), isBase64Encoded=False)
    event["requestContext"].update(httpMethod=method, path=path)
    event["requestContext"]["identity"].update(identity or {})
    if claims is not None:
        event["requestContext"]["authorizer"] = {"claims": claims}
    return event


def iam(arn: str) -> dict[str, Any]:
    return {"iam": {"accessKey": "AKIAEXAMPLE", "accountId": "123456789012", "callerId": "AIDAEXAMPLE",
                    "cognitoIdentity": None, "principalOrgId": None, "userArn": arn, "userId": "AIDAEXAMPLE"}}


def jwt(sub: str, *, issuer: str = ISSUER, audience: str = AUDIENCE, scope: str = "") -> dict[str, Any]:
    claims = {"sub": sub, "iss": issuer, "client_id": audience, "token_use": "access", "email": f"{sub}@example.com",
              "exp": "1893456000", "iat": "1767225600"}
    if scope:
        claims["scope"] = scope
    return {"jwt": {"claims": claims, "scopes": None}}


def vault(owner: str, suffix: str = "") -> str:
    return f"/actors/vault/{encode_key([owner])}{suffix}"


def test_iam_mode_takes_the_signed_principal_and_refuses_requests_without_one(
        api: Callable[..., Api], samples: dict[str, dict[str, Any]], backend: Backend,
        monkeypatch: pytest.MonkeyPatch) -> None:
    handler = api("iam")
    sample = samples["http-api-proxy"]
    alice = iam(ALICE_ARN)
    # no identity, or an identity of the wrong kind: 401, before anything else is looked at
    for authorizer in (None, jwt("alice"), {"iam": {"userArn": ""}}, {"lambda": {"user": ALICE_ARN}}):
        status, body = handler(http_event(sample, "PUT", vault(ALICE_ARN), authorizer=authorizer))
        assert (status, body["error"]["code"]) == (401, "unauthorized"), authorizer
        assert "SigV4" in body["error"]["message"] or "request context" in body["error"]["message"]
    status, body = handler(http_event(sample, "PUT", "/actors/nope/x", authorizer=None))
    assert status == 401  # not 404: an unauthenticated caller learns nothing
    # the owner creates and deposits; another principal is refused by the actor's hook
    assert handler(http_event(sample, "PUT", vault(ALICE_ARN), authorizer=alice))[0] == 201
    status, body = handler(http_event(sample, "POST", vault(ALICE_ARN, "/queues/deposit"), authorizer=alice,
                                      body={"amount": 3}))
    assert (status, body["status"]) == (202, "queued")
    status, body = handler(http_event(sample, "POST", vault(ALICE_ARN, "/queues/deposit"),
                                      authorizer=iam("arn:aws:iam::123456789012:user/mallory"), body={"amount": 1}))
    assert (status, body["error"]["code"]) == (403, "forbidden")
    status, body = handler(http_event(sample, "POST", vault(ALICE_ARN, "/actions/whoami"), authorizer=alice))
    assert status == 200 and body["result"]["kind"] == "iam" and body["result"]["id"] == ALICE_ARN
    assert body["result"]["claims"]["accountId"] == "123456789012"
    # an admin role reads the status; the operator token (from SSM) comes beside the SigV4 identity
    status, body = handler(http_event(sample, "GET", vault(ALICE_ARN, "/status?history=true"),
                                      authorizer=iam(ADMIN_ARN)))
    assert status == 401  # history needs the operator token too
    status, body = handler(http_event(sample, "GET", vault(ALICE_ARN, "/status?history=true"),
                                      authorizer=iam(ADMIN_ARN), headers={"x-dormant-operator-token": TOKEN}))
    assert status == 200 and body["history"] is not None

    # the worker consumes the message: the workflow saw the signed principal as the sender
    worker = _load("worker", backend.worker_env, monkeypatch)
    try:
        sqs = boto3.client("sqs", endpoint_url=backend.endpoint, region_name=REGION)
        for _ in range(5):
            messages = sqs.receive_message(QueueUrl=backend.env["DORMANT_QUEUE_URL"], MaxNumberOfMessages=10,
                                           AttributeNames=["All"]).get("Messages", [])
            if not messages:
                break
            arn = sqs.get_queue_attributes(QueueUrl=backend.env["DORMANT_QUEUE_URL"],
                                           AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            assert worker.handler(lambda_event(messages, arn=arn, region=REGION), None) == {"batchItemFailures": []}
            for message in messages:
                sqs.delete_message(QueueUrl=backend.env["DORMANT_QUEUE_URL"], ReceiptHandle=message["ReceiptHandle"])
    finally:
        worker.worker.close()
    status, body = handler(http_event(sample, "GET", vault(ALICE_ARN, "/state"), authorizer=alice))
    assert (status, body["balance"], body["senders"]) == (200, 3, [f"iam:{ALICE_ARN}"])
    assert body["created_by"] == f"iam:{ALICE_ARN}"
    status, history = handler(http_event(sample, "GET", vault(ALICE_ARN, "/history"), authorizer=iam(ADMIN_ARN),
                                         headers={"x-dormant-operator-token": TOKEN}))
    senders = [m["sender"] for e in history if e["kind"] == "message" for m in e["messages"]]
    assert status == 200 and senders == [{"kind": "iam", "id": ALICE_ARN, "scopes": [], "claims": {
        "accountId": "123456789012", "userArn": ALICE_ARN, "userId": "AIDAEXAMPLE", "callerId": "AIDAEXAMPLE"}}]


def test_iam_mode_reads_the_rest_api_identity(api: Callable[..., Api], samples: dict[str, dict[str, Any]]) -> None:
    handler = api("iam")
    sample = samples["aws-proxy"]
    assert handler(rest_event(sample, "PUT", vault(ALICE_ARN)))[0] == 401  # the sample's identity is unsigned
    signed = {"userArn": ALICE_ARN, "caller": "AIDAEXAMPLE", "accountId": "123456789012", "user": "AIDAEXAMPLE"}
    assert handler(rest_event(sample, "PUT", vault(ALICE_ARN), identity=signed))[0] in (200, 201)
    status, body = handler(rest_event(sample, "POST", vault(ALICE_ARN, "/actions/whoami"), identity=signed))
    assert status == 200 and body["result"]["id"] == ALICE_ARN


def test_jwt_mode_takes_verified_claims_and_checks_issuer_and_audience(
        api: Callable[..., Api], samples: dict[str, dict[str, Any]]) -> None:
    handler = api("jwt", DORMANT_JWT_ISSUER=ISSUER, DORMANT_JWT_AUDIENCE=f"other,{AUDIENCE}")
    sample = samples["http-api-proxy"]
    alice = jwt("alice")
    for authorizer in (None, iam(ALICE_ARN), {"jwt": {"claims": {"iss": ISSUER}, "scopes": None}},
                       jwt("alice", issuer="https://evil.example.com"), jwt("alice", audience="someone-else")):
        status, body = handler(http_event(sample, "PUT", vault("alice"), authorizer=authorizer))
        assert (status, body["error"]["code"]) == (401, "unauthorized"), authorizer
    status, body = handler(http_event(sample, "PUT", vault("alice"), authorizer=None))
    assert status == 401
    # the hook matches the owner by `sub` or by the email claim
    assert handler(http_event(sample, "PUT", vault("alice"), authorizer=alice))[0] == 201
    assert handler(http_event(sample, "GET", vault("alice@example.com", "/state"), authorizer=alice))[0] == 404
    assert handler(http_event(sample, "GET", vault("alice", "/state"), authorizer=jwt("bob")))[0] == 403
    status, body = handler(http_event(sample, "POST", vault("alice", "/actions/whoami"), authorizer=alice))
    assert status == 200 and (body["result"]["kind"], body["result"]["id"]) == ("jwt", "alice")
    assert body["result"]["claims"]["email"] == "alice@example.com"
    # scopes from the `scope` claim (and the authorizer's list): the admin scope may read the status
    admin = jwt("ops", scope="openid vault/admin")
    status, body = handler(http_event(sample, "GET", vault("alice", "/status"), authorizer=admin))
    assert status == 200, body
    assert handler(http_event(sample, "GET", vault("alice", "/status"), authorizer=alice))[0] == 403
    # operator routes: the verified JWT first, then the operator's token beside it (the JWT holds Authorization)
    assert handler(http_event(sample, "GET", vault("alice", "/history"), authorizer=None,
                              headers={"authorization": f"Bearer {TOKEN}"}))[0] == 401
    assert handler(http_event(sample, "GET", vault("alice", "/history"), authorizer=admin,
                              headers={"x-dormant-operator-token": "wrong"}))[0] == 401
    assert handler(http_event(sample, "GET", vault("alice", "/history"), authorizer=admin,
                              headers={"x-dormant-operator-token": TOKEN}))[0] == 200
    # a REST API with a Cognito authorizer passes the claims in `authorizer.claims`
    rest = samples["aws-proxy"]
    status, body = handler(rest_event(rest, "POST", vault("alice", "/actions/whoami"),
                                      claims=alice["jwt"]["claims"]))
    assert status == 200 and body["result"]["id"] == "alice"


def test_jwt_mode_at_connect_the_authorizer_function_allows_and_the_api_records_the_http_apis_caller(
        api: Callable[..., Api], backend: Backend, samples: dict[str, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """functions/authorizer/handler.py on an AWS-shaped `$connect` REQUEST authorizer event (its JWKS from a stub
    issuer), then the API function's `$connect` with the context API Gateway passes on: the caller recorded for the
    connection is the one the HTTP API makes of the same token's claims."""
    from joserfc import jwt as jose
    from joserfc.jwk import KeySet, RSAKey

    from dormant.aws.authorizer import Unauthorized
    from dormant.dynamodb.connections import Connections
    from dormant.dynamodb.requests import Table

    key = RSAKey.generate_key(2048, parameters={"kid": "k"})
    handler = api("jwt", DORMANT_JWT_ISSUER=ISSUER, DORMANT_JWT_AUDIENCE=AUDIENCE)
    authorizer = _load("authorizer", {"DORMANT_AUTH_MODE": "jwt", "DORMANT_JWT_ISSUER": ISSUER,
                                      "DORMANT_JWT_AUDIENCE": AUDIENCE}, monkeypatch)
    documents = {f"{ISSUER}/.well-known/openid-configuration": {"jwks_uri": f"{ISSUER}/keys"},
                 f"{ISSUER}/keys": KeySet([key]).as_dict(private=False)}
    authorizer.authorizer.verifier.fetch = documents.__getitem__  # the issuer, stubbed
    now = int(time.time())
    token = jose.encode({"alg": "RS256", "kid": "k"}, {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 60,
                                                       "email": "alice@example.com", "scope": "vault/read"}, key)
    connection = "Lp4TjeJTIAMCIrQ="
    context = {"routeKey": "$connect", "eventType": "CONNECT", "connectionId": connection, "stage": "dev",
               "domainName": "abc123.execute-api.us-east-1.amazonaws.com", "apiId": "abc123", "requestId": "r-1"}
    event = {"type": "REQUEST", "methodArn": "arn:aws:execute-api:us-east-1:123456789012:abc123/dev/$connect",
             "headers": {"Host": "abc123.execute-api.us-east-1.amazonaws.com"}, "multiValueHeaders": {},
             "queryStringParameters": {"token": token}, "requestContext": context}
    answer = authorizer.handler(event, None)
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    with pytest.raises(Unauthorized, match=r"^Unauthorized$"):  # a token whose signature does not verify
        authorizer.handler({**event, "queryStringParameters": {"token": token[:-4] + "AAAA"}}, None)
    connect = {"requestContext": {**context, "authorizer": {**answer["context"], "principalId": "alice"},
                                  "identity": {"sourceIp": "192.0.2.1"}}, "isBase64Encoded": False}
    assert handler.module.handler(connect, None) == {"statusCode": 200}

    async def recorded() -> Any:
        from aiobotocore.session import get_session

        settings = Settings(endpoint_url=backend.endpoint, region=REGION, table=backend.env["DORMANT_TABLE"])
        async with get_session().create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb:
            return await Connections(Table(dynamodb, settings.table), time.time).caller_of(connection)

    caller = json.loads(asyncio.run(recorded()))
    claims = json.loads(answer["context"]["claims"])
    status, body = handler(http_event(samples["http-api-proxy"], "POST", vault("alice", "/actions/whoami"),
                                      authorizer={"jwt": {"claims": claims, "scopes": None}}))
    assert status == 200
    assert (caller["kind"], caller["id"], caller["scopes"]) == ("jwt", "alice", ["vault/read"])
    assert caller["claims"] == body["result"]["claims"]


def test_none_mode_makes_everyone_anonymous(api: Callable[..., Api], samples: dict[str, dict[str, Any]]) -> None:
    handler = api("none")
    sample = samples["http-api-proxy"]
    # whatever the context says, the caller is anonymous: the hook sees no identity it could trust
    status, body = handler(http_event(sample, "POST", vault("anonymous", "/actions/whoami"),
                                      authorizer=jwt("alice")))
    assert status == 200 and body["result"] == {"kind": "anonymous", "id": "anonymous", "claims": {}, "scopes": []}
    assert handler(http_event(sample, "GET", vault("alice", "/state"), authorizer=jwt("alice")))[0] == 403
    assert handler(http_event(sample, "GET", vault("alice", "/history"), authorizer=None))[0] == 401


OPERATOR_ROUTES = [  # every operator route of a deployed API (fire-timer exists only under `dormant dev`)
    ("GET", "/history"), ("GET", "/inspector/workflow-history"), ("GET", "/inspector/export"),
    ("GET", "/status?history=true"), ("GET", "/inbox"), ("GET", "@/actors/vault"), ("GET", "@/actors/vault/counts"),
    ("GET", "@/actors/vault/attention"), ("POST", "/resume"), ("POST", "@/actors/vault/resume"),
    ("POST", "/terminate"), ("DELETE", "")]


@pytest.mark.parametrize("mode", ["iam", "jwt"])
def test_operator_routes_need_the_verified_caller_first_then_the_operator_token(
        mode: str, api: Callable[..., Api], samples: dict[str, dict[str, Any]]) -> None:
    """The documented order of layers on every operator route: without API Gateway's verified identity, 401 like
    every other route (the operator token alone opens nothing); with it, 401 until the operator token comes
    beside it, in X-Dormant-Operator-Token (Authorization holds the signature or the JWT)."""
    extra = {"DORMANT_JWT_ISSUER": ISSUER, "DORMANT_JWT_AUDIENCE": AUDIENCE} if mode == "jwt" else {}
    handler = api(mode, **extra)
    sample = samples["http-api-proxy"]
    owner = ALICE_ARN if mode == "iam" else "alice"
    operator = iam(ADMIN_ARN) if mode == "iam" else jwt("ops", scope="vault/admin")  # (status asks the hook)
    assert handler(http_event(sample, "PUT", vault(owner), authorizer=iam(ALICE_ARN) if mode == "iam"
                              else jwt("alice")))[0] in (200, 201)  # (an earlier test may have created it)
    for method, suffix in OPERATOR_ROUTES:
        target = suffix[1:] if suffix.startswith("@") else vault(owner, suffix)
        for headers in ({}, {"authorization": f"Bearer {TOKEN}"}, {"x-dormant-operator-token": TOKEN}):
            status, body = handler(http_event(sample, method, target, authorizer=None, headers=headers))
            assert (status, body["error"]["code"]) == (401, "unauthorized"), (method, target, headers)
            assert "request context" in body["error"]["message"], (method, target, body)
        status, body = handler(http_event(sample, method, target, authorizer=operator))
        assert status == 401 and "operator token" in body["error"]["message"], (method, target, body)
        status, body = handler(http_event(sample, method, target, authorizer=operator,
                                          headers={"x-dormant-operator-token": "wrong"}))
        assert status == 401, (method, target, body)
        status, body = handler(http_event(sample, method, target, authorizer=operator,
                                          headers={"x-dormant-operator-token": TOKEN}))
        assert status == 200, (method, target, status, body)
    # a REST API (payload 1.0) passes the identity its own way: the same two layers
    if mode == "iam":
        rest = samples["aws-proxy"]
        assert handler(rest_event(rest, "GET", "/actors/vault"))[0] == 401  # the sample's identity is unsigned
        signed = {"userArn": ADMIN_ARN, "caller": "AIDAEXAMPLE", "accountId": "123456789012"}
        assert handler(rest_event(rest, "GET", "/actors/vault", identity=signed))[0] == 401  # no token
