"""Templates, as a scenario's author and the engine meet them: the syntax, each problem at
load and where it points, each value a placeholder reads, and the attacks that must fail."""

from __future__ import annotations

import json
import random
import textwrap
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import assert_problem

from mockskill.scenario.problems import Problem
from mockskill.scenario.reader import Reader
from mockskill.scenario.source import read_text
from mockskill.scenario.template_syntax import compile_json, compile_text
from mockskill.scenario.templates import (
    MAX_RENDERED_BYTES,
    JsonTemplate,
    NotRendered,
    Placeholder,
    Reading,
    Template,
    Values,
    uuid4_text,
)

NOON = 1_767_268_800_000
"""2026-01-01T12:00:00Z in milliseconds: the clock of these tests."""


def reader_of(text: str) -> Reader:
    [doc], problems = read_text(textwrap.dedent(text), "s.yaml")
    assert problems == []
    return Reader(doc, [])


def template(value: str) -> Template:
    """*value* compiled as the string of ``text:`` in a one-line document."""
    r = reader_of(f"text: {json.dumps(value)}\n")
    compiled = compile_text(r, r.doc.data["text"], ("text",))
    assert r.problems == []
    assert compiled is not None
    return compiled


def json_template(yaml_value: str) -> JsonTemplate:
    """The YAML flow value *yaml_value* compiled as a ``json:`` answer."""
    r = reader_of(f"json: {yaml_value}\n")
    compiled = compile_json(r, r.doc.data["json"], ("json",))
    assert r.problems == []
    assert compiled is not None
    return compiled


def text_problems(document: str, *path: str | int) -> list[Problem]:
    r = reader_of(document)
    value: Any = r.doc.data
    for part in path:
        value = value[part]
    assert compile_text(r, value, path) is None
    return r.problems


def json_problems(document: str) -> list[Problem]:
    r = reader_of(document)
    assert compile_json(r, r.doc.data["json"], ("json",)) is None
    return r.problems


def request(body: Any = None, **values: Any) -> Values:
    """A request's values; *body* is sent as JSON (bytes as they are)."""
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    values.setdefault("clock_ms", lambda: NOON)
    return Values(request_body=raw, **values)


def text_of(value: str, source: Values) -> str | NotRendered:
    return template(value).text(Reading(source))


def json_of(yaml_value: str, source: Values) -> Any:
    rendered = json_template(yaml_value).render(Reading(source))
    assert isinstance(rendered, bytes), rendered
    return json.loads(rendered)


# -- the syntax -----------------------------------------------------------------------------


def test_a_string_without_placeholders_is_a_constant_and_single_braces_are_left_alone() -> None:
    compiled = template("see {base_url}/skills and {tls_base_url:pay}; {not: a placeholder}")
    assert compiled.constant == "see {base_url}/skills and {tls_base_url:pay}; {not: a placeholder}"
    assert compiled.placeholders == ()


def test_literal_text_and_placeholders_alternate_in_the_order_written() -> None:
    compiled = template("Hello {{request.body/name}}, session {{ session }}!")
    assert [p if isinstance(p, str) else p.written for p in compiled.parts] == [
        "Hello ",
        "{{request.body/name}}",
        ", session ",
        "{{ session }}",
        "!",
    ]
    assert compiled.constant is None
    assert compiled.whole is None


def test_a_string_that_is_one_placeholder_is_a_whole_value() -> None:
    assert template("{{request.body/n}}").whole is not None
    assert template(" {{request.body/n}}").whole is None


def test_a_backslash_before_the_braces_writes_them_literally() -> None:
    assert template(r"\{{session}}").constant == "{{session}}"
    assert text_of(r"\\{{session}}", request(session_name="S1")) == "\\S1"
    assert text_of(r"C:\dir\{{session}}", request(session_name="S1")) == r"C:\dir{{session}}"
    assert template(r"a\b \{ c\\d").constant == r"a\b \{ c\\d"


def test_closing_braces_outside_a_placeholder_are_text() -> None:
    rendered = text_of('{"a": {"b": {{request.body/n}}}}', request({"n": 2}))
    assert rendered == '{"a": {"b": 2}}'


def test_a_json_answer_without_placeholders_is_the_bytes_reply_json_writes() -> None:
    for value in ("{a: 1, b: [x, 2.5, null, true], c: {}}", "[]", "'text'", "'\\{{x}} é'"):
        r = reader_of(f"json: {value}\n")
        compiled = compile_json(r, r.doc.data["json"], ("json",))
        assert compiled is not None
        literal = r.doc.data["json"]
        if isinstance(literal, str):
            literal = literal.replace("\\{{", "{{")
        assert compiled.constant == json.dumps(literal).encode()


