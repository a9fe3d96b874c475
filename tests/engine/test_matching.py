"""Which endpoint a request is for: the skill surface, free routes, or a miss explained."""

from __future__ import annotations

import json
import textwrap
import time

import pytest

from mockskill import load_text
from mockskill.engine.matching import MAX_NEAR_MISSES, Miss, RoutingTable, Target
from mockskill.protocol.catalog import BASE_URL

SCENARIO = """\
name: shop
skills:
  - id: translate
  - id: summarize
  - id: web-search
routes:
  - path: /orders/<int:id>
    method: [GET, DELETE]
    steps:
      - json: {order: found}
  - path: /status
    steps:
      - json: {status: up}
  - path: /skillset
    method: POST
    steps:
      - json: {ok: true}
"""


@pytest.fixture(scope="module")
def table() -> RoutingTable:
    return RoutingTable(load_text(textwrap.dedent(SCENARIO), "shop.yaml"))


def target(table: RoutingTable, method: str, path: str) -> Target:
    found = table.match(method, path)
    assert isinstance(found, Target), f"{method} {path} matched nothing: {found}"
    return found


def miss(table: RoutingTable, method: str, path: str) -> Miss:
    found = table.match(method, path)
    assert isinstance(found, Miss), f"{method} {path} matched {found}"
    return found


# -- the skill surface ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "kind", "skill"),
    [
        pytest.param("GET", "/skills", "list", None, id="list"),
        pytest.param("GET", "/skills/", "list", None, id="list-slash"),
        pytest.param("HEAD", "/skills", "list", None, id="list-head"),
        pytest.param("GET", "/skills/translate", "describe", "translate", id="describe"),
        pytest.param("GET", "/skills/translate/", "describe", "translate", id="describe-slash"),
        pytest.param("HEAD", "/skills/web-search", "describe", "web-search", id="describe-head"),
        pytest.param("POST", "/skills/summarize/invoke", "invoke", "summarize", id="invoke"),
        pytest.param("POST", "/skills/summarize/invoke/", "invoke", "summarize", id="invoke-slash"),
    ],
)
def test_the_skill_surface(
    table: RoutingTable, method: str, path: str, kind: str, skill: str | None
) -> None:
    found = target(table, method, path)
    assert found.kind == kind
    assert (found.skill.id if found.skill else None) == skill


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/skills"),
        ("HEAD", "/skills"),
        ("GET", "/skills/translate"),
        ("HEAD", "/skills/web-search"),
        ("POST", "/skills/summarize/invoke"),
    ],
)
def test_a_surface_path_as_written_and_with_trailing_slashes_match_the_one_target(
    table: RoutingTable, method: str, path: str
) -> None:
    # The path as written is found by one lookup, the others by splitting: the same target.
    found = target(table, method, path)
    assert target(table, method, path + "/") is found
    assert target(table, method, path + "//") is found


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE", "POST"])
def test_a_status_url_as_written_and_as_split_match_the_one_target(
    table: RoutingTable, method: str
) -> None:
    # As Location writes it, found by its prefix; with a trailing slash, by splitting.
    found = target(table, method, "/skills/translate/tasks/dHJ.0.abc")
    assert (found.kind, found.skill_id) == ("task", "translate")
    assert target(table, method, "/skills/translate/tasks/dHJ.0.abc/") is found
    assert target(table, "POST", "/skills/translate/tasks/dHJ.0.abc/cancel") is found
    unknown = miss(table, method, "/skills/translat/tasks/dHJ.0.abc")
    assert unknown.suggestions == ("translate",)


def test_a_status_url_prefix_needs_an_id_and_a_task_method(table: RoutingTable) -> None:
    assert isinstance(table.match("GET", "/skills/translate/tasks/"), Miss)
    assert isinstance(table.match("PUT", "/skills/translate/tasks/dHJ.0.abc"), Miss)
    assert isinstance(table.match("GET", "/skills/translate/tasks/a/b"), Miss)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/skills"),
        ("POST", "/skills/translate"),
        ("GET", "/skills/translate/invoke"),
        ("DELETE", "/skills/summarize/invoke"),
        ("GET", "/skills/Translate"),
    ],
)
def test_a_surface_path_with_the_wrong_method_or_id_misses_as_written_too(
    table: RoutingTable, method: str, path: str
) -> None:
    found, slashed = miss(table, method, path), miss(table, method, path + "/")
    assert (found.skill_id, found.suggestions) == (slashed.skill_id, slashed.suggestions)


