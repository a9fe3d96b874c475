"""A step kind, a transport fault and a delay shape are declared once (scenario/kinds.py).

The loader, the JSON Schema, the two fault players and the docs' tables all
follow the declaration; each test here fails when one of them names another
list, and the ``caught`` tests prove that a planted disagreement is seen.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mockskill import ScenarioError, load_text
from mockskill.audit import handshakes
from mockskill.scenario import delays, kinds, steps
from mockskill.scenario.model import FAULTS, TLS_FAULTS
from mockskill.scenario.problems import Problem
from mockskill.scenario.schema import disagreements, scenario_schema
from mockskill.transport import faults as transport_faults
from mockskill.transport import tls_faults
from mockskill.wsgi import socket_faults as wsgi_faults

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _invoke(step: str) -> str:
    return f"skills:\n  - id: s\n    invoke: {step}\n"


def _problems(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as raised:
        load_text(text, "s.yaml")
    return list(raised.value.problems)


# -- the loader ----------------------------------------------------------------------


@pytest.mark.parametrize("name", kinds.FAULT_NAMES)
def test_the_loader_takes_each_declared_fault(name: str) -> None:
    [skill] = load_text(_invoke(f"{{fault: {name}}}"), "s.yaml").skills
    assert skill.invoke is not None
    assert skill.invoke.steps[0].fault == name


def test_the_loader_refuses_an_undeclared_fault_listing_the_declared_ones() -> None:
    [problem] = _problems(_invoke("{fault: SLOW_BODY}"))
    assert (problem.path, problem.line, problem.column) == ("skills[0].invoke.fault", 3, 21)
    assert problem.expected == "one of " + ", ".join(kinds.FAULT_NAMES)
    assert FAULTS == kinds.FAULT_NAMES


def test_a_step_draws_from_the_generator_for_the_declared_random_faults() -> None:
    for name in kinds.FAULT_NAMES:
        [skill] = load_text(_invoke(f"{{fault: {name}}}"), "s.yaml").skills
        assert skill.invoke is not None
        assert skill.invoke.steps[0].random is (name in kinds.RANDOM_FAULTS)
    assert sorted(kinds.RANDOM_FAULTS) == ["RANDOM_DATA_THEN_CLOSE"]


def test_the_loader_reads_exactly_the_declared_delay_shapes() -> None:
    assert tuple(delays.SHAPES) == kinds.SHAPE_NAMES
    [problem] = _problems(_invoke("{json: 1, delay: {normal: 5}}"))
    assert problem.expected == (
        "one delay shape: {fixed: MS}, {uniform: [MIN, MAX]} or"
        " {lognormal: {median: MS, sigma: S, cap: MS}}"
    )
    assert delays.LOGNORMAL_KEYS == ("median", "sigma", "cap")
    assert delays.LOGNORMAL_REQUIRED == ("median", "sigma")


def test_the_loader_reads_the_declared_step_kinds() -> None:
    assert {kind.name for kind in kinds.STEP_KINDS} <= set(steps.STEP_KEYS)
    [nothing] = _problems(_invoke("{delay: 5}"))
    assert nothing.expected == (
        "a step with error, json, text, body_base64, body_file, descriptor, rate_limited, task,"
        " stream, status, fault or hang"
    )
    [two] = _problems(_invoke("{json: 1, text: a}"))
    assert two.expected == (
        "one of error, json, text, body_base64, body_file, descriptor, rate_limited, task or stream"
        " in a step"
    )


def test_listed_names_read_as_a_sentence() -> None:
    assert kinds.listed(["a"]) == "a"
    assert kinds.listed(["a", "b", "c"]) == "a, b or c"
    assert kinds.listed(["a", "b"], "and") == "a and b"


def test_the_loader_refuses_an_undeclared_tls_fault_listing_the_declared_ones() -> None:
    [problem] = _problems("skills:\n  - {id: s, tls: revoked}\n")
    assert problem.path == "skills[0].tls"
    assert problem.expected == "a TLS fault: " + ", ".join(kinds.TLS_FAULT_NAMES)
    assert TLS_FAULTS == kinds.TLS_FAULT_NAMES


def test_the_tls_players_and_the_audit_read_the_declared_kinds_of_tls_fault() -> None:
    assert tls_faults.RAW_FAULTS == ("handshake_reset", "handshake_hang", "plain_http")
    assert {"handshake_reset", "handshake_hang"} == handshakes.TRANSIENT
    assert set(kinds.TLS_FAULT_NAMES) == handshakes.PERMANENT | handshakes.TRANSIENT


# -- the JSON Schema -----------------------------------------------------------------


def test_the_schema_lists_what_is_declared() -> None:
    assert disagreements(scenario_schema()) == []


def _without_a_fault(schema: dict[str, Any]) -> None:
    schema["$defs"]["step"]["properties"]["fault"]["enum"].remove("TRUNCATED_BODY")


def _with_another_tls_fault(schema: dict[str, Any]) -> None:
    schema["$defs"]["skill"]["properties"]["tls"]["enum"].insert(0, "revoked")


def _with_a_shape_unnamed(schema: dict[str, Any]) -> None:
    delay = schema["$defs"]["step"]["properties"]["delay"]
    delay["description"] = delay["description"].replace("{uniform: [MIN, MAX]}", "{uniform: MS}")


def _with_another_shape(schema: dict[str, Any]) -> None:
    schema["$defs"]["delay"]["oneOf"].append({"$ref": "#/$defs/delay_normal"})


def _with_a_renamed_param(schema: dict[str, Any]) -> None:
    params = schema["$defs"]["lognormal"]["properties"]
    params["mean"] = params.pop("median")


def _with_a_body_kind_missing(schema: dict[str, Any]) -> None:
    schema["$defs"]["step_rules"]["allOf"][1]["not"]["anyOf"].pop()


def _without_a_step_kind(schema: dict[str, Any]) -> None:
    schema["$defs"]["step_rules"]["allOf"][0]["anyOf"].pop(0)


def _without_a_stream_fault(schema: dict[str, Any]) -> None:
    schema["$defs"]["stream_fault"]["properties"]["kind"]["enum"].remove("stall")


def _with_another_stream_format(schema: dict[str, Any]) -> None:
    schema["$defs"]["stream"]["properties"]["format"]["anyOf"][0]["enum"].append("jsonl")


PLANTED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a fault left out": (_without_a_fault, "$defs.step.properties.fault.enum"),
    "an undeclared TLS fault": (_with_another_tls_fault, "$defs.skill.properties.tls.enum"),
    "a shape's description": (_with_a_shape_unnamed, "$defs.step.properties.delay.description"),
    "an undeclared shape": (_with_another_shape, "$defs.delay.oneOf"),
    "a shape's parameter renamed": (_with_a_renamed_param, "$defs.lognormal.properties"),
    "two bodies allowed together": (_with_a_body_kind_missing, "$defs.step_rules.allOf[1]"),
    "a step kind left out": (_without_a_step_kind, "$defs.step_rules.allOf[0]"),
    "a stream fault left out": (_without_a_stream_fault, "$defs.stream_fault.properties.kind"),
    "another stream format": (_with_another_stream_format, "$defs.stream.properties.format"),
}


@pytest.mark.parametrize(("plant", "where"), PLANTED.values(), ids=PLANTED.keys())
def test_a_schema_that_disagrees_is_caught(
    plant: Callable[[dict[str, Any]], None], where: str
) -> None:
    schema = copy.deepcopy(scenario_schema())
    plant(schema)
    [found] = disagreements(schema)
    assert found.startswith(where)


# -- the players ---------------------------------------------------------------------


@pytest.mark.parametrize("player", [transport_faults, wsgi_faults], ids=["transport", "wsgi"])
def test_every_declared_fault_has_a_player_and_no_other_has_one(player: Any) -> None:
    assert tuple(player.FAULTS) == kinds.FAULT_NAMES
    for name, play in player.FAULTS.items():
        assert play.__name__ == name.lower()


def slow_body() -> None:
    """A player for a fault that is not declared."""


def test_a_player_for_an_undeclared_fault_is_refused() -> None:
    played = [getattr(transport_faults, name.lower()) for name in kinds.FAULT_NAMES]
    with pytest.raises(
        ValueError, match=r"functions \['slow_body'\] do no declared name; nothing does \[\]"
    ):
        kinds.players(*played, slow_body)
    with pytest.raises(ValueError, match=r"nothing does \['EMPTY_RESPONSE'\]"):
        kinds.players(*(p for p in played if p.__name__ != "empty_response"))
    assert list(kinds.players(*played)) == list(kinds.FAULT_NAMES)
    assert kinds.players(*played)["EMPTY_RESPONSE"] is transport_faults.empty_response


# -- the docs ------------------------------------------------------------------------


TABLES = {
    "step kinds": (kinds.step_table, "scenarios.md"),
    "faults": (kinds.fault_table, "scenarios.md"),
    "shapes": (kinds.shape_table, "scenarios.md"),
    "TLS faults": (kinds.tls_table, "tls.md"),
}


@pytest.mark.parametrize(("table", "page"), TABLES.values(), ids=TABLES.keys())
def test_the_docs_tables_are_the_declared_ones(table: Callable[[], str], page: str) -> None:
    assert table() in (DOCS / page).read_text(encoding="utf-8")


def fault_tables(page: str) -> list[list[str]]:
    """The names in the first column of each table of *page* headed ``| fault |``."""
    tables: list[list[str]] = []
    inside = False
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("| fault |"):
            tables.append([])
            inside = True
        elif inside and line.startswith("| `"):
            tables[-1].append(line.split("`")[1])
        elif not line.startswith("|---"):
            inside = False
    return tables


@pytest.mark.parametrize(
    ("page", "names"),
    [
        ("scenarios.md", kinds.FAULT_NAMES),
        ("faults.md", kinds.FAULT_NAMES),
        ("tls.md", kinds.TLS_FAULT_NAMES),
    ],
)
def test_every_table_of_faults_in_the_docs_lists_the_declared_ones(
    page: str, names: tuple[str, ...]
) -> None:
    tables = fault_tables(page)
    assert tables
    assert all(rows == list(names) for rows in tables), tables


def test_a_docs_table_that_disagrees_is_caught() -> None:
    docs = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    reworded = dataclasses.replace(kinds.FAULTS[0], summary="a reset")
    assert kinds.fault_table((reworded, *kinds.FAULTS[1:])) not in docs
    assert kinds.fault_table(kinds.FAULTS[1:]) not in docs
    another = kinds.DelayShape("normal", "a bell curve", "{normal: {mean: MS}}")
    assert kinds.shape_table((*kinds.SHAPES, another)) not in docs
    assert kinds.step_table(kinds.STEP_KINDS[::-1]) not in docs