def test_a_templated_json_answer_keeps_reply_json_spacing_around_its_holes() -> None:
    source = request({"n": 1})
    rendered = json_template("{a: [1, '{{request.body/n}}'], b: {c: x}}").render(Reading(source))
    assert rendered == b'{"a": [1, 1], "b": {"c": "x"}}'


def test_keys_that_yaml_reads_as_numbers_or_null_are_written_as_json_writes_them() -> None:
    rendered = json_template("{1: '{{session}}', null: 2, false: [], 2.5: x}").render(
        Reading(request())
    )
    assert rendered == json.dumps({1: "default", None: 2, False: [], 2.5: "x"}).encode()


# -- problems at load, positioned ----------------------------------------------------------


PROBLEMS = [
    pytest.param(
        "{{sesion}}",
        10,
        "a placeholder name: request.body/POINTER",
        "'{{sesion}}'",
        "did you mean 'session'?",
        id="unknown-name",
    ),
    pytest.param(
        "{{request.headers.X-Id}}",
        10,
        "a placeholder name",
        "'{{request.headers.X-Id}}'",
        "did you mean 'request.header.X-Id'?",
        id="misspelt-family",
    ),
    pytest.param(
        "{{reqest.body/x}}",
        10,
        "a placeholder name",
        "'{{reqest.body/x}}'",
        "did you mean 'request.body/x'?",
        id="misspelt-body",
    ),
    pytest.param(
        "go to {{base_url}}",
        16,
        "a placeholder name",
        "'{{base_url}}'",
        "single braces: write {base_url}",
        id="server-placeholder",
    ),
    pytest.param(
        "{{uuid}}",
        10,
        "a placeholder name",
        "'{{uuid}}'",
        "write {{id}}",
        id="other-tools-habit",
    ),
    pytest.param(
        "{{request.body.input.text}}",
        10,
        "a JSON Pointer right after request.body",
        "'{{request.body.input.text}}'",
        "did you mean 'request.body/input/text'?",
        id="dotted-pointer",
    ),
    pytest.param(
        "{{request.body/a~2b}}",
        10,
        "a JSON Pointer after request.body",
        "'/a~2b'",
        "~0 (for ~) or ~1 (for /)",
        id="malformed-pointer",
    ),
    pytest.param(
        "x {{session",
        12,
        "'}}' closing the placeholder",
        "'{{session' and the end of the string",
        "a literal {{ is written \\{{",
        id="unclosed",
    ),
    pytest.param(
        "{{request.body/{{session}}}}",
        25,
        "'}}' closing the placeholder before another '{{'",
        "'{{request.body/{{session}}' (a placeholder inside a placeholder)",
        "placeholders do not nest",
        id="nested",
    ),
    pytest.param(
        '{{request.body/x | default "{{session}}"}}',
        38,
        "a default without placeholders",
        "'{{session}}\"}}' inside the default",
        "nothing in it is filled in",
        id="placeholder-in-default",
    ),
    pytest.param(
        "{{{request.body/x}}}",
        10,
        "'{{' and a placeholder name",
        "'{{{request.body/x}}' (three braces)",
        "Handlebars' {{{name}}} is {{name}}",
        id="triple-braces",
    ),
    pytest.param("a {{ }}", 12, "a placeholder name", "'{{ }}' (nothing in it)", "", id="empty"),
    pytest.param(
        "{{session x}}",
        10,
        "{{session}} without arguments",
        "'{{session x}}'",
        "only random.int takes arguments",
        id="arguments",
    ),
    pytest.param(
        "{{random.int 9 1}}",
        10,
        "random.int LOW HIGH: two whole numbers, LOW at most HIGH",
        "'{{random.int 9 1}}'",
        "{{random.int 1 100}}",
        id="random-bounds-reversed",
    ),
    pytest.param(
        "{{random.int 1 ten}}",
        10,
        "random.int LOW HIGH",
        "'{{random.int 1 ten}}'",
        "{{random.int 1 100}}",
        id="random-bound-not-a-number",
    ),
    pytest.param(
        "{{random.int 1 99999999999999999}}",
        10,
        "random.int LOW HIGH",
        "'{{random.int 1 99999999999999999}}'",
        "{{random.int 1 100}}",
        id="random-bound-too-large",
    ),
    pytest.param(
        '{{id | default "x"}}',
        10,
        "no default: id always has a value",
        "'{{id | default \"x\"}}'",
        "write {{id}}",
        id="default-never-used",
    ),
    pytest.param(
        "{{request.query.q | default none}}",
        10,
        "a default: a string in double quotes",
        "'none' in",
        'write default "none" (in double quotes)',
        id="unquoted-default",
    ),
    pytest.param(
        '{{request.query.q | defualt "x"}}',
        10,
        "'| default VALUE' after the name",
        "'{{request.query.q | defualt",
        "did you mean 'default'?",
        id="misspelt-filter",
    ),
    pytest.param(
        "{{request.header.}}",
        10,
        "a header name",
        "'{{request.header.}}'",
        "",
        id="empty-header-name",
    ),
    pytest.param(
        "{{request.path.1st}}",
        10,
        "request.path.NAME, a path variable's name",
        "'{{request.path.1st}}'",
        "/orders/<id> has request.path.id",
        id="bad-path-variable",
    ),
    pytest.param(
        "{{__import__('os').system('id')}}",
        10,
        "a placeholder name",
        "\"{{__import__('os')",
        "",
        id="code",
    ),
]


