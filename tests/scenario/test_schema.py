"""The published scenario JSON Schema agrees with the loader.

The schema (``mockskill/scenario.schema.json``) is for editors; the loader is
the authority. These tests keep them in step: every bundled and documented
scenario passes both, the schema knows exactly the loader's keys and
constants, and a list of broken scenarios is refused by both.

Documentation: every fenced block whose info string is ``yaml`` in README.md
and docs/*.md must be a complete scenario file. Fence other YAML with another
info string (``text``, ``console`` ...).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

import mockskill
from mockskill.protocol import catalog
from mockskill.scenario import (
    cases,
    delays,
    durations,
    loader,
    rate_limits,
    steps,
    streams,
    task_callbacks,
    tasks,
)
from mockskill.scenario.model import (
    CALLBACK_FAULTS,
    CASE_END_RULES,
    END_RULES,
    FAULTS,
    RATE_ANSWERS,
    RATE_HEADER_FORMS,
    RETRY_AFTER_FORMS,
    TASK_STATUSES,
    TASK_STEP_KINDS,
    TERMINAL_STATUSES,
)
from mockskill.scenario.problems import format_path
from mockskill.scenario.schema import SCHEMA_PATH, scenario_schema
from mockskill.scenario.source import read_text

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = scenario_schema()
VALIDATOR = Draft202012Validator(SCHEMA)  # no format_checker: formats are not asserted


def documents(text: str, name: str = "<test>") -> list[Any]:
    """Every YAML document in *text*, as the loader reads it (plain data)."""
    docs, problems = read_text(text, name)
    assert not problems, [str(p) for p in problems]
    return [doc.data for doc in docs]


def schema_errors(text: str) -> list[str]:
    """What the schema finds wrong in each document of *text* (empty when valid)."""
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message}"
        for data in documents(text)
        for error in VALIDATOR.iter_errors(data)
    ]


# -- the schema itself ---------------------------------------------------------


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"].endswith("scenario.schema.json")
    assert SCHEMA["title"]
    assert SCHEMA["description"]


def test_schema_ships_inside_the_package() -> None:
    assert SCHEMA_PATH.parent == Path(mockskill.__file__).resolve().parent
    assert SCHEMA_PATH.name == "scenario.schema.json"


def test_scenario_schema_returns_a_fresh_copy() -> None:
    first = scenario_schema()
    first["title"] = "changed"
    assert scenario_schema()["title"] != "changed"


# -- keys and constants match the loader --------------------------------------

# Keys the loader checks inline, without a constant (wire.dribble, steps._weighted: an
# outcome is a step less what may not nest, plus its weight).
DRIBBLE_KEYS = ("chunks", "over")
NOT_IN_OUTCOME = ("one_of", "failure_rate", "failure", "times")
OUTCOME_KEYS = (*(k for k in steps.STEP_KEYS if k not in NOT_IN_OUTCOME), "weight")

OBJECTS = {
    "scenario": (SCHEMA, loader.SCENARIO_KEYS),
    "outage": (SCHEMA["$defs"]["outage"], loader.OUTAGE_KEYS),
    "skill": (SCHEMA["$defs"]["skill"], loader.SKILL_KEYS),
    "route": (SCHEMA["$defs"]["route"], loader.ROUTE_KEYS),
    "cases": (SCHEMA["$defs"]["cases_endpoint"], cases.CASES_KEYS),
    "when": (SCHEMA["$defs"]["when"], cases.WHEN_KEYS),
    "tests": (SCHEMA["$defs"]["tests"]["anyOf"][0], cases.OPERATORS),
    "step": (SCHEMA["$defs"]["step"], steps.STEP_KEYS),
    "outcome": (SCHEMA["$defs"]["outcome"], OUTCOME_KEYS),
    "sequence": (SCHEMA["$defs"]["sequence"], steps.SEQUENCE_KEYS),
    "retry": (SCHEMA["$defs"]["retry"], steps.RETRY_KEYS),
    "dribble": (SCHEMA["$defs"]["dribble"], DRIBBLE_KEYS),
    "keep_alive": (SCHEMA["$defs"]["keep_alive"], steps.KEEP_ALIVE_KEYS),
    "lognormal": (SCHEMA["$defs"]["lognormal"], delays.LOGNORMAL_KEYS),
    "rate_limit": (SCHEMA["$defs"]["rate_limit"], rate_limits.RATE_LIMIT_KEYS),
    "rate_limited": (SCHEMA["$defs"]["rate_limited"], rate_limits.RATE_LIMITED_KEYS),
    "task": (SCHEMA["$defs"]["task"], tasks.TASK_KEYS),
    "task phase": (SCHEMA["$defs"]["task_phase"], tasks.PHASE_KEYS),
    "task cancel": (SCHEMA["$defs"]["task_cancel"], tasks.CANCEL_KEYS),
    "task callback": (SCHEMA["$defs"]["task_callback"], task_callbacks.CALLBACK_KEYS),
    "stream": (SCHEMA["$defs"]["stream"], streams.STREAM_KEYS),
    "stream event": (SCHEMA["$defs"]["stream_event"], streams.EVENT_KEYS),
    "stream repeat": (SCHEMA["$defs"]["stream_repeat"], streams.REPEAT_KEYS),
    "stream end": (SCHEMA["$defs"]["stream_end"], streams.END_KEYS),
    "stream fault": (SCHEMA["$defs"]["stream_fault"], streams.FAULT_KEYS),
    **{f"delay {shape}": (SCHEMA["$defs"][f"delay_{shape}"], (shape,)) for shape in delays.SHAPES},
}


@pytest.mark.parametrize(("schema", "keys"), OBJECTS.values(), ids=OBJECTS.keys())
def test_schema_keys_equal_loader_keys(schema: dict[str, Any], keys: tuple[str, ...]) -> None:
    assert set(schema["properties"]) == set(keys)
    assert schema["additionalProperties"] is False


def _resolve(ref: str) -> dict[str, Any]:
    """The part of the schema that a local ``$ref`` (a JSON pointer) names; {} for none."""
    node: Any = SCHEMA
    for part in ref.removeprefix("#").split("/")[1:] if ref.startswith("#/") else []:
        node = node.get(part.replace("~1", "/").replace("~0", "~"), {})
    return node if isinstance(node, dict) else {}


def _description(schema: dict[str, Any]) -> str:
    """A property's tooltip: its own description, or that of what it refers to."""
    if schema.get("description"):
        return str(schema["description"])
    return _description(_resolve(schema["$ref"])) if "$ref" in schema else ""


def test_every_local_reference_resolves() -> None:
    refs = re.findall(r'"\$ref": "([^"]+)"', SCHEMA_PATH.read_text(encoding="utf-8"))
    assert refs
    assert [ref for ref in refs if not _resolve(ref)] == []


@pytest.mark.parametrize("schema", [schema for schema, _ in OBJECTS.values()], ids=OBJECTS.keys())
def test_every_key_has_a_description(schema: dict[str, Any]) -> None:
    undescribed = [k for k, sub in schema["properties"].items() if len(_description(sub)) < 10]
    assert undescribed == []


def test_every_definition_has_a_description() -> None:
    assert [name for name, sub in SCHEMA["$defs"].items() if not sub.get("description")] == []


def test_error_codes_are_the_served_codes() -> None:
    assert SCHEMA["$defs"]["step"]["properties"]["error"]["enum"] == list(catalog.SERVED_CODES)
    assert "VALIDATION_ERROR" not in catalog.SERVED_CODES


def test_end_rules_and_limits_match_the_loader() -> None:
    defs = SCHEMA["$defs"]
    assert defs["end"]["enum"] == list(END_RULES)
    assert defs["case_end"]["enum"] == list(CASE_END_RULES)
    lower = [method.lower() for method in loader.HTTP_METHODS]
    assert defs["method"]["anyOf"][0]["enum"] == [*loader.HTTP_METHODS, *lower]


