"""Free routes' paths match as Werkzeug's rules matched them, without Werkzeug.

mockskill.scenario.routes parses Werkzeug's rule syntax and walks the same
state machine (Map(strict_slashes=False, merge_slashes=False)), so that a
scenario written for the Werkzeug router answers the same requests. The
differential test holds it to Werkzeug itself (a test dependency here, never
imported on the serve path) over many maps, paths and methods.
"""

from __future__ import annotations

import random

import pytest
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule

from mockskill.scenario.routes import Router, RuleError, parse

RULES = [
    "/status",
    "/orders/<int:id>",
    "/orders/<id>",
    "/orders/new",
    "/orders/<int(min=5):id>/items",
    "/files/<path:rest>",
    "/files/<path:rest>/edit",
    "/a/<any(x, y, 'z,w'):k>",
    "/a/<string(length=2):s>",
    "/u/<uuid:u>",
    "/f/<float:x>",
    "/f/<float(signed=True):x>/neg",
    "/d/<int(fixed_digits=3):n>",
    "/b/",
    "/b/<x>/",
    "/x-<a>-<int:b>",
    "/p/<path:rest>/",
    "/m/<int(max=10):n>",
    "/m/<n>",
    "/<lang>/about",
    "/en/<page>",
    "/s/<int(signed=True):n>",
]
PATHS = [
    *("/status", "/status/", "//status", "/status//", "/", ""),
    *("/orders/42", "/orders/42/", "/orders/abc", "/orders/new", "/orders//42", "/orders/42//"),
    *("/orders/7/items", "/orders/3/items", "/files/a/b/c", "/files/a/b/edit", "/files/"),
    *("/files/x/", "/files//x", "/a/x", "/a/z,w", "/a/q", "/a/qq", "/a/qqq"),
    *("/u/12345678-1234-1234-1234-123456789abc", "/u/1234", "/f/1.5", "/f/1", "/f/-1.5/neg"),
    *("/d/012", "/d/12", "/d/0123", "/b", "/b/", "/b/k", "/b/k/", "/x-1-2", "/x-a-b"),
    *("/p/a/b/", "/p/a/b", "/m/5", "/m/50", "/en/about", "/fr/about", "/en/x", "/s/-3"),
    "/ünï/about",
]
METHODS = [["GET"], ["POST"], ["GET", "PUT"], ["DELETE"]]


def werkzeug_match(rules: list[tuple[str, list[str]]], path: str, method: str) -> int | None:
    mapped = Map(
        [Rule(rule, methods=methods, endpoint=i) for i, (rule, methods) in enumerate(rules)],
        strict_slashes=False,
        merge_slashes=False,
    ).bind("mockskill.local")
    try:
        return int(mapped.match(path, method=method)[0])
    except HTTPException:
        return None


def test_every_map_matches_what_werkzeugs_matched() -> None:
    draw = random.Random(13)
    differences = []
    for _ in range(60):
        chosen = draw.sample(RULES, draw.randint(1, 8))
        rules = [(rule, draw.choice(METHODS)) for rule in chosen]
        router = Router((rule, methods, i) for i, (rule, methods) in enumerate(rules))
        mapped = Map(
            [Rule(rule, methods=methods, endpoint=i) for i, (rule, methods) in enumerate(rules)],
            strict_slashes=False,
            merge_slashes=False,
        ).bind("mockskill.local")
        for path in PATHS:
            for method in ("GET", "HEAD", "POST", "PUT", "DELETE"):
                try:
                    expected: int | None = int(mapped.match(path, method=method)[0])
                except HTTPException:
                    expected = None
                if router.match(path, method) != expected:
                    differences.append((rules, path, method, expected))
    assert differences == []