def test_a_target_names_its_skill_and_scenario_as_a_miss_names_its_skill(
    table: RoutingTable,
) -> None:
    described, invoked = (
        target(table, "GET", "/skills/translate"),
        target(table, "POST", "/skills/translate/invoke"),
    )
    assert (described.skill_id, invoked.skill_id) == ("translate", "translate")
    assert (described.scenario, invoked.scenario) == ("shop", "shop")
    listed, routed = target(table, "GET", "/skills"), target(table, "GET", "/status")
    assert (listed.skill_id, listed.scenario) == (None, None)
    assert (routed.skill_id, routed.scenario) == (None, "shop")
    assert miss(table, "GET", "/skills/translat").skill_id == "translat"


def test_describe_plays_the_skills_describe_sequence(table: RoutingTable) -> None:
    found = target(table, "GET", "/skills/translate")
    assert found.skill is not None
    assert found.sequence is found.skill.describe
    assert found.scenario == "shop"
    assert found.context.skill_id == "translate"
    assert found.context.url == f"{BASE_URL}/skills/translate"


def test_invoke_plays_the_skills_invoke_sequence(table: RoutingTable) -> None:
    found = target(table, "POST", "/skills/translate/invoke")
    assert found.skill is not None
    assert found.sequence is found.skill.invoke
    assert found.context.url == f"{BASE_URL}/skills/translate/invoke"


def test_every_endpoint_has_its_own_sequence_key(table: RoutingTable) -> None:
    requests = [("GET", "/skills")]
    for sid in ("translate", "summarize", "web-search"):
        requests += [("GET", f"/skills/{sid}"), ("POST", f"/skills/{sid}/invoke")]
    requests += [("GET", "/orders/1"), ("GET", "/status"), ("POST", "/skillset")]
    keys = [target(table, m, p).key for m, p in requests]
    assert len(set(keys)) == len(keys)


def test_the_same_endpoint_keeps_its_key(table: RoutingTable) -> None:
    assert target(table, "GET", "/orders/1").key == target(table, "DELETE", "/orders/2/").key
    assert target(table, "GET", "/skills/translate").key == (
        target(table, "HEAD", "/skills/translate/").key
    )


def test_the_listing_names_every_skill_with_its_urls(table: RoutingTable) -> None:
    listing = json.loads(table.listing.body)
    assert [s["id"] for s in listing["skills"]] == ["translate", "summarize", "web-search"]
    first = listing["skills"][0]
    assert first["descriptor_url"] == f"{BASE_URL}/skills/translate"
    assert first["invoke_url"] == f"{BASE_URL}/skills/translate/invoke"
    assert table.listing.templated


# -- unknown skills -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "skill_id", "suggestion"),
    [
        pytest.param("GET", "/skills/translat", "translat", "translate", id="describe"),
        pytest.param("HEAD", "/skills/summarise", "summarise", "summarize", id="describe-head"),
        pytest.param("POST", "/skills/web_search/invoke", "web_search", "web-search", id="invoke"),
    ],
)
def test_an_unknown_skill_id_is_a_miss_with_suggestions(
    table: RoutingTable, method: str, path: str, skill_id: str, suggestion: str
) -> None:
    found = miss(table, method, path)
    assert found.skill_id == skill_id
    assert found.suggestions[0] == suggestion
    assert found.method == method
    assert found.path == path


def test_an_unknown_skill_id_like_nothing_gets_no_suggestions(table: RoutingTable) -> None:
    found = miss(table, "GET", "/skills/zzzzzz")
    assert found.skill_id == "zzzzzz"
    assert found.suggestions == ()


# -- free routes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        pytest.param("GET", "/orders/42", "/orders/<int:id>", id="int-converter"),
        pytest.param("DELETE", "/orders/42", "/orders/<int:id>", id="second-method"),
        pytest.param("GET", "/orders/42/", "/orders/<int:id>", id="trailing-slash"),
        pytest.param("HEAD", "/orders/42", "/orders/<int:id>", id="head-as-get"),
        pytest.param("GET", "/status", "/status", id="default-method-get"),
        pytest.param("POST", "/skillset", "/skillset", id="not-the-skill-surface"),
    ],
)
def test_free_routes_match_rule_and_methods(
    table: RoutingTable, method: str, path: str, route: str
) -> None:
    found = target(table, method, path)
    assert found.kind == "route"
    assert found.route is not None
    assert found.route.path == route
    assert found.sequence is found.route.sequence


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/orders/abc", id="converter-refuses"),
        pytest.param("GET", "/orders", id="missing-part"),
        pytest.param("POST", "/orders/42", id="method-not-listed"),
        pytest.param("POST", "/status", id="get-only"),
        pytest.param("GET", "/skillset", id="post-only"),
        pytest.param("GET", "/nothing/here", id="unknown-path"),
    ],
)
def test_free_routes_miss(table: RoutingTable, method: str, path: str) -> None:
    found = miss(table, method, path)
    assert found.skill_id is None
    assert found.near_misses


