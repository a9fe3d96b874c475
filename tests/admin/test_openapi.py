"""/__admin/openapi.json: a valid OpenAPI document, complete, and true of a real server.

- it is valid OpenAPI 3.1 (schemathesis checks it against the
  specification's own schema), and its schemas are valid JSON Schema;
- every Flask rule under ``/__admin`` is documented, and every documented
  operation exists, so that neither can drift from the other;
- schemathesis sends generated requests for every operation to a real
  server (with an admin token) and checks each answer: no 5xx, a documented
  status, a documented content type, a body and headers that match the
  document, and requests that break the document refused. Bounded and
  derandomized (the same requests every run), with no example database on
  disk. Each operation's cases are a test of their own
  (``test_answers_get_journal``...), so ``-k`` picks or leaves out one.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.configuration
import jsonschema
import pytest
import requests
import schemathesis
from schemathesis import checks as st_checks

from mockskill import Server
from mockskill.admin.browsers import ADMIN_PREFIX
from mockskill.admin.scenario_routes import BODY_TYPES

# Hypothesis keeps caches (even with no example database) in ./.hypothesis: not in the
# working tree, please.
hypothesis.configuration.set_hypothesis_home_dir(
    Path(tempfile.gettempdir()) / "mockskill-hypothesis"
)

TOKEN = "openapi-test-token"
DOCUMENT: dict[str, Any] = json.loads(
    resources.files("mockskill.admin").joinpath("openapi.json").read_text(encoding="utf-8")
)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
HTTP_METHODS = ("get", "put", "post", "delete", "patch")
BASE = """
name: base
skills: [{id: first}, {id: second}]
routes: [{path: /status, steps: [{json: {ok: true}}]}]
"""


def operations() -> set[tuple[str, str]]:
    """``(METHOD, /path/{param})`` of every documented operation."""
    return {
        (method.upper(), path)
        for path, item in DOCUMENT["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def test_the_server_serves_the_document_in_the_package(bundled: Server) -> None:
    response = requests.get(f"{bundled.url}/__admin/openapi.json", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == DOCUMENT


def test_the_document_is_valid_openapi() -> None:
    assert DOCUMENT["openapi"].startswith("3.1.")
    SCHEMA.validate()  # against the OpenAPI 3.1 specification's own schema
    broken = copy.deepcopy(DOCUMENT)
    broken["paths"]["/__admin/health"]["get"]["responses"]["200"] = {"content": {}}
    with pytest.raises(ValueError, match="description"):
        schemathesis.openapi.from_dict(broken).validate()


def test_its_schemas_are_valid_json_schema() -> None:
    for schema in DOCUMENT["components"]["schemas"].values():  # OpenAPI 3.1: 2020-12
        jsonschema.Draft202012Validator.check_schema(schema)
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema({"type": "texte"})


def test_every_reference_resolves() -> None:
    for ref in set(re.findall(r'"\$ref": "#/([^"]+)"', json.dumps(DOCUMENT))):
        node: Any = DOCUMENT
        for part in ref.split("/"):
            assert part in node, f"#/{ref} does not resolve"
            node = node[part]


def test_every_admin_rule_is_documented_and_every_documented_operation_exists() -> None:
    served = set()
    for rule in Server().app.url_map.iter_rules():
        if rule.rule == ADMIN_PREFIX or rule.rule.startswith(ADMIN_PREFIX + "/"):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            served.update((m, path) for m in rule.methods or () if m not in ("HEAD", "OPTIONS"))
    assert served, "no rule under /__admin: the test looks in the wrong place"
    assert served - operations() == set(), (
        "served under /__admin, not in mockskill/admin/openapi.json"
    )
    assert operations() - served == set(), "in mockskill/admin/openapi.json, not served"


def test_the_scenario_bodies_documented_are_the_ones_taken() -> None:
    for path, method in (("/__admin/scenarios", "post"), ("/__admin/scenarios/{name}", "put")):
        content = DOCUMENT["paths"][path][method]["requestBody"]["content"]
        assert sorted(content) == sorted(BODY_TYPES)


def test_without_the_token_every_operation_answers_the_documented_401() -> None:
    with Server(BASE, admin_token=TOKEN) as server:
        for method, path in sorted(operations()):
            operation = DOCUMENT["paths"][path][method.lower()]
            if operation.get("security") == []:  # the dashboard's page: no data, no token
                continue
            assert "401" in operation["responses"], (method, path)
            response = requests.request(method, server.url + path.format(name="base"), timeout=10)
            assert response.status_code == 401, (method, path)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert response.json()["error"]["code"] == "MOCKSKILL_ADMIN_TOKEN_REQUIRED"


ROOT = Path(__file__).parents[2]

# The node-id test runs pytest's collection of this very file in this process: a child
# pytest would import schemathesis again, three times (about a minute on a busy machine).
pytest_plugins = ["pytester"]


def collected(pytester: pytest.Pytester, *args: str, whole_file: bool = True) -> list[str]:
    """Node ids pytest collects with *args* (``-k``, ``--deselect``, node ids), from this
    whole file unless *whole_file* is false; relative to the project, as a user sees them."""
    with contextlib.chdir(ROOT):  # node ids as given, relative to the project
        result = pytester.runpytest_inprocess(
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
            *([__file__] if whole_file else []),
        )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return [line for line in result.outlines if "::" in line]


def test_each_operations_cases_have_a_node_id_of_their_own(pytester: pytest.Pytester) -> None:
    ids = [i for i in collected(pytester) if "::test_answers_" in i]
    assert len(ids) == len(set(ids)) == len(operations())
    # One can be picked by name, or left out, without touching the others (both in one run:
    # -k picks two, --deselect leaves one of them out).
    journal = next(i for i in ids if i.endswith("::test_answers_get_journal"))
    picked = collected(
        pytester, "-k", "answers_get_journal or answers_get_health", "--deselect", journal
    )
    assert [i.split("::")[1] for i in picked] == ["test_answers_get_health"]
    assert collected(pytester, journal, whole_file=False) == [journal]


# -- schemathesis against a real server ------------------------------------------------------


@pytest.fixture
def server() -> Iterator[Server]:
    """A server per operation (Hypothesis runs all of one operation's requests on it).

    It has an admin token; a scenario to find (``base``, also the document's
    example) and one loaded inactive whose skill id clashes with it
    (``spare``: activating it is a 409); and a journal with a retry chain
    and an unmatched request, so that every answer has something to show.
    """
    with Server(BASE, admin_token=TOKEN) as started:
        started.add("name: spare\nskills: [{id: first}]\n", active=False)
        for forced in ("ENDPOINT_UNREACHABLE", "ENDPOINT_UNREACHABLE", None):
            headers = {"Mockskill-Error": forced} if forced else {}
            requests.post(started.invoke_url("first"), headers=headers, timeout=10)
        requests.get(f"{started.url}/nowhere", timeout=10)
        yield started


CHECKS = [
    st_checks.not_a_server_error,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_schema_conformance,
    st_checks.response_headers_conformance,
    # Requests that break the document must be refused: this one found journal filters
    # that took a misspelt endpoint kind, or a repeated parameter, and answered nothing.
    st_checks.negative_data_rejection,
]


SETTINGS = hypothesis.settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    # The server fixture is meant to last for all of one operation's requests.
    suppress_health_check=[
        hypothesis.HealthCheck.function_scoped_fixture,
        hypothesis.HealthCheck.too_slow,
        hypothesis.HealthCheck.filter_too_much,
    ],
)


def node_name(method: str, path: str) -> str:
    """``POST /__admin/scenarios/{name}/activate``: ``test_answers_post_scenarios_name_activate``"""
    words = re.findall(r"[a-z0-9]+", path.removeprefix(ADMIN_PREFIX).lower())
    return "_".join(["test_answers", method.lower(), *(words or ["page"])])


def answers_as_documented(method: str, path: str) -> Any:
    """The schemathesis test of one operation, collected under a name of its own.

    One test per operation, not one ``@SCHEMA.parametrize()`` for all: its
    cases would share one node id (schemathesis names them ``test[GET /x]``
    but pytest >= 9.2 builds node ids from the function's own name), so none
    could be run, selected or told apart in a report by its id.
    """

    @SCHEMA.include(method=method, path=path).parametrize()
    @SETTINGS
    def test(case: schemathesis.Case, server: Server) -> None:
        case.call_and_validate(
            base_url=server.url,
            headers={"Authorization": f"Bearer {TOKEN}"},
            checks=CHECKS,
            timeout=10,
        )

    test.__name__ = test.__qualname__ = node_name(method, path)
    return test


# Every answer is what the document says: one test per documented operation.
for _method, _path in sorted(operations()):
    globals()[node_name(_method, _path)] = answers_as_documented(_method, _path)