def test_wait_limits_are_the_default_max_delay() -> None:
    defs = SCHEMA["$defs"]
    waits = {
        "delay": defs["delay"]["oneOf"][0],
        "fixed": defs["delay_fixed"]["properties"]["fixed"],
        "uniform": defs["delay_uniform"]["properties"]["uniform"]["items"],
        "median": defs["lognormal"]["properties"]["median"],
        "cap": defs["lognormal"]["properties"]["cap"],
        "hang": defs["step"]["properties"]["hang"]["anyOf"][1],
        "dribble over": defs["dribble"]["properties"]["over"],
        "timeout_ms": defs["skill"]["properties"]["timeout_ms"],
        "suggested_delay_ms": defs["retry"]["properties"]["suggested_delay_ms"],
    }
    assert {name: w["maximum"] for name, w in waits.items()} == dict.fromkeys(
        waits, steps.MAX_DELAY_MS
    )
    for name in ("delay", "execution"):
        assert defs["step"]["properties"][name]["$ref"] == "#/$defs/delay"
    shapes = [_resolve(s["$ref"]) for s in defs["delay"]["oneOf"][1:]]
    assert [s["required"] for s in shapes] == [[shape] for shape in delays.SHAPES]


def test_rate_limit_forms_and_bounds_match_the_loader() -> None:
    defs = SCHEMA["$defs"]
    for name in ("rate_limit", "rate_limited"):
        props = defs[name]["properties"]
        assert props["status"]["enum"] == list(RATE_ANSWERS)
        assert props["retry_after"]["enum"] == list(RETRY_AFTER_FORMS)
        assert props["headers"]["enum"] == list(RATE_HEADER_FORMS)
    bucket, scripted = defs["rate_limit"]["properties"], defs["rate_limited"]["properties"]
    assert bucket["refill"]["minimum"] == 1000 / steps.MAX_DELAY_MS
    assert scripted["retry_after_ms"]["maximum"] == steps.MAX_DELAY_MS
    for bound in (bucket["capacity"], bucket["refill"], scripted["limit"]):
        assert bound["maximum"] == rate_limits.MAX_TOKENS
    assert defs["rate_key"]["anyOf"][0]["enum"] == ["session", "credential", "client"]
    named = [list(form["properties"]) for form in defs["rate_key"]["anyOf"][1:]]
    assert named == [[kind] for kind in rate_limits.NAMED_KEYS]


def test_task_statuses_kinds_and_bounds_match_the_loader() -> None:
    defs = SCHEMA["$defs"]
    assert defs["task_phase"]["properties"]["status"]["enum"] == list(TASK_STATUSES)
    live = [status for status in TASK_STATUSES if status not in TERMINAL_STATUSES]
    assert defs["task_cancel"]["properties"]["allowed"]["items"]["enum"] == live
    assert defs["step"]["properties"]["task"]["enum"] == list(TASK_STEP_KINDS)
    assert defs["task_phase"]["properties"]["polls"]["maximum"] == tasks.MAX_POLLS
    callback = defs["task_callback"]["properties"]
    assert callback["on"]["items"]["enum"] == list(task_callbacks.PUSHED_STATUSES)
    assert callback["fault"]["anyOf"][0]["enum"] == list(CALLBACK_FAULTS)
    assert callback["fault"]["anyOf"][1]["items"]["enum"] == list(CALLBACK_FAULTS)
    assert callback["attempts"]["maximum"] == task_callbacks.MAX_ATTEMPTS
    sources = [list(form["properties"]) for form in defs["task_callback_url"]["oneOf"]]
    assert sources == [[source] for source in task_callbacks.URL_SOURCES]
    units = re.search(r"\(([a-z|]+)\)\$$", defs["duration"]["pattern"])
    assert units is not None
    assert sorted(units.group(1).split("|")) == sorted(durations.UNITS)


def test_faults_and_timeout_statuses_match_the_loader() -> None:
    defs = SCHEMA["$defs"]
    assert defs["step"]["properties"]["fault"]["enum"] == list(FAULTS)
    timeout_statuses = defs["skill"]["properties"]["timeout_status"]["enum"]
    assert timeout_statuses == list(catalog.CATEGORIES["EXECUTION_TIMEOUT"].statuses)


# -- scenario text builders ---------------------------------------------------


def _invoke(step: str) -> str:
    """A scenario whose one skill's invoke endpoint is *step* (YAML flow or block text)."""
    return f"skills:\n  - id: s\n    invoke: {step}\n"


def _task(task: str, extra: str = "") -> str:
    """A scenario whose one skill has ``task:`` *task* (flow YAML) and the keys *extra*."""
    more = f", {extra}" if extra else ""
    return f"skills:\n  - {{id: s, task: {task}{more}}}\n"


def _route(extra: str) -> str:
    """A scenario with one route at /a whose remaining keys are *extra* (flow mapping body)."""
    return f"routes:\n  - {{path: /a, {extra}}}\n"


# -- per-code statuses and retry: schema and loader decide alike ---------------

STATUSES = sorted({s for c in catalog.CATEGORIES.values() for s in c.statuses} | {200, 400, 500})


def _error_scenario(code: str, extra: str) -> str:
    return f"skills:\n  - id: s\n    invoke: {{error: {code}, {extra}}}\n"


def _loads(text: str) -> bool:
    try:
        mockskill.load_text(text, "test.yaml")
    except mockskill.ScenarioError:
        return False
    return True


@pytest.mark.parametrize("code", catalog.SERVED_CODES)
def test_statuses_per_code_agree(code: str) -> None:
    for status in STATUSES:
        text = _error_scenario(code, f"status: {status}")
        allowed = status in catalog.CATEGORIES[code].statuses
        assert (not schema_errors(text)) is allowed, (code, status)
        assert _loads(text) is allowed, (code, status)


@pytest.mark.parametrize("code", catalog.SERVED_CODES)
def test_retry_advice_per_code_agrees(code: str) -> None:
    advice = _error_scenario(code, "retry: {suggested_delay_ms: 100, max_attempts: 2}")
    retryable = catalog.CATEGORIES[code].retryable
    assert (not schema_errors(advice)) is retryable
    assert _loads(advice) is retryable
    no_advice = _error_scenario(code, "retry: null")
    assert schema_errors(no_advice) == []
    assert _loads(no_advice)