@pytest.mark.parametrize(
    ("rules", "path", "method", "matched"),
    [
        pytest.param(["/orders/<id>", "/orders/new"], "/orders/new", "GET", 1, id="static-first"),
        pytest.param(["/n/<x>", "/n/<int:x>"], "/n/7", "GET", 1, id="int-before-string"),
        pytest.param(["/n/<path:x>", "/n/<x>"], "/n/7", "GET", 1, id="string-before-path"),
        pytest.param(["/orders/<int:id>"], "/orders/42/", "GET", 0, id="trailing-slash-optional"),
        pytest.param(["/list/"], "/list", "GET", 0, id="rule-slash-optional"),
        pytest.param(["/f/<path:rest>"], "/f/a/b/c", "GET", 0, id="path-takes-slashes"),
        pytest.param(["/x"], "/x", "HEAD", 0, id="head-with-get"),
        pytest.param(["/x"], "/x", "POST", None, id="method-not-taken"),
        pytest.param(["/d/<int(fixed_digits=3):n>"], "/d/12", "GET", None, id="digits-checked"),
        pytest.param(["/m/<int(max=9):n>", "/m/<n>"], "/m/50", "GET", None, id="range-no-retry"),
        pytest.param(["/a/<any(on, off):s>"], "/a/on", "GET", 0, id="any-of-names"),
        pytest.param(["/a/<string(length=2):s>"], "/a/abc", "GET", None, id="string-length"),
    ],
)
def test_a_path_matches_the_rule_werkzeug_chose(
    rules: list[str], path: str, method: str, matched: int | None
) -> None:
    routed = [(rule, ["GET"], i) for i, rule in enumerate(rules)]
    assert Router(routed).match(path, method) == matched
    assert werkzeug_match([(r, m) for r, m, _ in routed], path, method) == matched


def test_a_rule_for_any_method_matches_on_the_path_alone() -> None:
    router = Router([("/skills/<id>", None, True)])
    assert router.match("/skills/translate", "DELETE") is True
    assert router.match("/skills/translate/invoke") is None


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("orders", "must start with a slash"),
        ("/orders/<int:id", "malformed url rule: '/orders/<int:id'"),
        ("/orders/<money:id>", "the converter 'money' does not exist"),
        ("/a/<x>/<x>", "duplicate argument 'x'"),
        ("/a/<int(size=1):x>", "the converter 'int' got an unexpected keyword argument 'size'"),
        ("/a/<string(length=x):y>", "the converter 'string': invalid literal for int()"),
        ("/a/<None>", "a variable cannot be named 'None'"),
        ("/a/<any(1, 2):x>", "the converter 'any': takes names, not 1"),
        ("/a/<int(min='a'):x>", "the converter 'int': min must be a number, not 'a'"),
    ],
)
def test_a_path_that_is_no_rule_says_why(rule: str, said: str) -> None:
    with pytest.raises(RuleError) as raised:
        parse(rule)
    assert said in str(raised.value)


ARGUMENTS = (
    "",
    "2",
    "length=2",
    "minlength=1, maxlength=8",
    "min=1,max=9",
    "fixed_digits=4",
    "signed=True",
    "signed=False, min=-3",
    "1.5",
    "1-5",
    "12x",
    "'a', 'b'",
    '"a b", u"c", r\'d\'',
    "a.b, c_d",
    "None",
    "x=",
    "=3",
    "a b",
    "'unclosed",
    "min='a'",
    "  spaced = 3 ,  ",
)


@pytest.mark.parametrize("text", ARGUMENTS)
def test_a_converters_arguments_read_as_werkzeug_reads_them(text: str) -> None:
    from werkzeug.routing.rules import parse_converter_args

    from mockskill.scenario.routes import _arguments

    try:
        expected: object = parse_converter_args(text)
    except ValueError:
        expected = ValueError
    try:
        got: object = _arguments(text)
    except RuleError:
        got = ValueError
    if expected is not ValueError:
        args, kwargs = expected  # type: ignore[misc]
        expected = (tuple(args), dict(kwargs))
    assert got == expected


def test_every_rule_a_path_matches_is_what_each_rule_alone_matches() -> None:
    """``every`` walks the machine once, every branch taken: it must find the rules that a
    router of each rule alone, for any method, finds (what a near miss says of a route)."""
    draw = random.Random(26)
    differences = []
    for _ in range(60):
        rules = draw.sample(RULES, draw.randint(1, 12))
        router = Router((rule, draw.choice(METHODS), i) for i, rule in enumerate(rules))
        alone = [Router([(rule, None, i)]) for i, rule in enumerate(rules)]
        for path in PATHS:
            expected = [i for i, one in enumerate(alone) if one.match(path) is not None]
            if router.every(path) != expected:
                differences.append((rules, path, router.every(path), expected))
    assert differences == []


def test_every_rule_given_twice_is_found_twice_in_the_order_given() -> None:
    router = Router(
        [("/o/<int:id>", ["GET"], "a"), ("/o/<id>", ["POST"], "b"), ("/o/<int:id>", ["PUT"], "c")]
    )
    assert router.every("/o/7") == ["a", "b", "c"]
    assert router.every("/o/x") == ["b"]
    assert router.every("/p") == []