@pytest.mark.parametrize(("written", "column", "expected", "found", "hint"), PROBLEMS)
def test_each_mistake_is_a_problem_at_its_placeholder(
    written: str, column: int, expected: str, found: str, hint: str
) -> None:
    # The string's quote is at column 9 of line 2: the placeholder's column is 10 plus
    # its place in the string.
    document = "name: t\ntext:   '" + written.replace("'", "''") + "'\n"
    if "'" in written:  # an escape before it: the problem is placed at the string
        column = 9
    [problem] = text_problems(document, "text")
    assert_problem(problem, "text", 2, column, expected, found, hint)


def test_every_problem_in_a_string_is_reported() -> None:
    problems = text_problems(
        "text: '{{sesion}} and {{request.body/~}} and {{now.epoch}}'\n", "text"
    )
    assert [(p.line, p.column) for p in problems] == [(1, 8), (1, 23), (1, 46)]
    assert "did you mean 'now.epoch_ms'?" in problems[2].hint


@pytest.mark.parametrize(
    ("document", "line", "column"),
    [
        pytest.param("text: x {{sesion}}\n", 1, 9, id="plain"),
        pytest.param('text: "x {{sesion}}"\n', 1, 10, id="double-quoted"),
        pytest.param("text: |\n  first\n  x {{sesion}}\n", 3, 5, id="block"),
        pytest.param('text: "\\t {{sesion}}"\n', 1, 7, id="escape-before: at the string"),
        pytest.param("text: >\n  first\n  x {{sesion}}\n", 1, 7, id="folded: at the string"),
    ],
)
def test_a_problem_points_at_the_placeholder_where_the_file_shows_it(
    document: str, line: int, column: int
) -> None:
    [problem] = text_problems(document, "text")
    assert (problem.file, problem.line, problem.column) == ("s.yaml", line, column)


def test_a_problem_in_a_json_answer_is_at_its_path_in_the_document() -> None:
    document = """\
    json:
      result:
        items: [one, "{{request.body/x}}", "{{sesion}}"]
    """
    [problem] = json_problems(document)
    assert_problem(
        problem, "json.result.items[2]", 3, 41, "a placeholder name", "'{{sesion}}'", "session"
    )


def test_a_placeholder_in_a_key_is_refused_and_an_escaped_key_is_literal() -> None:
    [problem] = json_problems("json:\n  '{{request.body/k}}': 1\n")
    assert_problem(
        problem,
        "json.{{request.body/k}}",
        2,
        3,
        "a key without placeholders",
        "'{{request.body/k}}' in a key",
        "keys are written as they are",
    )
    assert json_of("{'\\{{k}}': '{{session}}'}", request()) == {"{{k}}": "default"}


def test_a_json_answer_with_nan_is_a_problem_as_it_is_without_placeholders() -> None:
    [problem] = json_problems("json: {a: .nan, b: '{{session}}'}\n")
    assert problem.path == "json.a"
    assert problem.expected == "JSON values (no .nan or .inf)"


# -- what each placeholder reads ----------------------------------------------------------