def test_a_table_without_routes_misses_everything_outside_the_surface() -> None:
    table = RoutingTable(load_text("name: bare\nskills:\n  - id: only\n", "bare.yaml"))
    assert isinstance(table.match("GET", "/status"), Miss)
    assert target(table, "GET", "/skills/only").kind == "describe"


# -- wrong methods on the skill surface ---------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "route", "reason"),
    [
        pytest.param(
            "GET",
            "/skills/translate/invoke",
            "POST /skills/<id>/invoke",
            "method GET is not POST",
            id="get-invoke",
        ),
        pytest.param(
            "HEAD",
            "/skills/translate/invoke",
            "POST /skills/<id>/invoke",
            "method HEAD is not POST",
            id="head-invoke",
        ),
        pytest.param(
            "DELETE",
            "/skills/translate",
            "GET /skills/<id>",
            "method DELETE is not GET",
            id="delete-descriptor",
        ),
        pytest.param("POST", "/skills", "GET /skills", "method POST is not GET", id="post-list"),
    ],
)
def test_a_wrong_method_on_a_skill_path_names_the_method(
    table: RoutingTable, method: str, path: str, route: str, reason: str
) -> None:
    found = miss(table, method, path)
    assert found.skill_id is None
    assert found.near_misses[0] == {"route": route, "reasons": [reason]}


# -- near misses -------------------------------------------------------------------------------


def test_a_wrong_method_on_a_free_route_names_the_allowed_methods(table: RoutingTable) -> None:
    found = miss(table, "POST", "/orders/42")
    assert found.near_misses[0] == {
        "route": "GET|DELETE /orders/<int:id>",
        "reasons": ["method POST is not GET or DELETE"],
    }


def test_a_path_the_converter_refuses_names_the_rule(table: RoutingTable) -> None:
    found = miss(table, "GET", "/orders/abc")
    assert found.near_misses[0] == {
        "route": "GET|DELETE /orders/<int:id>",
        "reasons": ["path /orders/abc does not match /orders/<int:id>"],
    }


def test_a_miss_on_both_counts_gives_both_reasons(table: RoutingTable) -> None:
    found = miss(table, "PUT", "/skills/translate/invoke")
    by_route = {m["route"]: m["reasons"] for m in found.near_misses}
    assert by_route["POST /skills/<id>/invoke"] == ["method PUT is not POST"]
    assert by_route["GET /skills/<id>"] == [
        "path /skills/translate/invoke does not match /skills/<id>",
        "method PUT is not GET",
    ]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/nothing/here", id="unknown-path"),
        pytest.param("PUT", "/skills/translate/invoke", id="wrong-method"),
        pytest.param("PATCH", "/orders/x", id="both"),
    ],
)
def test_near_misses_are_at_most_three_closest_first(
    table: RoutingTable, method: str, path: str
) -> None:
    found = miss(table, method, path).near_misses
    assert 1 <= len(found) <= MAX_NEAR_MISSES == 3
    counts = [len(m["reasons"]) for m in found]
    assert counts == sorted(counts)


def test_closer_paths_come_first_among_equal_reasons(table: RoutingTable) -> None:
    found = miss(table, "GET", "/statuses").near_misses
    assert found[0] == {
        "route": "GET /status",
        "reasons": ["path /statuses does not match /status"],
    }


def test_a_right_path_with_a_wrong_method_comes_before_a_wrong_path(table: RoutingTable) -> None:
    # Both miss on one count; the path that fits is the likelier intent.
    found = miss(table, "POST", "/skills/translate").near_misses
    assert found[0] == {"route": "GET /skills/<id>", "reasons": ["method POST is not GET"]}
    assert all(m["reasons"][0].startswith("path") for m in found[1:])


