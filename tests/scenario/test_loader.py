"""Loading scenarios: files and folders, scenarios, skills, routes, and uniqueness."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from conftest import assert_problem

from mockskill import ScenarioError, bundled_path, load_data, load_paths, load_text
from mockskill.protocol.catalog import SERVED_CODES
from mockskill.scenario.loader import load_any
from mockskill.scenario.model import ScenarioSet
from mockskill.scenario.problems import Problem


def problems_in(text: str, name: str = "s.yaml") -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), name)
    return list(caught.value.problems)


def path_problems(*paths: Path) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_paths(paths)
    return list(caught.value.problems)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# -- every rule of scenarios, skills and routes -------------------------------------

BAD_SCENARIOS = [
    # (yaml, path, line, column, expected, found, hint)
    pytest.param(
        "skills: [{id: a}]\nskils: []\n",
        "skils",
        2,
        1,
        "a known key",
        "unknown key 'skils'",
        "did you mean 'skills'?",
        id="unknown-scenario-key",
    ),
    pytest.param(
        "skills:\n  - id: a\n    invokee: {json: 1}\n",
        "skills[0].invokee",
        3,
        5,
        "a known key",
        "unknown key 'invokee'",
        "did you mean 'invoke'?",
        id="unknown-skill-key",
    ),
    pytest.param(
        "routes:\n  - path: /x\n    methods: GET\n    steps: [{json: 1}]\n",
        "routes[0].methods",
        3,
        5,
        "a known key",
        "unknown key 'methods'",
        "did you mean 'method'?",
        id="unknown-route-key",
    ),
    pytest.param(
        "skills: [{id: a}]\ncolour: red\n",
        "colour",
        2,
        1,
        "a known key",
        "unknown key 'colour'",
        "allowed here: name, description",
        id="unknown-key-without-a-near-one-lists-the-allowed",
    ),
    pytest.param(
        "name: x\n",
        "(top level)",
        1,
        1,
        "at least one of skills, routes or proxy",
        "a mapping with keys name",
        "",
        id="neither-skills-nor-routes",
    ),
    pytest.param(
        "- id: a\n",
        "(top level)",
        1,
        1,
        "a scenario (a mapping",
        "a list of 1 item",
        "",
        id="scenario-not-a-mapping",
    ),
    pytest.param(
        "null\n",
        "(top level)",
        1,
        1,
        "a scenario (a mapping",
        "null",
        "",
        id="scenario-null",
    ),
    pytest.param(
        "skills:\n  id: a\n",
        "skills",
        2,
        3,
        "a list of skills",
        "a mapping with keys id",
        "",
        id="skills-not-a-list",
    ),
    pytest.param(
        "routes: /x\n",
        "routes",
        1,
        9,
        "a list of routes",
        "'/x' (a string)",
        "",
        id="routes-not-a-list",
    ),
    pytest.param(
        "name: my scenario\nskills: [{id: a}]\n",
        "name",
        1,
        7,
        "a name of letters, digits",
        "'my scenario' (a string)",
        "",
        id="bad-scenario-name",
    ),
    pytest.param(
        "description: [a]\nskills: [{id: a}]\n",
        "description",
        1,
        14,
        "a string",
        "a list of 1 item",
        "",
        id="description-not-a-string",
    ),
    pytest.param(
        "skills:\n  - translate\n",
        "skills[0]",
        2,
        5,
        "a skill (a mapping",
        "'translate' (a string)",
        "",
        id="skill-not-a-mapping",
    ),
    pytest.param(
        "skills:\n  - invoke: {json: 1}\n",
        "skills[0]",
        2,
        5,
        "the key 'id'",
        "it missing",
        "",
        id="skill-without-id",
    ),
    pytest.param(
        "skills:\n  - id: 42\n",
        "skills[0].id",
        2,
        9,
        "a string",
        "42 (an integer)",
        "",
        id="skill-id-not-a-string",
    ),
    pytest.param(
        "skills:\n  - id: a/b\n",
        "skills[0].id",
        2,
        9,
        "a name of letters, digits and . _ ~ -",
        "'a/b' (a string)",
        "",
        id="skill-id-with-slash",
    ),
    pytest.param(
        "skills:\n  - id: -a\n",
        "skills[0].id",
        2,
        9,
        "a name of letters, digits",
        "'-a' (a string)",
        "",
        id="skill-id-starting-with-dash",
    ),
    pytest.param(
        "skills:\n  - id: a\n    descriptor: [1]\n",
        "skills[0].descriptor",
        3,
        17,
        "a mapping merged over the default descriptor",
        "a list of 1 item",
        "use raw_descriptor",
        id="descriptor-not-a-mapping",
    ),
    pytest.param(
        "skills:\n  - id: a\n    descriptor: {version: .nan}\n",
        "skills[0].descriptor",
        3,
        17,
        "JSON values (no .nan or .inf)",
        "Out of range float values",
        "",
        id="descriptor-not-json",
    ),
    pytest.param(
        "skills:\n  - id: a\n    descriptor: {}\n    raw_descriptor: {}\n",
        "skills[0].raw_descriptor",
        4,
        5,
        "descriptor (merged over the default) or raw_descriptor",
        "both",
        "keep one",
        id="descriptor-and-raw-descriptor",
    ),
    pytest.param(
        "skills:\n  - id: a\n    raw_descriptor: [.inf]\n",
        "skills[0].raw_descriptor",
        3,
        21,
        "JSON values (no .nan or .inf)",
        "Out of range float values",
        "",
        id="raw-descriptor-not-json",
    ),
    pytest.param(
        "routes:\n  - steps: [{json: 1}]\n",
        "routes[0]",
        2,
        5,
        "the key 'path'",
        "it missing",
        "",
        id="route-without-path",
    ),
    pytest.param(
        "routes:\n  - path: /x\n",
        "routes[0]",
        2,
        5,
        "the key 'steps'",
        "it missing",
        "",
        id="route-without-steps",
    ),
    pytest.param(
        "routes:\n  - path: x\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path starting with /",
        "'x' (a string)",
        "",
        id="route-path-without-slash",
    ),
    pytest.param(
        "routes:\n  - path: /skills\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path outside /skills",
        "'/skills' (a string)",
        "/skills belongs to mockskill",
        id="reserved-skills",
    ),
    pytest.param(
        "routes:\n  - path: /skills/extra\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path outside /skills",
        "'/skills/extra' (a string)",
        "/skills belongs to mockskill",
        id="reserved-below-skills",
    ),
    pytest.param(
        "routes:\n  - path: /__admin/reset\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path outside /__admin",
        "'/__admin/reset' (a string)",
        "/__admin belongs to mockskill",
        id="reserved-admin",
    ),
    pytest.param(
        "routes:\n  - path: /orders/<int:id\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path starting with / (Werkzeug rule syntax",
        "'/orders/<int:id' (a string)",
        "malformed url rule",
        id="malformed-werkzeug-rule",
    ),
    pytest.param(
        "routes:\n  - path: /orders/<money:id>\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path starting with / (Werkzeug rule syntax",
        "'/orders/<money:id>' (a string)",
        "converter 'money' does not exist",
        id="unknown-werkzeug-converter",
    ),
    pytest.param(
        "routes:\n  - path: /a/<x>/<x>\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path starting with / (Werkzeug rule syntax",
        "'/a/<x>/<x>' (a string)",
        "duplicate argument 'x'",
        id="werkzeug-rule-with-a-variable-twice",
    ),
    pytest.param(
        "routes:\n  - path: /a/<int(size=1):x>\n    steps: [{json: 1}]\n",
        "routes[0].path",
        2,
        11,
        "a path starting with / (Werkzeug rule syntax",
        "'/a/<int(size=1):x>' (a string)",
        "unexpected keyword argument",
        id="werkzeug-converter-with-a-bad-argument",
    ),
    pytest.param(
        "routes:\n  - path: /x\n    method: FETCH\n    steps: [{json: 1}]\n",
        "routes[0].method",
        3,
        13,
        "an HTTP method or a list of them",
        "'FETCH' (a string)",
        "",
        id="unknown-method",
    ),
    pytest.param(
        "routes:\n  - path: /x\n    method: []\n    steps: [{json: 1}]\n",
        "routes[0].method",
        3,
        13,
        "an HTTP method or a list of them",
        "a list of 0 items",
        "",
        id="no-methods",
    ),
    pytest.param(
        "routes:\n  - path: /x\n    steps: [{json: 1}]\n    end: never\n",
        "routes[0].end",
        4,
        10,
        "one of last, cycle, fail",
        "'never' (a string)",
        "",
        id="route-bad-end-rule",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "column", "expected", "found", "hint"), BAD_SCENARIOS
)
def test_a_bad_scenario_is_one_positioned_problem_saying_what_was_expected_and_found(
    text: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(text)
    assert problem.file == "s.yaml"
    assert_problem(problem, path, line, column, expected, found, hint)


@pytest.mark.parametrize("route_path", ["/skillset", "/admin", "/x/skills", "/orders/<int:id>"])
def test_paths_that_only_look_reserved_are_free_routes(route_path: str) -> None:
    loaded = load_text(f"routes:\n  - path: '{route_path}'\n    steps: [{{json: 1}}]\n")
    assert [r.path for r in loaded.routes] == [route_path]


# -- every problem at once ------------------------------------------------------------


def test_every_independent_mistake_is_reported_at_once_sorted_by_position() -> None:
    text = """\
        name: everything
        skils: []
        skills:
          - id: bad id
            invoke: {error: AUTH_REQUIRD}
          - id: ok
            descriptor: [not, a, mapping]
            invoke:
              - delay: -5
                json: {}
          - id: timeout
            invoke: {error: AUTH_REQUIRED, status: 500}
        routes:
          - path: /skills/mine
            steps: [{text: hi, times: 0}]
        """
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), "all.yaml")
    problems = caught.value.problems
    assert [(p.line, p.path) for p in problems] == [
        (2, "skils"),
        (4, "skills[0].id"),
        (5, "skills[0].invoke.error"),
        (7, "skills[1].descriptor"),
        (9, "skills[1].invoke[0].delay"),
        (12, "skills[2].invoke.status"),
        (14, "routes[0].path"),
        (15, "routes[0].steps[0].times"),
    ]
    assert list(problems) == sorted(problems)
    report = str(caught.value).splitlines()
    assert report[:-1] == [str(p) for p in problems]
    assert report[-1] == "8 problems in 1 file; nothing was loaded."


def test_problems_in_several_files_are_all_reported_and_counted(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "skills: [{id: a, invoke: {times: 0, json: 1}}]\n")
    second = write(tmp_path / "b.yaml", "skills: {id: b}\n")
    problems = path_problems(first, second)
    assert [(p.file, p.path) for p in problems] == [
        (str(first), "skills[0].invoke.times"),
        (str(second), "skills"),
    ]
    with pytest.raises(ScenarioError, match=r"2 problems in 2 files; nothing was loaded\.$"):
        load_paths([first, second])


def test_one_bad_file_stops_the_good_ones_from_loading(tmp_path: Path) -> None:
    good = write(tmp_path / "good.yaml", "skills: [{id: good}]\n")
    bad = write(tmp_path / "bad.yaml", "skills: [{id: bad, invoke: {error: NOPE}}]\n")
    with pytest.raises(ScenarioError) as caught:
        load_paths([good, bad])
    assert {p.file for p in caught.value.problems} == {str(bad)}


# -- uniqueness across files and documents --------------------------------------------


def test_a_skill_id_in_two_files_is_reported_with_both_positions(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "skills:\n  - id: same\n")
    second = write(tmp_path / "b.yaml", "name: b\nskills:\n  - id: other\n  - id: same\n")
    [problem] = path_problems(first, second)
    assert (problem.file, problem.line, problem.column) == (str(second), 4, 5)
    assert problem.path == "skills[1].id"
    assert problem.expected == "a skill id used once"
    assert problem.found == f"'same' again (first at {first}:2:5)"


def test_duplicate_scenario_names_are_reported_at_the_second(tmp_path: Path) -> None:
    text = "name: twin\nskills: [{id: a}]\n---\nname: twin\nskills: [{id: b}]\n"
    [problem] = problems_in(text, "twins.yaml")
    assert (problem.path, problem.line) == ("name", 4)
    assert problem.found == "'twin' again (first at twins.yaml:1:1)"


def test_a_file_stem_that_clashes_with_a_name_is_a_duplicate(tmp_path: Path) -> None:
    first = write(tmp_path / "healthy.yaml", "skills: [{id: a}]\n")
    second = write(tmp_path / "other.yaml", "name: healthy\nskills: [{id: b}]\n")
    [problem] = path_problems(first, second)
    assert problem.file == str(second)
    assert problem.expected == "a scenario name used once"


def test_the_same_method_and_path_twice_is_reported() -> None:
    text = """\
        routes:
          - path: /x
            method: [GET, POST]
            steps: [{json: 1}]
          - path: /y
            steps: [{json: 2}]
          - path: /x
            method: post
            steps: [{json: 3}]
        """
    [problem] = problems_in(text)
    assert (problem.path, problem.line) == ("routes[2].path", 7)
    assert problem.expected == "a method and path used once"
    assert problem.found == "'POST /x' again (first at s.yaml:2:5)"


def test_a_misspelt_key_and_a_duplicate_skill_id_in_one_file_are_reported_together() -> None:
    text = """\
        skills:
          - id: same
            invok: {json: 1}
          - id: same
        """
    problems = problems_in(text)
    assert [(p.path, p.line, p.found) for p in problems] == [
        ("skills[0].invok", 3, "unknown key 'invok'"),
        ("skills[1].id", 4, "'same' again (first at s.yaml:2:5)"),
    ]


def test_a_broken_file_still_clashes_with_another_file_by_name_and_skill_id(
    tmp_path: Path,
) -> None:
    first = write(tmp_path / "a.yaml", "name: shop\nskills:\n  - id: orders\n")
    second = write(
        tmp_path / "b.yaml",
        "name: shop\nskils: []\nskills:\n  - id: orders\n    invoke: {error: NOPE}\n",
    )
    problems = path_problems(first, second)
    assert [(p.file, p.path, p.expected.split(",")[0]) for p in problems] == [
        (str(second), "name", "a scenario name used once"),
        (str(second), "skils", "a known key"),
        (str(second), "skills[0].id", "a skill id used once"),
        (str(second), "skills[0].invoke.error", "one of AUTH_REQUIRED"),
    ]


def test_a_route_with_a_bad_step_still_clashes_by_method_and_path() -> None:
    text = """\
        routes:
          - {path: /x, steps: [{json: 1}]}
          - {path: /x, method: get, steps: [{jsn: 2}]}
        """
    problems = problems_in(text)
    assert [(p.path, p.found) for p in problems] == [
        ("routes[1].path", "'GET /x' again (first at s.yaml:2:5)"),
        ("routes[1].steps[0]", "a mapping with keys jsn"),  # a step needs a body
        ("routes[1].steps[0].jsn", "unknown key 'jsn'"),
    ]


def test_what_is_wrong_in_itself_claims_nothing() -> None:
    text = """\
        name: a
        skills: [{id: "bad id"}, {id: ok}]
        routes: [{path: nope, steps: [json: 1]}, {path: /ok, method: FETCH, steps: [json: 1]}]
        ---
        name: "bad name"
        skills: [{id: "bad id"}]
        routes: [{path: nope, steps: [json: 1]}, {path: /ok, method: FETCH, steps: [json: 1]}]
        """
    problems = problems_in(text)
    assert [p.path for p in problems] == [
        "skills[0].id",
        "routes[0].path",
        "routes[1].method",
        "name",
        "skills[0].id",
        "routes[0].path",
        "routes[1].method",
    ]
    assert not [p for p in problems if "used once" in p.expected]


def test_a_list_of_sources_reports_its_problems_and_its_clashes_together() -> None:
    broken = "name: one\nskills:\n  - id: same\n    invok: {json: 1}\n"
    with pytest.raises(ScenarioError) as caught:
        load_any([broken, {"name": "two", "skills": [{"id": "same"}]}], name="<added>")
    assert [(p.file, p.path, p.found.split(" (")[0]) for p in caught.value.problems] == [
        ("<added>[0]", "skills[0].invok", "unknown key 'invok'"),
        ("<added>[1]", "skills[0].id", "'same' again"),
    ]


def test_a_list_of_sources_checks_a_loaded_set_against_the_rest() -> None:
    loaded = load_text("name: one\nskills: [{id: same}]\n", "one.yaml")
    with pytest.raises(ScenarioError) as caught:
        load_any([loaded, "name: two\nskills: [{id: same}]\nseed: -1\n"])
    assert [(p.path, p.found.split(" (")[0]) for p in caught.value.problems] == [
        ("skills[0].id", "'same' again"),
        ("seed", "-1"),
    ]


def test_the_same_path_with_other_methods_is_fine() -> None:
    text = """\
        routes:
          - path: /x
            steps: [{json: 1}]
          - path: /x
            method: [delete, PUT, put]
            steps: [{json: 2}]
        """
    loaded = load_text(textwrap.dedent(text))
    assert [r.methods for r in loaded.routes] == [("GET",), ("DELETE", "PUT")]
    assert loaded.routes[1].label == "DELETE|PUT /x"


# -- documents and names ---------------------------------------------------------------


def test_a_single_document_is_named_after_the_file_stem() -> None:
    loaded = load_text("skills: [{id: a}]\n", "some/dir/my scenario.yaml")
    [scenario] = loaded.scenarios
    assert scenario.name == "my-scenario"
    assert scenario.file == "some/dir/my scenario.yaml"


def test_an_explicit_name_wins_over_the_file_stem() -> None:
    assert load_text("name: given\nskills: [{id: a}]\n", "x.yaml").scenarios[0].name == "given"


def test_several_documents_are_several_scenarios() -> None:
    text = "name: one\nskills: [{id: a}]\n---\nname: two\nskills: [{id: b}]\n"
    loaded = load_text(text, "multi.yaml")
    assert [(s.name, [k.id for k in s.skills]) for s in loaded.scenarios] == [
        ("one", ["a"]),
        ("two", ["b"]),
    ]
    assert [k.scenario for k in loaded.skills] == ["one", "two"]


def test_each_of_several_documents_needs_a_name() -> None:
    text = "name: one\nskills: [{id: a}]\n---\nskills: [{id: b}]\n"
    [problem] = problems_in(text, "multi.yaml")
    assert (problem.path, problem.line) == ("(top level)", 4)
    assert (problem.expected, problem.found) == ("the key 'name'", "it missing")


def test_empty_documents_do_not_count_as_scenarios() -> None:
    loaded = load_text("---\nskills: [{id: a}]\n---\n", "lonely.yaml")
    assert [s.name for s in loaded.scenarios] == ["lonely"]


@pytest.mark.parametrize(
    "text",
    [pytest.param("", id="empty"), pytest.param("# nothing here\n", id="only-comments")],
)
def test_a_file_without_documents_is_a_problem(text: str) -> None:
    [problem] = problems_in(text, "empty.yaml")
    assert (problem.file, problem.path) == ("empty.yaml", "(file)")
    assert (problem.expected, problem.found) == ("at least one scenario", "nothing")


def test_a_file_without_documents_on_disk_is_a_problem(tmp_path: Path) -> None:
    file = write(tmp_path / "empty.yaml", "# later\n")
    [problem] = path_problems(file)
    assert (problem.file, problem.expected) == (str(file), "at least one scenario")


# -- files and folders -----------------------------------------------------------------


def test_a_missing_path_is_a_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    [problem] = path_problems(missing)
    assert (problem.file, problem.path) == (str(missing), "(file)")
    assert (problem.expected, problem.found) == ("a scenario file or folder", "nothing there")


@pytest.mark.timeout(20)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's")
def test_a_fifo_or_a_device_named_yaml_in_a_folder_is_refused_like_a_missing_file(
    tmp_path: Path,
) -> None:
    write(tmp_path / "good.yaml", "skills: [{id: good}]\n")
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    problems = path_problems(tmp_path)
    assert [(Path(p.file).name, p.path, p.expected, p.found) for p in problems] == [
        ("pipe.yaml", "(file)", "a scenario file or folder", "a FIFO (named pipe) there"),
        ("zero.yaml", "(file)", "a scenario file or folder", "a character device there"),
    ]
    [device] = path_problems(Path("/dev/zero"))  # named itself: not "nothing there"
    assert device.found == "a character device there"


def test_a_folder_without_yaml_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("skills: []\n", encoding="utf-8")
    [problem] = path_problems(tmp_path)
    assert (problem.file, problem.path) == (str(tmp_path), "(folder)")
    assert (problem.expected, problem.found) == ("*.yaml files", "none")


def test_a_folder_is_searched_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", "skills: [{id: b}]\n")
    write(tmp_path / "a" / "c.yml", "skills: [{id: c}]\n")
    write(tmp_path / "a" / "deeper" / "d.yaml", "skills: [{id: d}]\n")
    write(tmp_path / "a.yaml", "skills: [{id: a}]\n")
    write(tmp_path / "ignored.txt", "skills: [{id: x}]\n")
    write(tmp_path / "ignored.json", "{}")
    loaded = load_paths([tmp_path])
    assert [s.id for s in loaded.skills] == ["c", "d", "a", "b"]
    files = [Path(s.file).relative_to(tmp_path).as_posix() for s in loaded.scenarios]
    # sorted part by part: the folder "a" comes before the file "a.yaml"
    assert files == ["a/c.yml", "a/deeper/d.yaml", "a.yaml", "b.yaml"]


def test_files_and_folders_load_together_in_the_order_given(tmp_path: Path) -> None:
    folder = tmp_path / "more"
    write(folder / "x.yaml", "skills: [{id: x}]\n")
    single = write(tmp_path / "first.yaml", "skills: [{id: first}]\n")
    loaded = load_paths([single, str(folder)])
    assert [s.id for s in loaded.skills] == ["first", "x"]


def test_load_data_reads_a_dict_as_one_scenario() -> None:
    loaded = load_data(
        {
            "name": "from-data",
            "skills": [{"id": "d", "invoke": [{"error": "EXECUTION_TIMEOUT", "status": 408}]}],
        }
    )
    [scenario] = loaded.scenarios
    assert scenario.name == "from-data"
    assert scenario.skills[0].invoke.steps[0].reply.status == 408


def test_load_data_reports_problems_like_a_file() -> None:
    with pytest.raises(ScenarioError) as caught:
        load_data({"skills": [{"id": "d", "invoke": {"eror": "X"}}]}, "given")
    paths = [p.path for p in caught.value.problems]
    assert "skills[0].invoke.eror" in paths
    assert {p.file for p in caught.value.problems} == {"given"}


def test_a_problem_in_python_data_is_placed_by_its_path_not_by_a_line_of_its_rendering() -> None:
    with pytest.raises(ScenarioError) as caught:
        load_data({"name": "d", "skills": [{"id": "d", "invoke": [{"json": 1, "delay": -1}]}]})
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.column) == ("<data>", 0, 0)
    assert str(problem).startswith("<data>: skills[0].invoke[0].delay: expected a whole number")


@pytest.mark.parametrize("odd", [{1, 2}, b"bytes", object()], ids=["set", "bytes", "object"])
def test_a_value_yaml_has_no_word_for_is_a_problem_at_its_path_not_a_type_error(
    odd: object,
) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_any([{"skills": [{"id": "d", "invoke": {"json": {"a": [1, odd]}}}]}])
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.path) == (
        "<data>[0]",
        0,
        "skills[0].invoke.json.a[1]",
    )
    assert problem.expected == "plain data: dicts, lists, strings, numbers, booleans, None"
    assert problem.found.startswith(type(odd).__name__)


def test_in_a_list_data_is_placed_by_path_and_text_by_line() -> None:
    text = "name: t\nskills:\n  - id: same\n    invok: {json: 1}\n"
    with pytest.raises(ScenarioError) as caught:
        load_any([{"name": "a", "skills": [{"id": "same"}]}, {"skills": [{"id": "same"}]}, text])
    assert [str(p) for p in caught.value.problems] == [
        "<data>[1]: skills[0].id: expected a skill id used once, found 'same' again"
        " (first at <data>[0])",  # not a line of a rendering its author never saw
        "<text>[2]:3:5: skills[0].id: expected a skill id used once, found 'same' again"
        " (first at <data>[0])",
        "<text>[2]:4:5: skills[0].invok: expected a known key, found unknown key 'invok';"
        " did you mean 'invoke'?",
    ]


# -- what valid scenarios become -------------------------------------------------------


def test_yaml_merge_keys_share_steps_between_skills() -> None:
    text = """\
        skills:
          - id: first
            invoke: &flaky
              - error: ENDPOINT_UNREACHABLE
                times: 2
              - &ok {json: {result: ok}, headers: {X-A: b}}
          - id: second
            invoke:
              - <<: *ok
                status: 201
        """
    first, second = load_text(textwrap.dedent(text)).skills
    assert first.invoke.length == 3
    [step] = second.invoke.steps
    assert step.reply.status == 201
    assert json.loads(step.reply.body) == {"result": "ok"}
    assert dict(step.reply.headers) == {"X-A": "b"}


def test_timestamps_in_bodies_stay_the_text_written() -> None:
    [skill] = load_text("skills: [{id: t, invoke: {json: {date: 2024-05-01}}}]").skills
    assert skill.invoke.steps[0].reply.body == b'{"date": "2024-05-01"}'


def test_a_route_keeps_its_path_methods_sequence_and_position() -> None:
    text = """\
        name: api
        routes:
          - path: /orders/<int:id>
            method: [get, POST]
            end: cycle
            steps:
              - json: {id: 1}
              - status: 404
        """
    [route] = load_text(textwrap.dedent(text), "api.yaml").routes
    assert (route.path, route.methods, route.scenario, route.index) == (
        "/orders/<int:id>",
        ("GET", "POST"),
        "api",
        0,
    )
    assert route.sequence.end == "cycle"
    assert [s.reply.status for s in route.sequence.steps] == [200, 404]
    assert (route.where.line, route.where.column) == (3, 5)


def test_a_scenario_keeps_its_description_file_and_position() -> None:
    loaded = load_text("# head\nname: n\ndescription: Hi.\nskills: [{id: a}]\n", "n.yaml")
    [scenario] = loaded.scenarios
    assert (scenario.description, scenario.file) == ("Hi.", "n.yaml")
    assert (scenario.where.line, scenario.where.column) == (2, 1)


# -- the bundled scenarios -------------------------------------------------------------

BUNDLED_SKILLS = {
    "echo": ["echo"],
    "catalog": [
        "auth-required",
        "permission-denied",
        "skill-not-found",
        "execution-timeout",
        "execution-timeout-408",
        "endpoint-unreachable",
        "bad-gateway",
        "version-incompatible",
        "invalid-descriptor",
    ],
    "flaky": ["flaky", "flaky-cycle"],
    "retries": ["retry-recovers", "retry-timeout", "retry-down"],
    "faults": [
        "connection-reset",
        "empty-response",
        "malformed-chunk",
        "random-data",
        "truncated-body",
        "refused",
    ],
    "delays": ["fixed-delay", "uniform-delay", "long-tail", "dribble", "hang", "times-out"],
    "chaos": ["coin-flip", "weighted"],
    "outage": ["recovering"],
    "matching": ["checks-input"],
    "protected": ["guarded", "admin", "keyed", "next-gen"],
    "healthy": ["translate"],
    "slow": ["slow"],
    "tasks": ["task-report", "task-timeout", "task-input", "task-cancel", "task-callback-lost"],
    "streams": [
        "stream-tokens",
        "stream-cut",
        "stream-stall",
        "stream-overload",
        "stream-resumable",
    ],
    "rate-limits": [
        "rate-limited",
        "rate-limited-503",
        "retry-after-date",
        "retry-after-fractional",
        "retry-after-missing",
        "retry-after-malformed",
        "retry-after-ms",
    ],
}


@pytest.fixture(scope="module")
def bundled_set() -> ScenarioSet:
    return load_paths([bundled_path()])


@pytest.mark.parametrize("file", sorted(p.name for p in bundled_path().glob("*.yaml")))
def test_each_bundled_file_loads_on_its_own_with_the_skills_it_promises(file: str) -> None:
    loaded = load_paths([bundled_path() / file])
    [scenario] = loaded.scenarios
    assert [s.id for s in scenario.skills] == BUNDLED_SKILLS[scenario.name]
    assert scenario.description


def test_the_bundled_folder_loads_every_scenario(bundled_set: ScenarioSet) -> None:
    assert sorted(s.name for s in bundled_set.scenarios) == sorted(BUNDLED_SKILLS)


def test_the_catalog_has_a_skill_for_each_provider_sent_code_and_an_invalid_descriptor(
    bundled_set: ScenarioSet,
) -> None:
    [catalog] = [s for s in bundled_set.scenarios if s.name == "catalog"]
    codes = {
        step.reply.error_code
        for skill in catalog.skills
        for step in (*skill.describe.steps, *skill.invoke.steps)
    }
    assert set(SERVED_CODES) <= codes
    assert len(SERVED_CODES) == 6
    invalid = [
        json.loads(skill.descriptor)
        for skill in catalog.skills
        if json.loads(skill.descriptor).get("capability_type") == "unknown_type"
    ]
    assert len(invalid) == 1
    assert "url" not in invalid[0]["endpoint"]


def test_the_catalog_uses_both_statuses_of_the_retryable_codes(bundled_set: ScenarioSet) -> None:
    statuses = {
        (step.reply.error_code, step.reply.status)
        for skill in bundled_set.skills
        for step in skill.invoke.steps
        if step.reply.error_code
    }
    assert {
        ("EXECUTION_TIMEOUT", 504),
        ("EXECUTION_TIMEOUT", 408),
        ("ENDPOINT_UNREACHABLE", 503),
        ("ENDPOINT_UNREACHABLE", 502),
    } <= statuses


# -- YAML 1.1's booleans, as a scenario meets them -----------------------------------


def test_an_unquoted_no_in_a_body_is_refused_instead_of_served_as_false() -> None:
    [problem] = problems_in("skills:\n  - id: a\n    invoke: {json: {country: NO}}\n")
    assert str(problem) == (
        "s.yaml:3:30: skills[0].invoke.json.country: expected true or false, or a quoted"
        " string, found NO unquoted, which YAML 1.1 reads as the boolean false;"
        " quote it ('NO') for the word, or write false"
    )
    served = load_text("skills:\n  - id: a\n    invoke: {json: {country: 'NO'}}\n")
    assert json.loads(served.skills[0].invoke.steps[0].reply.body) == {"country": "NO"}


def test_a_boolean_word_as_a_key_is_reported_as_the_word() -> None:
    [problem] = problems_in("skills:\n  - id: a\n    on: {json: 1}\n")
    assert problem.path == "skills[0].on"
    assert problem.found == "unknown key 'on'"