def test_each_value_of_the_request_and_the_run() -> None:
    source = request(
        {"input": {"text": "hola", "a/b": 1, "m~n": 2}, "items": ["x", "y"]},
        headers={"X-Request-Id": "r-1", "Accept": "a", "accept": "b"},
        query_params={"q": ["first", "second"]},
        path_params={"order": "42"},
        skill="echo",
        session_name="S1",
        attempt_number=3,
        rng=random.Random(7),
    )
    assert json_of(
        """{
        text: '{{request.body/input/text}}', slash: '{{request.body/input/a~1b}}',
        tilde: '{{request.body/input/m~0n}}', item: '{{request.body/items/1}}',
        header: '{{request.header.x-request-id}}', first_header: '{{request.header.ACCEPT}}',
        query: '{{request.query.q}}', path: '{{request.path.order}}', skill: '{{skill.id}}',
        session: '{{session}}', attempt: '{{attempt}}', now: '{{now}}',
        ms: '{{now.epoch_ms}}', dice: '{{random.int 1 6}}'}""",
        source,
    ) == {
        "text": "hola",
        "slash": 1,
        "tilde": 2,
        "item": "y",
        "header": "r-1",
        "first_header": "a",
        "query": "first",
        "path": "42",
        "skill": "echo",
        "session": "S1",
        "attempt": 3,
        "now": "2026-01-01T12:00:00.000Z",
        "ms": NOON,
        "dice": random.Random(7).randint(1, 6),
    }


def test_the_whole_body_is_the_pointer_to_its_root() -> None:
    assert json_of("{echo: '{{request.body}}'}", request({"a": [1]})) == {"echo": {"a": [1]}}
    assert text_of("got {{request.body}}", request({"a": [1, "é"]})) == 'got {"a":[1,"é"]}'


@pytest.mark.parametrize(
    "body",
    [
        '{"t": "é"}'.encode(),
        b"\xef\xbb\xbf" + '{"t": "é"}'.encode(),
        '{"t": "é"}'.encode("utf-16"),
        '{"t": "é"}'.encode("utf-32-le"),
    ],
    ids=["utf-8", "utf-8-bom", "utf-16", "utf-32"],
)
def test_a_body_is_read_as_json_as_a_case_reads_it(body: bytes) -> None:
    assert text_of("{{request.body/t}}", request(body)) == "é"


def test_the_time_has_its_milliseconds_and_is_read_once_per_answer() -> None:
    ticks = iter([NOON + 7, NOON + 999_999])
    source = request(clock_ms=lambda: next(ticks))
    assert text_of("{{now}} {{now.epoch_ms}} {{now}}", source) == (
        f"2026-01-01T12:00:00.007Z {NOON + 7} 2026-01-01T12:00:00.007Z"
    )


def test_answers_in_one_millisecond_read_one_time_and_the_next_millisecond_a_new_one() -> None:
    # (the text is kept per millisecond and per second: each must still move with the clock)
    read = [NOON + 5, NOON + 5, NOON + 6, NOON + 1006, NOON + 5, NOON + 86_400_000]
    texts = [text_of("{{now}}", request(clock_ms=lambda ms=ms: ms)) for ms in read]
    assert texts == [
        "2026-01-01T12:00:00.005Z",
        "2026-01-01T12:00:00.005Z",
        "2026-01-01T12:00:00.006Z",
        "2026-01-01T12:00:01.006Z",
        "2026-01-01T12:00:00.005Z",
        "2026-01-02T12:00:00.000Z",
    ]


def test_an_answer_has_one_fresh_id_in_its_body_and_headers_and_the_next_a_new_one() -> None:
    source = request(rng=random.Random(1))
    body, location = json_template("{id: '{{id}}'}"), template("/orders/{{id}}")
    first = Reading(source)
    first_body, first_location = body.render(first), location.header(first)
    second_body = body.render(Reading(source))
    assert isinstance(first_body, bytes)
    assert isinstance(second_body, bytes)
    first_id, second_id = json.loads(first_body)["id"], json.loads(second_body)["id"]
    assert first_location == f"/orders/{first_id}"
    assert second_id != first_id
    assert str(uuid.UUID(second_id)) == second_id
    assert uuid.UUID(second_id).version == 4


def test_a_fresh_id_is_a_version_4_uuid_made_of_the_generators_bits() -> None:
    drawn = random.Random(4)
    for bits in [0, 2**128 - 1, *(drawn.getrandbits(128) for _ in range(500))]:
        assert uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


def test_random_numbers_are_new_draws_within_their_bounds() -> None:
    drawn = text_of(" ".join(["{{random.int -2 2}}"] * 50), request(rng=random.Random(3)))
    assert isinstance(drawn, str)
    numbers = [int(n) for n in drawn.split()]
    assert set(numbers) == {-2, -1, 0, 1, 2}