def test_near_misses_leave_out_rules_that_match_both_path_and_method(
    table: RoutingTable,
) -> None:
    # GET /skills/nope fits the descriptor rule; only the id is wrong, which
    # the miss's skill_id and suggestions say instead.
    routes = [m["route"] for m in table.near_misses("GET", "/skills/nope")]
    assert "GET /skills/<id>" not in routes
    assert all(m["reasons"] for m in table.near_misses("GET", "/skills/nope"))


def test_near_misses_can_be_asked_for_directly(table: RoutingTable) -> None:
    direct = table.near_misses("POST", "/status")
    assert direct == miss(table, "POST", "/status").near_misses
    assert direct[0] == {"route": "GET /status", "reasons": ["method POST is not GET"]}


MANY_ROUTES = (
    "name: many\nroutes:\n"
    + "".join(
        f"  - path: /api/v1/resource{k}/<int:id>\n    method: [GET, PUT]\n"
        "    steps: [{json: {}}]\n"
        for k in range(300)
    )
    + "  - path: /api/v1/orders/<int:id>\n    method: POST\n    steps: [{json: {}}]\n"
)


def test_among_many_routes_a_miss_names_the_route_it_is_off_from() -> None:
    table = RoutingTable(load_text(MANY_ROUTES, "many.yaml"))
    first, *others = table.near_misses("GET", "/api/v1/resourc150/7")
    assert first == {
        "route": "GET|PUT /api/v1/resource150/<int:id>",
        "reasons": ["path /api/v1/resourc150/7 does not match /api/v1/resource150/<int:id>"],
    }
    assert len(others) == MAX_NEAR_MISSES - 1
    assert table.near_misses("GET", "/api/v1/orders/3")[0] == {
        "route": "POST /api/v1/orders/<int:id>",
        "reasons": ["method GET is not POST"],
    }
    # a method no route takes: the route whose path matches, then the closest paths
    [right_path, *wrong] = table.near_misses("PATCH", "/api/v1/resource7/1")
    assert right_path["route"] == "GET|PUT /api/v1/resource7/<int:id>"
    assert right_path["reasons"] == ["method PATCH is not GET or PUT"]
    assert all(len(miss["reasons"]) == 2 for miss in wrong)


def test_a_miss_among_300_routes_costs_not_much_more_than_a_match() -> None:
    """A miss measures its path against the routes nearest it, not against every one (a
    quadratic comparison each, and a walk of a router per route: 1 500 x a match)."""
    table = RoutingTable(load_text(MANY_ROUTES, "many.yaml"))
    table.match("GET", "/")  # (the near-miss index is built on the first miss)

    def best_of_five(method: str, path: str, count: int) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(count):
                table.match(method, path)
            runs.append((time.perf_counter() - started) / count)
        return min(runs)

    matched = best_of_five("GET", "/api/v1/resource150/7", 400)
    missed = best_of_five("GET", "/api/v1/resourc150/7", 20)
    assert missed < 150 * matched, f"a miss costs {missed / matched:.0f} matches"


STATES = """\
name: orders
routes:
  - path: /orders
    method: POST
    steps: [{json: placed, set_state: placed}]
  - path: /orders/1
    cases:
      - state: placed
        json: found
      - when: {headers: {x-peek: "yes"}}
        json: peeked
"""


def test_a_case_requiring_a_state_takes_only_a_session_in_it() -> None:
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    from mockskill.engine.incoming import Incoming

    states = RoutingTable(load_text(STATES, "orders.yaml"))
    endpoint = target(states, "GET", "/orders/1")
    assert endpoint.by_state is not None
    plain = Incoming.of(Request(EnvironBuilder(path="/orders/1").get_environ()))
    peek = Incoming.of(
        Request(EnvironBuilder(path="/orders/1", headers={"X-Peek": "yes"}).get_environ())
    )
    placed = states.case_in(endpoint, plain, "placed")
    assert isinstance(placed, Target)
    assert placed.case is not None
    assert placed.case.index == 0
    peeked = states.case_in(endpoint, peek, "Started")  # a case requiring none: any state
    assert isinstance(peeked, Target)
    assert peeked.case is not None
    assert peeked.case.index == 1
    missed = states.case_in(endpoint, plain, "Started")
    assert isinstance(missed, Miss)
    assert missed.near_misses[0]["reasons"] == ["the session's state is 'Started', not 'placed'"]
    assert target(states, "POST", "/orders").by_state is None  # no case requires one
