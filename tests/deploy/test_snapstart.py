"""SnapStart is an option of both deployments: a parameter (template.yaml `SnapStart`, infra/ `snap_start`) that
turns it on for every function (the worker, the API, and jwt mode's $connect authorizer), published versions behind
the alias `live`, and every invoker (both queues' event sources, the APIs and their permissions) pointed at that
alias, as a snapshot is only taken of a published version."""

from __future__ import annotations

from typing import Any

from tests.deploy.describe import Description
from tests.deploy.support import resources_of_type


def test_the_template_publishes_versions_behind_an_alias_and_snapstart_is_a_parameter(
        sam_template: dict[str, Any], translated: dict[str, Any]) -> None:
    parameter = sam_template["Parameters"]["SnapStart"]
    assert parameter["Default"] == "None" and set(parameter["AllowedValues"]) == {"None", "PublishedVersions"}
    functions = resources_of_type(translated, "AWS::Lambda::Function")
    assert {name: f["Properties"]["SnapStart"] for name, f in functions.items()} == {
        "WorkerFunction": {"ApplyOn": {"Ref": "SnapStart"}}, "ApiFunction": {"ApplyOn": {"Ref": "SnapStart"}},
        "AuthorizerFunction": {"ApplyOn": {"Ref": "SnapStart"}}}
    aliases = resources_of_type(translated, "AWS::Lambda::Alias")
    assert {a["Properties"]["Name"] for a in aliases.values()} == {"live"}
    assert sorted(a["Properties"]["FunctionName"]["Ref"] for a in aliases.values()) == [
        "ApiFunction", "AuthorizerFunction", "WorkerFunction"]
    sources = resources_of_type(translated, "AWS::Lambda::EventSourceMapping")
    assert {s["Properties"]["FunctionName"]["Ref"] for s in sources.values()} == {"WorkerFunctionAliaslive"}
    permissions = resources_of_type(translated, "AWS::Lambda::Permission")
    assert {p["Properties"]["FunctionName"]["Ref"] for p in permissions.values()} == {
        "ApiFunctionAliaslive", "AuthorizerFunctionAliaslive"}


def test_terraform_has_the_same_option(terraform_description: Description, sam_description: Description) -> None:
    for description in (sam_description, terraform_description):
        assert {f["snap_start"] for f in description["functions"].values()} == {"{param.snap_start}"}
        assert description["parameters"]["snap_start"] == "None"
        assert {function for function, _ in description["event_sources"]} == {"{worker_alias.arn}"}
        assert {route["target"] for route in description["http"]["routes"].values()} == {"api_alias"}