def test_the_same_seed_renders_the_same_ids_and_numbers() -> None:
    answer = "{id: '{{id}}', n: '{{random.int 1 1000000}}', m: '{{random.int 1 1000000}}'}"

    def run(seed: int) -> list[Any]:
        source = request(rng=random.Random(seed))
        return [json_of(answer, source) for _ in range(3)]

    assert run(28) == run(28)
    assert run(28) != run(29)


# -- types: a whole value keeps its own, text is text -------------------------------------


BODY = {"n": 3, "f": 2.5, "ok": True, "none": None, "obj": {"a": [1, "é"]}, "s": "3"}


@pytest.mark.parametrize(
    ("pointer", "whole", "inside"),
    [
        ("/n", 3, "<3>"),
        ("/f", 2.5, "<2.5>"),
        ("/ok", True, "<true>"),
        ("/none", None, "<null>"),
        ("/obj", {"a": [1, "é"]}, '<{"a":[1,"é"]}>'),
        ("/s", "3", "<3>"),
    ],
)
def test_a_whole_value_keeps_its_json_type_and_inside_a_string_it_is_text(
    pointer: str, whole: Any, inside: str
) -> None:
    rendered = json_of(
        f"{{whole: '{{{{request.body{pointer}}}}}', inside: '<{{{{request.body{pointer}}}}}>'}}",
        request(BODY),
    )
    assert rendered == {"whole": whole, "inside": inside}
    assert text_of(f"<{{{{request.body{pointer}}}}}>", request(BODY)) == inside


def test_numbers_of_the_run_are_numbers_as_whole_values() -> None:
    rendered = json_of("['{{attempt}}', '{{now.epoch_ms}}', '{{random.int 5 5}}']", request())
    assert rendered == [1, NOON, 5]


# -- defaults, and what cannot be rendered --------------------------------------------------


def test_a_default_stands_in_for_a_missing_value_and_keeps_its_type() -> None:
    rendered = json_of(
        """{lang: '{{request.body/lang | default "en"}}', n: '{{request.query.n|default 10}}',
        h: '{{request.header.x-h | default null}}', p: 'p={{request.path.id | default false}}',
        skill: '{{skill.id | default "route"}}', there: '{{request.body/lang | default "en"}}x'}""",
        request({"other": 1}),
    )
    assert rendered == {
        "lang": "en",
        "n": 10,
        "h": None,
        "p": "p=false",
        "skill": "route",
        "there": "enx",
    }
    assert json_of("['{{request.body/lang | default \"en\"}}']", request({"lang": "fr"})) == ["fr"]


def test_a_default_stands_in_when_the_body_is_not_json() -> None:
    assert text_of('{{request.body/x | default "none"}}', request(b"plain text")) == "none"


@pytest.mark.parametrize(
    ("written", "source", "why"),
    [
        ("{{request.body/input/text}}", request(b"plain text"), "the body is not JSON"),
        ("{{request.body/input/text}}", request(b""), "the body is empty"),
        ("{{request.body/input/text}}", request(b"\xff\xfe{"), "the body is not JSON"),
        (
            "{{request.body/input/text}}",
            request({"input": {}}),
            "the body has nothing at /input/text",
        ),
        (
            "{{request.body/items/01}}",
            request({"items": [1, 2]}),
            "the body has nothing at /items/01",
        ),
        ("{{request.body/__class__}}", request({}), "the body has nothing at /__class__"),
        ("{{request.header.x-id}}", request(), "the request has no x-id header"),
        ("{{request.query.q}}", request(), "the request has no query parameter q"),
        ("{{request.path.id}}", request(), "the path has no variable id"),
        ("{{skill.id}}", request(), "a free route answers, not a skill"),
    ],
)
def test_a_missing_value_without_a_default_is_not_rendered_and_says_which_and_why(
    written: str, source: Values, why: str
) -> None:
    failed = text_of(f"answer: {written}", source)
    assert failed == NotRendered(written, "s.yaml:1:7 (text)", why)
    assert str(failed) == f"s.yaml:1:7 (text): {written} could not be rendered: {why}"


def test_a_json_answer_that_cannot_be_rendered_names_the_placeholder_at_its_path() -> None:
    compiled = json_template("{result: {text: '{{request.body/input/text}}'}}")
    failed = compiled.render(Reading(request(b"<xml/>")))
    assert isinstance(failed, NotRendered)
    assert failed.details() == {
        "placeholder": "{{request.body/input/text}}",
        "at": "s.yaml:1:23 (json.result.text)",
        "why": "the body is not JSON",
    }