# id: (accepted?, scenario text); the schema and the loader must both say so
BOUNDARIES: dict[str, tuple[bool, str]] = {
    **{
        f"skill id {name!r}": (ok, f"skills:\n  - id: {name!r}\n")
        for name, ok in [
            ("a", True),
            ("A.b_c~d-9", True),
            ("9lives", True),
            ("-x", False),
            ("_x", False),
            ("a b", False),
            ("a/b", False),
            ("caf\u00e9", False),
            ("", False),
        ]
    },
    **{
        f"scenario name {name!r}": (ok, f"name: {name!r}\nskills: []\n")
        for name, ok in [("v1.2", True), ("~x", False), ("a:b", False)]
    },
    **{
        f"method {method!r}": (ok, _route(f"method: {method!r}, steps: [json: 1]"))
        for method, ok in [
            ("GET", True),
            ("head", True),
            ("Patch", True),
            ("oPtIoNs", True),
            ("CONNECT", False),
            ("TRACE", False),
            ("GET ", False),
            ("", False),
        ]
    },
    **{
        f"delay {delay}": (ok, _invoke(f"{{json: 1, delay: {delay}}}"))
        for delay, ok in [(-1, False), (0, True), (300000, True), (300001, False)]
    },
    **{
        f"times {times}": (ok, _invoke(f"{{json: 1, times: {times}}}"))
        for times, ok in [(-1, False), (0, False), (1, True), (1000, True), ("true", False)]
    },
    **{
        f"result status {status}": (ok, _invoke(f"{{status: {status}}}"))
        for status, ok in [
            (99, False),
            (100, False),
            (101, False),
            (199, False),
            (200, True),
            (599, True),
            (600, False),
            ("'200'", False),
        ]
    },
    **{
        f"retry {advice}": (ok, _invoke(f"{{error: EXECUTION_TIMEOUT, retry: {advice}}}"))
        for advice, ok in [
            ("{}", True),
            ("{suggested_delay_ms: 0, max_attempts: 1}", True),
            ("{suggested_delay_ms: -1}", False),
            ("{suggested_delay_ms: 300000}", True),
            ("{suggested_delay_ms: 300001}", False),
            (f"{{suggested_delay_ms: {10**32}}}", False),
            ("{max_attempts: 0}", False),
            ("5000", False),
        ]
    },
    **{
        f"header {header}": (ok, _invoke(f"{{json: 1, headers: {{{header}}}}}"))
        for header, ok in [
            ("X-A: abc", True),
            ('X-A: "caf\u00e9\tau lait"', True),
            ("X-A: 5", True),
            ('X-A: "\u65e5\u672c"', False),
            ('X-A: "a\\0b"', False),
            ('X-A: "a\\vb"', False),
            ('X-A: "a\\x7fb"', False),
            ('X-A: "a\\r\\nb"', False),
            ("Transfer-Encoding: chunked", False),
            ("content-length: 5", False),
            ("Connection: close", False),
            ("KEEP-ALIVE: x", False),
            ("Proxy-Connection: x", False),
            ("TE: trailers", False),
            ("Trailer: X", False),
            ("Upgrade: h2c", False),
            ("Tea: yes please", True),
            ("X-Connection: x", True),
        ]
    },
    **{
        f"seed {seed}": (ok, f"seed: {seed}\nskills: []\n")
        for seed, ok in [("null", True), (0, True), (2**40, True), (-1, False), ("true", False)]
    },
    **{
        f"outage {outage}": (ok, f"outage: {outage}\nskills: []\n")
        for outage, ok in [
            ("null", True),
            ("{duration: 1}", True),
            ("{duration: 0}", False),
            ("{start: 0, duration: 1}", True),
            ("{start: -1, duration: 1}", False),
            ("{duration: 1, step: {fault: EMPTY_RESPONSE}}", True),
            ("{duration: 1, step: null}", False),
            ("[]", False),
        ]
    },
    **{
        f"unreachable {value}": (ok, f"skills:\n  - {{id: s, unreachable: {value}}}\n")
        for value, ok in [("true", True), ("false", True), ("null", False), ("1", False)]
    },
    **{
        f"timeout_ms {ms}": (ok, f"skills:\n  - {{id: s, timeout_ms: {ms}}}\n")
        for ms, ok in [("null", True), (0, False), (1, True), (300000, True), (300001, False)]
    },
    **{
        f"timeout_status {status}": (ok, f"skills:\n  - {{id: s, timeout_status: {status}}}\n")
        for status, ok in [
            (408, True),
            (504, True),
            (503, False),
            ("null", False),
            ("'504'", False),
        ]
    },
    **{
        f"delay shape {shape}": (ok, _invoke(f"{{json: 1, delay: {shape}}}"))
        for shape, ok in [
            ("{fixed: 0}", True),
            ("{fixed: 300000}", True),
            ("{fixed: 300001}", False),
            ("{uniform: [0, 300000]}", True),
            ("{uniform: [3, 3]}", True),
            ("{uniform: [0]}", False),
            ("{uniform: [0, 300001]}", False),
            ("{uniform: 5}", False),
            ("{lognormal: {median: 1, sigma: 0.01}}", True),
            ("{lognormal: {median: 300000, sigma: 5, cap: 300000}}", True),
            ("{lognormal: {median: 10, sigma: 5.01}}", False),
            ("{lognormal: {median: 0, sigma: 1}}", False),
            ("{lognormal: {median: 10, sigma: 1, cap: 300001}}", False),
            ("{lognormal: [10, 1]}", False),
            ("{fixed: 1, uniform: [1, 2]}", False),
            ("{}", False),
            ("{normal: 5}", False),
            ("null", False),
        ]
    },
    **{
        f"execution {value}": (ok, _invoke(f"{{json: 1, execution: {value}}}"))
        for value, ok in [(0, True), ("{uniform: [10, 20]}", True), (-1, False), ("'10'", False)]
    },
    **{
        f"hang {value}": (ok, _invoke(f"{{hang: {value}}}"))
        for value, ok in [
            ("true", True),
            ("false", False),
            (0, False),
            (1, True),
            (300000, True),
            (300001, False),
        ]
    },
    **{
        f"dribble {value}": (ok, _invoke(f"{{text: abc, dribble: {value}}}"))
        for value, ok in [
            ("{chunks: 1, over: 0}", True),
            ("{chunks: 10000, over: 300000}", True),
            ("{chunks: 0, over: 10}", False),
            ("{chunks: 10001, over: 10}", False),
            ("{chunks: 2, over: 300001}", False),
            ("{chunks: 2, over: 10, every: 5}", False),
            ("5", False),
        ]
    },
    **{
        f"fault {name} with {extra}": (ok, _invoke(f"{{fault: {name}{extra}}}"))
        for name in FAULTS
        for extra, ok in [("", True), (", json: 1", True), (", hang: 5", False)]
    },
    **{
        f"failure_rate {rate}": (ok, _invoke(f"{{json: 1, failure_rate: {rate}}}"))
        for rate, ok in [(0, False), (0.001, True), (0.999, True), (1, False), ("true", False)]
    },
    **{
        f"weight {weight}": (ok, _invoke(f"{{one_of: [{{json: 1, weight: {weight}}}]}}"))
        for weight, ok in [(0, False), (0.5, True), (999999999, True), (1000000000, False)]
    },
    "one_of with times": (True, _invoke("{one_of: [json: 1, json: 2], times: 3}")),
    "one_of with failure_rate": (False, _invoke("{one_of: [json: 1], failure_rate: 0.5}")),
    "outcome with times": (False, _invoke("{one_of: [{json: 1, times: 2}]}")),
    "outcome with failure": (False, _invoke("{one_of: [{json: 1, failure: {json: 2}}]}")),
    "outcome with only a weight": (False, _invoke("{one_of: [{weight: 2}]}")),
    "weight outside one_of": (False, _invoke("{json: 1, weight: 2}")),
    "failure_rate alone": (False, _invoke("{failure_rate: 0.5, failure: {json: 2}}")),
    "dribble with error": (True, _invoke("{error: AUTH_REQUIRED, dribble: {chunks: 2, over: 1}}")),
    "dribble with hang": (False, _invoke("{json: 1, hang: 5, dribble: {chunks: 2, over: 1}}")),
    "dribble with fault": (
        False,
        _invoke("{json: 1, fault: EMPTY_RESPONSE, dribble: {chunks: 2, over: 1}}"),
    ),
    "hang with a body": (True, _invoke("{json: 1, hang: 5}")),
    "only a wait": (False, _invoke("{delay: 5, execution: 5}")),
    **{
        f"auth {value}": (ok, f"auth: {value}\nskills: []\n")
        for value, ok in [
            ("{tokens: [{token: t}]}", True),
            (f"{{tokens: [{{token_sha256: {'a' * 64}}}]}}", True),
            (f"{{tokens: [{{token_sha256: {'A' * 64}, scopes: [x]}}]}}", True),
            (f"{{tokens: [{{token_sha256: {'a' * 63}}}]}}", False),
            (f"{{tokens: [{{token: t, token_sha256: {'a' * 64}}}]}}", False),
            ("{tokens: [{scopes: [x]}]}", False),
            (f"{{api_keys: [{{key_sha256: {'b' * 64}}}]}}", True),
            ("{api_keys: [{key_sha256: zz}]}", False),
            (f"{{clients: [{{client_id: c, client_secret_sha256: {'f' * 64}}}]}}", True),
            ("{clients: [{client_id: c}]}", False),
            (
                f"{{clients: [{{client_id: c, client_secret: s,"
                f" client_secret_sha256: {'f' * 64}}}]}}",
                False,
            ),
        ]
    },
    "descriptor in a skill's outcome": (True, _invoke("{one_of: [descriptor: true]}")),
    "descriptor in a route's outcome": (False, _route("steps: [{one_of: [descriptor: true]}]")),
    "descriptor in a route's failure": (
        False,
        _route("steps: [{json: 1, failure_rate: 0.5, failure: {descriptor: true}}]"),
    ),
    "descriptor in the outage step": (
        False,
        "outage: {duration: 5, step: {descriptor: true}}\nskills: []\n",
    ),
    **{
        f"proxy {value}": (ok, _invoke(f"{{proxy: {value}}}"))
        for value, ok in [
            ("'http://h'", True),
            ("'https://h:8443/'", True),
            ("'http://h/path'", False),
            ("'http://h?q'", False),
            ("'ftp://h'", False),
            ("'h:80'", False),
            ("{url: 'https://h', verify: false, timeout_ms: 1}", True),
            ("{url: 'https://h', timeout_ms: 0}", False),
            ("{url: 'https://h', timeout_ms: 300001}", False),
            ("{url: 'https://h', retries: 1}", False),
            ("{verify: false}", False),
        ]
    },
    "proxy with a delay, times and after": (
        True,
        _invoke("{proxy: 'http://h', delay: 5, times: 2, after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "proxy with a body": (False, _invoke("{proxy: 'http://h', json: 1}")),
    "proxy with a fault": (False, _invoke("{proxy: 'http://h', fault: EMPTY_RESPONSE}")),
    "after a scripted result": (True, _invoke("{json: 1, after: {error: EXECUTION_TIMEOUT}}")),
    "after a scripted result, cut": (True, _invoke("{json: 1, after: {fault: TRUNCATED_BODY}}")),
    "after beside an error": (
        False,
        _invoke("{error: ENDPOINT_UNREACHABLE, after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "after beside a fault": (
        False,
        _invoke("{json: 1, fault: EMPTY_RESPONSE, after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "after beside a hang": (
        False,
        _invoke("{json: 1, hang: 5, after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "after alone": (False, _invoke("{after: {error: EXECUTION_TIMEOUT}}")),
    "after beside failure_rate": (
        True,
        _invoke("{json: 1, failure_rate: 0.5, after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "after beside one_of": (
        False,
        _invoke("{one_of: [{json: 1}], after: {error: EXECUTION_TIMEOUT}}"),
    ),
    "after in an outcome": (
        True,
        _invoke("{one_of: [{json: 1, after: {fault: EMPTY_RESPONSE}}, {json: 2}]}"),
    ),
    "a skill honouring Idempotency-Key": (True, "skills:\n  - {id: pay, idempotency_key: true}\n"),
    "idempotency_key not a boolean": (False, "skills:\n  - {id: pay, idempotency_key: 'yes'}\n"),
    "after a fault": (True, _invoke("{proxy: 'http://h', after: {fault: EMPTY_RESPONSE}}")),
    "after a result": (False, _invoke("{proxy: 'http://h', after: {json: 1}}")),
    "after with a delay": (
        False,
        _invoke("{proxy: 'http://h', after: {error: EXECUTION_TIMEOUT, delay: 5}}"),
    ),
    "proxy in an outcome": (True, _invoke("{one_of: [{proxy: 'http://h'}, {json: 1}]}")),
    "proxy with failure_rate": (
        True,
        _invoke("{proxy: 'http://h', failure_rate: 0.5, failure: {error: ENDPOINT_UNREACHABLE}}"),
    ),
    "proxy on a skill": (True, "skills:\n  - {id: s, proxy: 'http://h:1'}\n"),
    "proxy on a route": (True, _route("proxy: 'http://h'")),
    "proxy and steps on a route": (False, _route("proxy: 'http://h', steps: [json: 1]")),
    "proxy on a scenario alone": (True, "proxy: 'http://h'\n"),
    "proxy on a scenario, bad": (False, "proxy: 'http://h/x'\n"),
    "bytes in base64": (
        True,
        _invoke("{body_base64: 'AAEC/w==', headers: {Content-Encoding: br}}"),
    ),
    "base64 with other characters": (False, _invoke("{body_base64: 'not base64!'}")),
    "base64 beside text": (False, _invoke("{body_base64: 'AA==', text: hi}")),
    "base64 beside a file": (False, _invoke("{body_base64: 'AA==', body_file: b.bin}")),
    "dribbled bytes": (True, _invoke("{body_base64: 'AA==', dribble: {chunks: 1, over: 0}}")),
    **{
        f"rate_limit {limit}": (ok, f"skills:\n  - {{id: s, rate_limit: {limit}}}\n")
        for limit, ok in [
            ("{capacity: 1, refill: 1}", True),
            ("null", True),
            ("{capacity: 1000000, refill: 1000000}", True),
            ("{capacity: 0, refill: 1}", False),
            ("{capacity: 1000001, refill: 1}", False),
            ("{capacity: 1.5, refill: 1}", False),
            ("{capacity: 1, refill: 0}", False),
            ("{capacity: 1, refill: -1}", False),
            ("{capacity: 1, refill: 0.5}", True),
            ("{capacity: 1, refill: 0.003}", False),
            ("{capacity: 1, refill: 1000001}", False),
            ("{capacity: 1, refill: '1'}", False),
            ("{capacity: 1}", False),
            ("{refill: 1}", False),
            ("{capacity: 1, refill: 1, burst: 2}", False),
            ("{capacity: 1, refill: 1, key: credential}", True),
            ("{capacity: 1, refill: 1, key: client}", True),
            ("{capacity: 1, refill: 1, key: tenant}", False),
            ("{capacity: 1, refill: 1, key: header}", False),
            ("{capacity: 1, refill: 1, key: {header: X-Tenant}}", True),
            ("{capacity: 1, refill: 1, key: {header: 'X Tenant'}}", False),
            ("{capacity: 1, refill: 1, key: {header: ''}}", False),
            ("{capacity: 1, refill: 1, key: {body: /tenant}}", True),
            ("{capacity: 1, refill: 1, key: {body: /a~1b/0}}", True),
            ("{capacity: 1, refill: 1, key: {body: tenant}}", False),
            ("{capacity: 1, refill: 1, key: {body: /a~2}}", False),
            ("{capacity: 1, refill: 1, key: {body: ''}}", False),
            ("{capacity: 1, refill: 1, key: {header: a, body: /b}}", False),
            ("{capacity: 1, refill: 1, key: {}}", False),
            ("{capacity: 1, refill: 1, status: 503}", True),
            ("{capacity: 1, refill: 1, status: 502}", False),
            ("{capacity: 1, refill: 1, retry_after: date, headers: x-ratelimit-epoch}", True),
            ("{capacity: 1, refill: 1, retry_after: http-date}", False),
            ("{capacity: 1, refill: 1, headers: draft}", False),
            ("5", False),
        ]
    },
    "rate_limit on a route": (
        True,
        _route("steps: [json: 1], rate_limit: {capacity: 1, refill: 1}"),
    ),
    "a bad rate_limit on a route": (False, _route("steps: [json: 1], rate_limit: {capacity: 0}")),
    **{
        f"rate_limited {step}": (ok, _invoke(step))
        for step, ok in [
            ("{rate_limited: {retry_after_ms: 0}}", True),
            ("{rate_limited: {retry_after_ms: 300000, limit: 1000000}}", True),
            ("{rate_limited: {retry_after_ms: 300001}}", False),
            ("{rate_limited: {retry_after_ms: -1}}", False),
            ("{rate_limited: {limit: 2}}", False),
            ("{rate_limited: {retry_after_ms: 5, limit: 0}}", False),
            ("{rate_limited: {retry_after_ms: 5, status: 503, retry_after: ms}}", True),
            ("{rate_limited: {retry_after_ms: 5, status: 500}}", False),
            ("{rate_limited: {retry_after_ms: 5, headers: none}}", True),
            ("{rate_limited: {retry_after_ms: 5, wait: 1}}", False),
            ("{rate_limited: 5}", False),
            ("{rate_limited: {retry_after_ms: 5}, times: 2, delay: 5, set_state: Slow}", True),
            ("{rate_limited: {retry_after_ms: 5}, json: 1}", False),
            ("{rate_limited: {retry_after_ms: 5}, error: ENDPOINT_UNREACHABLE}", False),
            ("{rate_limited: {retry_after_ms: 5}, status: 429}", False),
            ("{rate_limited: {retry_after_ms: 5}, headers: {X-A: b}}", False),
            ("{rate_limited: {retry_after_ms: 5}, fault: EMPTY_RESPONSE}", False),
            ("{rate_limited: {retry_after_ms: 5}, hang: 5}", False),
            ("{rate_limited: {retry_after_ms: 5}, execution: 5}", False),
            ("{rate_limited: {retry_after_ms: 5}, after: {error: EXECUTION_TIMEOUT}}", False),
            ("{one_of: [{rate_limited: {retry_after_ms: 5}, weight: 2}, {json: 1}]}", True),
            ("{json: 1, failure_rate: 0.5, failure: {rate_limited: {retry_after_ms: 5}}}", True),
            ("{rate_limited: {retry_after_ms: 5}, failure_rate: 0.5}", True),
            (
                "{cases: [{when: {headers: {X-A: {equals: b}}},"
                " rate_limited: {retry_after_ms: 5}}], steps: [json: 1]}",
                True,
            ),
        ]
    },
    **{
        f"task {task}": (ok, _task(task))
        for task, ok in [
            ("{life: [{status: completed}]}", True),
            ("{life: []}", False),
            ("{poll_after: 1s}", False),
            ("{life: [{status: completed}], poll_every: 1s}", False),
            ("{life: [{status: working, for: 1s}, {status: completed}]}", True),
            ("{life: [{status: working, for: 1.5s}, {status: completed}]}", True),
            ("{life: [{status: working, for: 500ms}, {status: completed}]}", True),
            ("{life: [{status: working, for: 5m}, {status: completed}]}", True),
            ("{life: [{status: working, for: 24h}, {status: completed}]}", True),
            ("{life: [{status: working, for: 5}, {status: completed}]}", False),
            ("{life: [{status: working, for: -1s}, {status: completed}]}", False),
            ("{life: [{status: working, for: 2d}, {status: completed}]}", False),
            ("{life: [{status: working, polls: 1}, {status: completed}]}", True),
            ("{life: [{status: working, polls: 0}, {status: completed}]}", False),
            ("{life: [{status: working, for: 1s, polls: 1}, {status: completed}]}", False),
            ("{life: [{status: working}, {status: completed}]}", False),
            ("{life: [{status: submitted}, {status: completed}]}", False),
            ("{life: [{status: input_required}, {status: completed}]}", True),
            ("{life: [{status: input_required, for: 1s}, {status: completed}]}", False),
            ("{life: [{status: completed, polls: 1}]}", False),
            ("{life: [{status: runing, for: 1s}, {status: completed}]}", False),
            (
                "{life: [{status: working, for: 1s, progress: [0, 50, 100]}, {status: completed}]}",
                True,
            ),
            ("{life: [{status: working, for: 1s, progress: [101]}, {status: completed}]}", False),
            ("{life: [{status: working, for: 1s, progress: []}, {status: completed}]}", False),
            ("{life: [{status: input_required, progress: [5]}, {status: completed}]}", False),
            ("{life: [{status: completed, json: {a: 1}}]}", True),
            ("{life: [{status: working, for: 1s, json: 1}, {status: completed}]}", False),
            ("{life: [{status: failed, error: EXECUTION_TIMEOUT, status_code: 504}]}", True),
            ("{life: [{status: failed, message: late}]}", False),
            ("{life: [{status: failed}]}", False),
            ("{life: [{status: cancelled, error: EXECUTION_TIMEOUT}]}", False),
            ("{life: [{status: failed, error: NOPE}]}", False),
            (
                "{life: [{status: input_required, expects: {body: {/a: 1}}}, {status: completed}]}",
                True,
            ),
            (
                "{life: [{status: working, for: 1s, expects: {body: {/a: 1}}},"
                " {status: completed}]}",
                False,
            ),
            ("{life: [{status: input_required, expects: {bdy: {}}}, {status: completed}]}", False),
            ("{life: [{status: working, for: 1s, poll_after: 2s}, {status: completed}]}", True),
            ("{life: [{status: completed, poll_after: 2s}]}", False),
            ("{life: [{status: completed}], poll_after: 1s, ttl: 5m}", True),
            ("{life: [{status: completed}], poll_after: 1000}", False),
            ("{life: [{status: completed}], ttl: 5 minutes}", False),
            ("{life: [{status: completed}], cancel: {allowed: [], settle: 0s}}", True),
            ("{life: [{status: completed}], cancel: {allowed: [working, input_required]}}", True),
            ("{life: [{status: completed}], cancel: {allowed: [completed]}}", False),
            ("{life: [{status: completed}], cancel: {allowed: working}}", False),
            ("{life: [{status: completed}], cancel: {settle: 1}}", False),
            ("{life: [{status: completed}], cancel: {after: 1s}}", False),
            (
                "{life: [{status: completed}],"
                " polls: [{error: ENDPOINT_UNREACHABLE}, {task: status}]}",
                True,
            ),
            ("{life: [{status: completed}], polls: {steps: [task: status], end: cycle}}", True),
            ("{life: [{status: completed}], polls: {cases: []}}", False),
            ("null", True),
            ("5", False),
        ]
    },
    **{
        f"task step {step}": (ok, _task("{life: [{status: completed}]}", f"invoke: {step}"))
        for step, ok in [
            ("{task: submit}", True),
            ("{task: submit, times: 2, delay: 5, set_state: Busy}", True),
            ("[{error: ENDPOINT_UNREACHABLE}, {task: submit}]", True),
            ("{one_of: [{task: submit, weight: 2}, {error: ENDPOINT_UNREACHABLE}]}", True),
            ("{task: submit, failure_rate: 0.5}", True),
            ("{task: start}", False),
            ("{task: submit, json: 1}", False),
            ("{task: submit, error: ENDPOINT_UNREACHABLE}", False),
            ("{task: submit, fault: EMPTY_RESPONSE}", False),
            ("{task: submit, hang: 5}", False),
            ("{task: submit, headers: {X-A: b}}", False),
            ("{task: submit, rate_limited: {retry_after_ms: 5}}", False),
        ]
    },
    **{
        f"task callback {callback}": (
            ok,
            _task(f"{{life: [{{status: completed}}], callback: {callback}}}"),
        )
        for callback, ok in [
            ("{url: {header: X-Callback-Url}, secret: s}", True),
            ("{url: {body: /callback/url}, secret: s}", True),
            ("{url: {body: /a~1b/~0c}, secret: s}", True),
            ("null", True),
            (
                "{url: {header: X-Hook}, secret: s, signature_header: X-Sig, attempts: 100,"
                " backoff: 500ms, timeout: 2s, on: [working, completed], fault: [never, none]}",
                True,
            ),
            ("{url: {header: X-Hook}, secret: s, fault: late, late_by: 3s}", True),
            ("{url: {header: X-Hook}, secret: s, fault: [none, late], late_by: 3s}", True),
            ("{url: {header: X-Hook}, secret: s, late_by: 3s}", False),
            ("{url: {header: X-Hook}, secret: s, fault: twice, late_by: 3s}", False),
            ("{url: {header: X-Hook}}", False),
            ("{secret: s}", False),
            ("{url: {header: X-Hook}, secret: ''}", False),
            ("{url: 'http://127.0.0.1/hook', secret: s}", False),
            ("{url: {header: X-Hook, body: /url}, secret: s}", False),
            ("{url: {query: hook}, secret: s}", False),
            ("{url: {header: 'X Hook'}, secret: s}", False),
            ("{url: {body: callback/url}, secret: s}", False),
            ("{url: {body: ''}, secret: s}", False),
            ("{url: {header: X-Hook}, secret: s, attempts: 0}", False),
            ("{url: {header: X-Hook}, secret: s, attempts: 101}", False),
            ("{url: {header: X-Hook}, secret: s, timeout: -1s}", False),
            ("{url: {header: X-Hook}, secret: s, timeout: 5}", False),
            ("{url: {header: X-Hook}, secret: s, on: []}", False),
            ("{url: {header: X-Hook}, secret: s, on: [submitted]}", False),
            ("{url: {header: X-Hook}, secret: s, on: [finished]}", False),
            ("{url: {header: X-Hook}, secret: s, fault: lost}", False),
            ("{url: {header: X-Hook}, secret: s, fault: []}", False),
            ("{url: {header: X-Hook}, secret: s, retries: 3}", False),
        ]
    },
    **{
        f"stream {stream}": (ok, _invoke(f"{{stream: {stream}}}"))
        for stream, ok in [
            ("{events: [{data: a}]}", True),
            ("{end: {data: {answer: 42}}}", True),
            ("{events: []}", False),
            ("{events: [{data: a, event: token, id: 7, delay: 100ms}, {comment: hi}]}", True),
            ("{events: [{event: token}]}", False),
            ("{events: [{data: a, delay: 100}]}", False),
            ("{events: [{data: a, delay: -1s}]}", False),
            ('{events: [{data: a, id: "x\\ny"}]}', False),
            ('{events: [{data: a, id: "x\\0y"}]}', False),
            ('{events: [{data: a, event: "x\\ny"}]}', False),
            ("{events: [{data: a, id: 'x\\ny'}]}", True),
            ("{events: [{comment: only}]}", True),
            ("{events: [{comment: only}], fault: {after: 0, kind: stall, for: 0s}}", False),
            ("{events: [{data: a, rate: 5/s}]}", False),
            ("{events: [{repeat: 200, rate: 50/s, data: t, id_from: 1}]}", True),
            ("{events: [{repeat: 2, rate: 30/m, data: t}]}", True),
            ("{events: [{repeat: 2, rate: 0.5/s, data: t}]}", True),
            ("{events: [{repeat: 2, delay: 1s, data: t, id: x}]}", True),
            ("{events: [{repeat: 2, rate: 0/s, data: t}]}", False),
            ("{events: [{repeat: 2, rate: -5/s, data: t}]}", False),
            ("{events: [{repeat: 2, rate: fast, data: t}]}", False),
            ("{events: [{repeat: 2, rate: 5/s, delay: 1s, data: t}]}", False),
            ("{events: [{repeat: 2, data: t, id: x, id_from: 1}]}", False),
            ("{events: [{repeat: 0, data: t}]}", False),
            ("{events: [{repeat: 100000, data: t}]}", True),
            ("{events: [{repeat: 100001, data: t}]}", False),
            ("{events: [{repeat: 2}]}", False),
            ("{events: [{data: a}], format: ndjson}", True),
            ("{events: [{data: a}], format: [ndjson, sse]}", True),
            ("{events: [{data: a}], format: jsonl}", False),
            ("{events: [{data: a}], format: []}", False),
            ("{events: [{data: a}], format: [sse, sse]}", False),
            ("{events: [{data: a}], retry: 2s, heartbeat: 15s}", True),
            ("{events: [{data: a}], retry: 0s}", True),
            ("{events: [{data: a}], heartbeat: 0s}", False),
            ("{events: [{data: a}], heartbeat: 15}", False),
            ("{events: [{data: a}], resumable: false}", True),
            ("{events: [{data: a}], resumable: 'yes'}", False),
            ("{events: [{data: a}], status: 200, headers: {X-Trace: t1}}", True),
            ("{events: [{data: a}], status: 404}", False),
            ("{events: [{data: a}], headers: {Content-Length: 5}}", False),
            ("{events: [{data: a}], end: null}", True),
            ("{events: [{data: a}], end: {event: done, data: ok, id: 9, delay: 1s}}", True),
            ("{events: [{data: a}], end: {error: ENDPOINT_UNREACHABLE}}", True),
            (
                "{events: [{data: a}], end: {error: EXECUTION_TIMEOUT, message: m,"
                " details: {a: 1}, retry: {suggested_delay_ms: 10, max_attempts: 2}}}",
                True,
            ),
            ("{events: [{data: a}], end: {error: OVERLOADED}}", False),
            ("{events: [{data: a}], end: {error: ENDPOINT_UNREACHABLE, data: x}}", False),
            ("{events: [{data: a}], end: {data: x, message: m}}", False),
            ("{events: [{data: a}], end: {event: result}}", False),
            ("{events: [{data: a}], fault: {after: 1, kind: reset}}", True),
            ("{events: [{data: a}], fault: {after: 0, kind: close}}", True),
            ("{events: [{data: a}], fault: {after: 1, kind: stall, for: 5s}}", True),
            ("{events: [{data: a}], fault: {after: 1, kind: stall}}", True),
            ("{events: [{data: a}], fault: {after: 1, kind: reset, for: 5s}}", False),
            ("{events: [{data: a}], fault: {after: 1, kind: rest}}", False),
            ("{events: [{data: a}], fault: {after: -1, kind: reset}}", False),
            ("{events: [{data: a}], fault: {kind: reset}}", False),
            ("{events: [{data: a}], fault: null}", True),
        ]
    },
    **{
        f"stream step {step}": (ok, _invoke(step))
        for step, ok in [
            ("{stream: {events: [{data: a}]}, times: 2, delay: 5, set_state: Busy}", True),
            ("[{stream: {events: [{data: a}]}}, {json: 1}]", True),
            ("{one_of: [{stream: {events: [{data: a}]}, weight: 2}, {json: 1}]}", True),
            ("{stream: {events: [{data: a}]}, failure_rate: 0.5}", True),
            ("{stream: {events: [{data: a}]}, json: 1}", False),
            ("{stream: {events: [{data: a}]}, fault: CONNECTION_RESET_BY_PEER}", False),
            ("{stream: {events: [{data: a}]}, hang: 5}", False),
            ("{stream: {events: [{data: a}]}, dribble: {chunks: 2, over: 5}}", False),
            ("{stream: {events: [{data: a}]}, proxy: 'http://127.0.0.1:1'}", False),
            ("{stream: {events: [{data: a}]}, status: 200}", False),
            ("{stream: {events: [{data: a}]}, headers: {X-A: b}}", False),
            ("{stream: {events: [{data: a}]}, keep_alive: {close_after: true}}", False),
        ]
    },
    "a stream step on a route": (True, _route("steps: [stream: {events: [{data: a}]}]")),
    "a task step on a route": (False, _route("steps: [task: submit]")),
    "a task step in a route's outcome": (False, _route("steps: [{one_of: [task: submit]}]")),
    "a task with a rate limit": (
        True,
        _task("{life: [{status: completed}]}", "rate_limit: {capacity: 1, refill: 1}"),
    ),
    "rate_limited on a route": (True, _route("steps: [rate_limited: {retry_after_ms: 5}]")),
    "a named case": (True, _invoke("{cases: [{name: AUTH_REQUIRED-1, when: {}, json: 1}]}")),
    "a named case with steps": (
        True,
        _invoke("{cases: [{name: a.b, when: {}, steps: [json: 1], end: next}], steps: [json: 2]}"),
    ),
    "a case name with a space": (False, _invoke("{cases: [{name: a b, when: {}, json: 1}]}")),
    "a case name beginning with -": (False, _invoke("{cases: [{name: -a, when: {}, json: 1}]}")),
    "a case name that is a number": (False, _invoke("{cases: [{name: 7, when: {}, json: 1}]}")),
    "rate_limited in the outage step": (
        True,
        "outage: {duration: 5, step: {rate_limited: {retry_after_ms: 5}}}\nskills: []\n",
    ),
}


@pytest.mark.parametrize(("ok", "text"), BOUNDARIES.values(), ids=BOUNDARIES.keys())
def test_schema_and_loader_agree_at_the_boundaries(ok: bool, text: str) -> None:
    assert (schema_errors(text) == []) is ok, schema_errors(text)
    assert _loads(text) is ok


# What the schema cannot say: refused by the loader, accepted by the schema. A
# rule that the schema learns to express moves to BOUNDARIES or INVALID.
LOADER_ONLY: dict[str, str] = {
    "a case name used twice in a skill": _invoke(
        "{cases: [{name: a, when: {headers: {x: '1'}}, json: 1},"
        " {name: a, when: {headers: {x: '2'}}, json: 2}]}"
    ),
    "uniform MIN above MAX": _invoke("{json: 1, delay: {uniform: [5, 1]}}"),
    "lognormal cap below median": _invoke(
        "{json: 1, delay: {lognormal: {median: 200, sigma: 1, cap: 100}}}"
    ),
    # JSON Schema counts 1.0 as an integer; the loader wants a whole number written as one
    "whole number written 1.0": "seed: 1.0\nskills: []\n",
    "a CA file that does not exist": _invoke("{proxy: {url: 'https://h', verify: no-such-ca.pem}}"),
    "verify beside an http:// url": _invoke("{proxy: {url: 'http://h', verify: false}}"),
    "base64 without its padding": _invoke("{body_base64: 'abc'}"),
    "a body file in a scenario given as text": _invoke("{body_file: logo.png}"),
    # where a task step may be, and what only a whole life can get wrong
    "task: submit in a skill without task:": _invoke("{task: submit}"),
    "task: status in a task skill's invoke": _task(
        "{life: [{status: completed}]}", "invoke: [task: status, task: submit]"
    ),
    "task: submit in the polls": _task("{life: [{status: completed}], polls: [task: submit]}"),
    "a task skill's invoke that never submits": _task(
        "{life: [{status: completed}]}", "invoke: {json: 1}"
    ),
    "a terminal phase before the last": _task(
        "{life: [{status: completed}, {status: working, for: 1s}, {status: completed}]}"
    ),
    "a last phase that is live": _task("{life: [{status: working, for: 1s}]}"),
    "progress that falls": _task(
        "{life: [{status: working, for: 1s, progress: [50, 10]}, {status: completed}]}"
    ),
    "a zero duration": _task("{life: [{status: working, for: 0s}, {status: completed}]}"),
    "a callback's zero backoff": _task(
        "{life: [{status: completed}], callback: {url: {header: X-Hook}, secret: s, backoff: 0s}}"
    ),
    "a callback's signature in a header every delivery sets": _task(
        "{life: [{status: completed}],"
        " callback: {url: {header: X-Hook}, secret: s, signature_header: Content-Type}}"
    ),
    "a duration finer than a millisecond": _task(
        "{life: [{status: working, for: 0.0001s}, {status: completed}]}"
    ),
    "a poll_after longer than a step may wait": _task(
        "{life: [{status: completed}], poll_after: 6m}"
    ),
    "a failed phase's status its code does not allow": _task(
        "{life: [{status: failed, error: EXECUTION_TIMEOUT, status_code: 500}]}"
    ),
    "a result with placeholders": _task(
        "{life: [{status: completed, json: {a: '{{request.body}}'}}]}"
    ),
    # JSON Schema's bounds pass a NaN (it is neither below nor above them)
    "a refill that is not a number": (
        "skills:\n  - {id: s, rate_limit: {capacity: 1, refill: .nan}}\n"
    ),
}


@pytest.mark.parametrize("text", LOADER_ONLY.values(), ids=LOADER_ONLY.keys())
def test_loader_only_rules(text: str) -> None:
    assert schema_errors(text) == []
    assert not _loads(text)


# -- bundled scenarios ---------------------------------------------------------

BUNDLED = sorted(
    p for p in loader.bundled_path().rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
)


def test_there_are_bundled_scenarios() -> None:
    assert len(BUNDLED) >= 4


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_scenario_matches_schema(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert documents(text, str(path))
    assert schema_errors(text) == []


# -- YAML blocks in the documentation -----------------------------------------

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")


def yaml_blocks(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of every fenced block whose info string starts with the word ``yaml``."""
    blocks = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        info = opening["info"].split()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[j])
            j += 1
        if info and info[0].lower() == "yaml":
            blocks.append((i + 1, textwrap.dedent("\n".join(body)) + "\n"))
        i = j + 1
    return blocks


def test_yaml_blocks_are_found() -> None:
    sample = textwrap.dedent(
        """\
        Intro.

        ```yaml
        name: one
        ```

        ```console
        $ mockskill serve
        ```

        - a list item:

          ````yaml title="two"
          name: two
          ```
          still two
          ````

        ~~~yml
        name: not-checked
        ~~~
        """
    )
    assert yaml_blocks(sample) == [(3, "name: one\n"), (13, "name: two\n```\nstill two\n")]
    assert yaml_blocks("no code here\n") == []


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOC_BLOCKS = [
    pytest.param(text, id=f"{path.relative_to(ROOT)}:{line}")
    for path in DOCS
    if path.is_file()
    for line, text in yaml_blocks(path.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize("text", DOC_BLOCKS)
def test_documented_scenario_matches_schema_and_loads(text: str) -> None:
    assert schema_errors(text) == []
    assert mockskill.load_text(text, "doc.yaml").scenarios


# -- broken scenarios: refused by both ----------------------------------------


# id: (where the loader reports the problem, the scenario text)
INVALID: dict[str, tuple[str, str]] = {
    "unknown top-level key": ("skils", "name: x\nskils: []\n"),
    "a body condition's pointer without /": (
        "skills[0].invoke.cases[0].when.body.input",
        _invoke("{cases: [{when: {body: {input: 1}}, json: 1}]}"),
    ),
    "an unknown condition test": (
        "skills[0].invoke.cases[0].when.headers.X-A.equal",
        _invoke("{cases: [{when: {headers: {X-A: {equal: a}}}, json: 1}]}"),
    ),
    "a case without when": ("skills[0].invoke.cases[0]", _invoke("{cases: [{json: 1}]}")),
    "unknown step key": ("skills[0].invoke.dealy", _invoke("{json: 1, dealy: 5}")),
    "misspelt error code": ("skills[0].invoke.error", _invoke("{error: AUTH_REQUIRE}")),
    "validation error as a step": ("skills[0].invoke.error", _invoke("{error: VALIDATION_ERROR}")),
    "wrong status for code": (
        "skills[0].invoke.status",
        _invoke("{error: SKILL_NOT_FOUND, status: 410}"),
    ),
    "retry on auth required": (
        "skills[0].invoke.retry",
        _invoke("{error: AUTH_REQUIRED, retry: {suggested_delay_ms: 10}}"),
    ),
    "unknown retry key": (
        "skills[0].invoke.retry.delay_ms",
        _invoke("{error: EXECUTION_TIMEOUT, retry: {delay_ms: 10}}"),
    ),
    "times zero": ("skills[0].invoke.times", _invoke("{json: 1, times: 0}")),
    "fractional delay": ("skills[0].invoke.delay", _invoke("{json: 1, delay: 1.5}")),
    "delay over max": ("skills[0].invoke.delay", _invoke("{json: 1, delay: 300001}")),
    "json and text": ("skills[0].invoke.text", _invoke("{json: 1, text: one}")),
    "error and json": ("skills[0].invoke.json", _invoke("{error: AUTH_REQUIRED, json: 1}")),
    "end loop": ("skills[0].invoke.end", _invoke("{end: loop, steps: [{json: 1}]}")),
    "empty steps list": ("skills[0].invoke.steps", _invoke("{steps: []}")),
    "empty step list": ("skills[0].invoke", _invoke("[]")),
    "message on a result step": ("skills[0].invoke.message", _invoke("{json: 1, message: hi}")),
    "step with nothing to send": ("skills[0].invoke", _invoke("{delay: 10}")),
    "one_of in failure": (
        "skills[0].invoke.failure.one_of",
        _invoke("{json: 1, failure_rate: 0.5, failure: {one_of: [{json: 2}]}}"),
    ),
    "times in failure": (
        "skills[0].invoke.failure.times",
        _invoke("{json: 1, failure_rate: 0.5, failure: {json: 2, times: 4}}"),
    ),
    "times in an outage step": (
        "outage.step.times",
        "name: x\noutage: {duration: 10, step: {json: 1, times: 2}}\nskills: [{id: a}]\n",
    ),
    "result status out of range": ("skills[0].invoke.status", _invoke("{status: 99}")),
    "header value on two lines": (
        "skills[0].invoke.headers.X-A",
        _invoke('{json: 1, headers: {X-A: "a\\nb"}}'),
    ),
    "descriptor and raw_descriptor": (
        "skills[0].raw_descriptor",
        "skills:\n  - {id: s, descriptor: {name: S}, raw_descriptor: {name: S}}\n",
    ),
    "descriptor not a mapping": ("skills[0].descriptor", "skills:\n  - {id: s, descriptor: [1]}\n"),
    "bad skill id": ("skills[0].id", "skills:\n  - id: has space\n"),
    "bad scenario name": ("name", "name: -x\nskills: []\n"),
    "neither skills nor routes": ("(top level)", "name: x\ndescription: nothing\n"),
    "route path without slash": ("routes[0].path", "routes:\n  - {path: a, steps: [{json: 1}]}\n"),
    "route under /skills": ("routes[0].path", "routes:\n  - {path: /skills/x, steps: [json: 1]}\n"),
    "route with unknown method": ("routes[0].method", _route("method: FETCH, steps: [json: 1]")),
    "route with no methods": ("routes[0].method", _route("method: [], steps: [json: 1]")),
    "descriptor step on a route": (
        "routes[0].steps[0].descriptor",
        _route("steps: [{descriptor: true}]"),
    ),
    "unknown fault name": ("skills[0].invoke.fault", _invoke("{fault: CONNECTION_RESET}")),
    "hang with fault": ("skills[0].invoke.fault", _invoke("{hang: 5, fault: EMPTY_RESPONSE}")),
    "dribble without body": (
        "skills[0].invoke.dribble",
        _invoke("{status: 200, dribble: {chunks: 2, over: 10}}"),
    ),
    "dribble with missing over": (
        "skills[0].invoke.dribble",
        _invoke("{json: 1, dribble: {chunks: 2}}"),
    ),
    "uniform with 3 numbers": (
        "skills[0].invoke.delay.uniform",
        _invoke("{json: 1, delay: {uniform: [1, 2, 3]}}"),
    ),
    "lognormal without sigma": (
        "skills[0].invoke.delay.lognormal",
        _invoke("{json: 1, delay: {lognormal: {median: 200}}}"),
    ),
    "lognormal sigma 0": (
        "skills[0].invoke.delay.lognormal.sigma",
        _invoke("{json: 1, delay: {lognormal: {median: 200, sigma: 0}}}"),
    ),
    "lognormal unknown key": (
        "skills[0].invoke.delay.lognormal.mean",
        _invoke("{json: 1, delay: {lognormal: {median: 200, sigma: 1, mean: 250}}}"),
    ),
    "two delay shapes": (
        "skills[0].invoke.execution",
        _invoke("{json: 1, execution: {fixed: 1, uniform: [1, 2]}}"),
    ),
    "one_of empty": ("skills[0].invoke.one_of", _invoke("{one_of: []}")),
    "one_of with delay beside it": (
        "skills[0].invoke.delay",
        _invoke("{one_of: [{json: 1}], delay: 5}"),
    ),
    "outcome with nested one_of": (
        "skills[0].invoke.one_of[0].one_of",
        _invoke("{one_of: [{one_of: [{json: 1}]}]}"),
    ),
    "failure_rate 1.5": ("skills[0].invoke.failure_rate", _invoke("{json: 1, failure_rate: 1.5}")),
    "failure without failure_rate": (
        "skills[0].invoke.failure",
        _invoke("{json: 1, failure: {json: 2}}"),
    ),
    "timeout_status 500": (
        "skills[0].timeout_status",
        "skills:\n  - {id: s, timeout_status: 500}\n",
    ),
    "unreachable yes": ("skills[0].unreachable", "skills:\n  - {id: s, unreachable: 'yes'}\n"),
    "outage without duration": ("outage", "outage: {start: 10}\nskills: []\n"),
    "unknown outage key": ("outage.end", "outage: {duration: 10, end: 20}\nskills: []\n"),
    "seed -1": ("seed", "seed: -1\nskills: []\n"),
}


VALID = {
    "smallest skill": "skills:\n  - id: s\n",
    "every endpoint form": textwrap.dedent(
        """\
        name: forms
        skills:
          - id: single
            invoke: {json: {ok: true}, delay: 0, times: 1}
          - id: listed
            describe: [{error: SKILL_NOT_FOUND}, {descriptor: true}]
            invoke: [{status: 204}, {text: done, status: 201, headers: {X-Count: 2}}]
          - id: sequenced
            invoke:
              end: cycle
              steps:
                - {error: EXECUTION_TIMEOUT, status: 408, retry: null, times: 2}
                - {json: null}
        """
    ),
    "error overrides": textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              error: ENDPOINT_UNREACHABLE
              status: 502
              message: upstream is down
              details: {reason: maintenance}
              retry: {suggested_delay_ms: 0, max_attempts: 1}
              headers: {X-Trace: abc, X-Flag: true}
              delay: 300000
        """
    ),
    "routes with methods in any case": textwrap.dedent(
        """\
        routes:
          - path: /orders/<int:id>
            method: [post, Put, DELETE]
            end: fail
            steps: [{json: {}}, {error: PERMISSION_DENIED, status: null}]
          - path: /health
            method: head
            steps: [{status: 200}]
        """
    ),
    "several documents": textwrap.dedent(
        """\
        name: one
        skills:
          - id: raw
            raw_descriptor: [not, a, mapping]
        ---
        name: two
        skills: []
        routes: []
        """
    ),
    "seed, outage and skill timing": textwrap.dedent(
        """\
        name: timing
        seed: 42
        outage:
          start: 1000
          duration: 5000
          step: {error: ENDPOINT_UNREACHABLE, status: 502, delay: {uniform: [10, 50]}}
        skills:
          - id: down
            unreachable: true
          - id: slow
            unreachable: false
            timeout_ms: 1000
            timeout_status: 408
            invoke:
              - {json: {ok: true}, execution: {lognormal: {median: 200, sigma: 0.8, cap: 5000}}}
              - {json: {ok: true}, delay: {fixed: 5}, execution: 2000}
          - id: patient
            timeout_ms: null
            invoke: {json: {ok: true}, execution: {lognormal: {median: 300000, sigma: 5}}}
        routes:
          - path: /down
            steps: [{status: 503}]
        ---
        name: no-seed
        seed: null
        outage: null
        routes: []
        """
    ),
    "hangs, dribbles and faults": textwrap.dedent(
        """\
        skills:
          - id: wire
            describe: {descriptor: true, dribble: {chunks: 10000, over: 300000}}
            invoke:
              - {hang: true}
              - {hang: 1, json: {late: true}}
              - {hang: 300000, status: 204}
              - {text: slowly, dribble: {chunks: 3, over: 0}, delay: 0}
              - {error: EXECUTION_TIMEOUT, dribble: {chunks: 1, over: 10}}
              - {fault: CONNECTION_RESET_BY_PEER}
              - {fault: EMPTY_RESPONSE, delay: 10}
              - {fault: MALFORMED_RESPONSE_CHUNK, json: {partial: true}}
              - {fault: RANDOM_DATA_THEN_CLOSE, execution: {fixed: 0}}
              - {fault: TRUNCATED_BODY, status: 200, text: cut short}
        """
    ),
    "cases": textwrap.dedent(
        """\
        name: cases
        skills:
          - id: translate
            invoke:
              cases:
                - when: {body: {/input/text: boom}}
                  error: EXECUTION_TIMEOUT
                - when:
                    body: {/input/lang: {absent: true}}
                    headers: {X-Tenant: {matches: "^acme-", contains: acme}}
                    query: {debug: {exists: true}}
                  status: 400
                  json: {error: lang is required}
                - when: {raw_body: {contains: hola}}
                  steps: [{error: ENDPOINT_UNREACHABLE, times: 2}, {json: {ok: true}}]
                  end: cycle
              steps:
                - json: {translation: hola}
        routes:
          - path: /orders
            method: POST
            cases:
              - when: {body: {"": {contains: id}, /tags: {contains: 7}}}
                json: {order: 1}
        """
    ),
    "random steps": textwrap.dedent(
        """\
        name: random
        seed: 0
        skills:
          - id: weighted
            invoke:
              steps:
                - one_of:
                    - {weight: 6, json: {result: ok}, delay: {uniform: [0, 10]}}
                    - {weight: 0.5, error: ENDPOINT_UNREACHABLE, retry: null}
                    - {error: EXECUTION_TIMEOUT, status: 408, hang: 10}
                    - {fault: CONNECTION_RESET_BY_PEER}
                    - {descriptor: true, dribble: {chunks: 2, over: 5}}
                  times: 3
                - {json: {result: ok}, failure_rate: 0.25}
                - json: {result: ok}
                  failure_rate: 0.5
                  failure: {fault: TRUNCATED_BODY, json: {result: o}}
                  times: 2
              end: cycle
        routes:
          - path: /flaky
            steps:
              - {text: ok, failure_rate: 0.1, failure: {error: PERMISSION_DENIED, status: 403}}
              - one_of: [{text: a}, {text: b, weight: 2}]
        """
    ),
}


def _within(path: str, where: str) -> bool:
    """Whether problem path *where* is *path* or lies below it."""
    return path in ("(top level)", where) or where.startswith((f"{path}.", f"{path}["))


@pytest.mark.parametrize(("where", "text"), INVALID.values(), ids=INVALID.keys())
def test_invalid_scenario_is_refused_by_schema_and_loader(where: str, text: str) -> None:
    [data] = documents(text)
    error = best_match(VALIDATOR.iter_errors(data))
    assert error is not None, "the schema accepted it"
    assert _within(format_path(tuple(error.absolute_path)), where), error.message
    with pytest.raises(mockskill.ScenarioError) as raised:
        mockskill.load_text(text, "test.yaml")
    assert where in [problem.path for problem in raised.value.problems]


@pytest.mark.parametrize("text", VALID.values(), ids=VALID.keys())
def test_valid_scenario_is_accepted_by_schema_and_loader(text: str) -> None:
    assert schema_errors(text) == []
    assert mockskill.load_text(text, "test.yaml").scenarios