def test_a_body_too_deep_or_with_an_infinite_number_is_not_rendered_not_raised() -> None:
    deep = request(b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(text_of("{{request.body}}", deep), NotRendered)
    huge = request(b'{"n": 1e999}')
    failed = json_template("{n: '{{request.body/n}}'}").render(Reading(huge))
    assert isinstance(failed, NotRendered)
    assert "infinite" in failed.why


# -- the attacks ----------------------------------------------------------------------------


def test_a_rendered_value_is_never_read_as_a_template() -> None:
    source = request({"input": {"text": "{{session}} {{request.header.authorization}} \\{{id}}"}})
    expected = "{{session}} {{request.header.authorization}} \\{{id}}"
    assert text_of("{{request.body/input/text}}", source) == expected
    assert json_of("{text: '{{request.body/input/text}}'}", source) == {"text": expected}
    assert json_of("{text: 'said {{request.body/input/text}}'}", source) == {
        "text": f"said {expected}"
    }


HUNDRED_TIMES = " ".join(["{{request.body/big}}"] * 100)


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(lambda r: template(HUNDRED_TIMES).text(r), id="text"),
        pytest.param(lambda r: template(HUNDRED_TIMES).header(r), id="header"),
        pytest.param(
            lambda r: json_template(
                "['" + "', '".join(["{{request.body/big}}"] * 100) + "']"
            ).render(r),
            id="json-whole-values",
        ),
        pytest.param(lambda r: json_template(f"['{HUNDRED_TIMES}']").render(r), id="json-text"),
    ],
)
def test_a_huge_expansion_stops_at_the_limit_before_it_is_built(
    render: Callable[[Reading], object],
) -> None:
    source = request({"big": "x" * (10 * 1024 * 1024)})  # a 10 MB string, asked for 100 times
    tracemalloc.start()
    try:
        reading = Reading(source)
        reading.json()  # the request's body, parsed: what it holds is the request's, not ours
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        failed = render(reading)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(failed, NotRendered)
    assert failed.placeholder == "{{request.body/big}}"
    assert failed.why == f"the answer would be larger than {MAX_RENDERED_BYTES} bytes"
    assert peak - before < 1024 * 1024  # not one copy of the 10 MB value, let alone 100


def test_a_huge_object_expansion_stops_while_it_is_written() -> None:
    source = request({"items": ["y" * 1000] * 2000})  # 2 MB once written
    failed = json_template("['{{request.body/items}}']").render(Reading(source))
    assert isinstance(failed, NotRendered)
    assert "larger than" in failed.why


def test_the_limit_counts_the_whole_answer_literal_text_included() -> None:
    compiled = template("0123456789{{session}}")
    assert compiled.text(Reading(request(session_name="ab"), limit=12)) == "0123456789ab"
    over = compiled.text(Reading(request(session_name="abc"), limit=12))
    assert isinstance(over, NotRendered)
    assert over.placeholder == "{{session}}"
    literal = template("0123456789").text(Reading(request(), limit=5))
    assert isinstance(literal, NotRendered)
    assert literal.placeholder == "(the answer)"


@pytest.mark.parametrize(
    "value",
    ["a\r\nSet-Cookie: admin=1", "a\nb", "nul\x00", "bell\x07", "delete\x7f", "snow ☃"],
)
def test_a_header_never_carries_what_would_break_it(value: str) -> None:
    failed = template("id-{{request.body/v}}").header(Reading(request({"v": value})))
    assert isinstance(failed, NotRendered)
    assert failed.placeholder == "{{request.body/v}}"
    assert failed.why == "the value holds characters a header cannot carry"


def test_a_header_carries_visible_text_tabs_and_latin_1() -> None:
    rendered = template("id-{{request.body/v}}").header(Reading(request({"v": "a b\tcé"})))
    assert rendered == "id-a b\tcé"


def test_a_text_answer_is_utf_8_and_a_lone_surrogate_from_the_body_is_replaced() -> None:
    source = request(b'{"v": "caf\\u00e9 \\ud800"}')
    assert template("{{request.body/v}}!").body(Reading(source)) == "café ?!".encode()


def test_placeholders_are_plain_frozen_data() -> None:
    [placeholder] = template("{{request.body/a | default 1}}").placeholders
    assert isinstance(placeholder, Placeholder)
    assert (placeholder.has_default, placeholder.default) == (True, 1)
    assert placeholder == template("{{request.body/a | default 1}}").whole
