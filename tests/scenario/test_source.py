"""Reading YAML safely: plain data, positions, and hostile input refused clearly."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from mockskill.scenario import source
from mockskill.scenario.problems import Problem
from mockskill.scenario.source import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, read_file, read_text


def read(text: str) -> tuple[list[source.Document], list[Problem]]:
    return read_text(textwrap.dedent(text), "s.yaml")


def only_problem(text: str) -> Problem:
    _, problems = read(text)
    assert len(problems) == 1, problems
    return problems[0]


# -- plain data and positions -------------------------------------------------


def test_a_document_becomes_plain_data() -> None:
    [doc], problems = read(
        """\
        name: x
        skills:
          - id: a
            delay: 10
            ok: true
            nothing: null
            ratio: 0.5
        """
    )
    assert problems == []
    assert doc.data == {
        "name": "x",
        "skills": [{"id": "a", "delay": 10, "ok": True, "nothing": None, "ratio": 0.5}],
    }


def test_positions_of_values_and_keys_are_one_based_line_and_column() -> None:
    [doc], _ = read(
        """\
        name: x
        skills:
          - id: abc
            invoke: {json: 1}
        """
    )
    assert doc.positions[("name",)] == (1, 7)
    assert doc.positions[("skills", 0)] == (3, 5)
    assert doc.positions[("skills", 0, "id")] == (3, 9)
    assert doc.key_positions[("skills", 0, "id")] == (3, 5)
    assert doc.positions[("skills", 0, "invoke", "json")] == (4, 20)


def test_a_path_that_was_not_written_is_placed_at_its_nearest_written_ancestor() -> None:
    [doc], _ = read(
        """\
        skills:
          - id: a
        """
    )
    assert doc.position(("skills", 0, "invoke", "status")) == (2, 5)
    assert doc.position(("skills", 0, "id"), at_key=True) == (2, 5)
    assert doc.position(("skills", 0, "id")) == (2, 9)


def test_timestamps_stay_the_text_that_was_written() -> None:
    [doc], problems = read("when: 2024-01-02\nat: 2024-01-02T03:04:05Z\n")
    assert problems == []
    assert doc.data == {"when": "2024-01-02", "at": "2024-01-02T03:04:05Z"}


def test_several_documents_are_read_in_order_with_their_index() -> None:
    docs, problems = read("name: a\n---\nname: b\n")
    assert problems == []
    assert [(d.index, d.data) for d in docs] == [(0, {"name": "a"}), (1, {"name": "b"})]
    assert docs[1].positions[("name",)] == (3, 7)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("---\nname: a\n", id="leading-marker"),
        pytest.param("name: a\n---\n", id="trailing-marker"),
        pytest.param("---\n---\nname: a\n...\n", id="empty-document-between"),
    ],
)
def test_empty_documents_between_markers_are_skipped(text: str) -> None:
    docs, problems = read_text(text, "s.yaml")
    assert problems == []
    assert [d.data for d in docs] == [{"name": "a"}]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("# only a comment\n", id="comment"),
        pytest.param("---\n", id="only-a-marker"),
    ],
)
def test_a_file_without_content_has_no_documents_and_no_problems(text: str) -> None:
    assert read_text(text, "s.yaml") == ([], [])


def test_an_explicit_null_document_is_kept_for_the_loader_to_refuse() -> None:
    docs, problems = read_text("null\n", "s.yaml")
    assert problems == []
    assert [d.data for d in docs] == [None]


# -- merge keys and duplicate keys -------------------------------------------


def test_merge_keys_copy_an_anchored_mapping_and_explicit_keys_win() -> None:
    [doc], problems = read(
        """\
        base: &base {status: 201, json: {a: 1}}
        one:
          <<: *base
          status: 202
        two: {<<: [*base, {text: hi}]}
        """
    )
    assert problems == []
    assert doc.data["one"] == {"status": 202, "json": {"a": 1}}
    assert doc.data["two"] == {"status": 201, "json": {"a": 1}, "text": "hi"}


def test_a_reused_mapping_that_overrides_a_merged_key_is_not_a_duplicate() -> None:
    [doc], problems = read(
        """\
        one: &one {<<: {status: 201}, status: 202}
        two: *one
        """
    )
    assert problems == []
    assert doc.data == {"one": {"status": 202}, "two": {"status": 202}}


def test_merge_keys_must_name_mappings() -> None:
    problem = only_problem("a: {<<: 3}\n")
    assert problem.expected == "merge keys (<<) that name mappings"
    assert (problem.line, problem.path) == (1, "a")


def test_duplicate_keys_are_refused_at_the_second_one_naming_the_first_line() -> None:
    problem = only_problem(
        """\
        skills:
          - id: a
            invoke: {json: 1}
            invoke: {json: 2}
        """
    )
    assert problem.path == "skills[0].invoke"
    assert (problem.line, problem.column) == (4, 5)
    assert problem.expected == "each key once in a mapping"
    assert problem.found == "'invoke' again (first on line 3)"
    assert "last one" in problem.hint


def test_a_duplicate_inside_a_reused_mapping_is_reported_once() -> None:
    _, problems = read("a: &x {k: 1, k: 2}\nb: *x\n")
    assert [(p.path, p.line) for p in problems] == [("a.k", 1)]


# -- hostile input --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag", "path"),
    [
        pytest.param("a: !!python/name:os.system ''\n", "python/name:os.system", "a", id="scalar"),
        pytest.param(
            "a: !!python/object:os.system {x: 1}\n", "python/object:os.system", "a", id="mapping"
        ),
        pytest.param(
            "a: [!!python/object/apply:os.system [echo]]\n",
            "python/object/apply:os.system",
            "a[0]",
            id="sequence",
        ),
        pytest.param("a: !!binary aGk=\n", "binary", "a", id="binary"),
        pytest.param("a: !!set {x, y}\n", "set", "a", id="set"),
        pytest.param("a: !custom 1\n", "!custom", "a", id="local-tag"),
    ],
)
def test_tags_outside_plain_yaml_are_refused_and_nothing_is_constructed(
    text: str, tag: str, path: str
) -> None:
    problem = only_problem(text)
    assert tag in problem.found
    # A standard tag as it is written (!!binary), not "the tag tag:yaml.org,2002:binary".
    assert problem.found == f"the tag {tag if tag.startswith('!') else '!!' + tag}"
    assert problem.path == path
    assert problem.line == 1
    assert "safe YAML" in problem.hint


def test_explicit_standard_tags_are_plain_yaml() -> None:
    [doc], problems = read("a: !!str 5\nb: !!int '7'\nc: !!map {x: !!seq [1]}\n")
    assert problems == []
    assert doc.data == {"a": "5", "b": 7, "c": {"x": [1]}}


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def merge_bomb(levels: int = 9) -> str:
    inner = "&m0 {k: v}"
    for i in range(1, levels + 1):
        inner = f"&m{i} {{<<: [{inner}, " + ", ".join([f"*m{i - 1}"] * 9) + "]}"
    return f"bomb: {inner}\n"


def test_the_billion_laughs_is_refused_quickly_with_a_clear_problem() -> None:
    started = time.monotonic()
    docs, [problem] = read_text(billion_laughs(), "bomb.yaml")
    assert time.monotonic() - started < 3
    assert problem.expected == f"a document of at most {MAX_NODES} values once aliases are expanded"
    assert problem.found == "more (an alias bomb?)"
    assert "fewer nested aliases" in problem.hint
    assert problem.line == 1
    assert docs == []  # refused whole, not half read


def test_nested_merge_keys_cannot_multiply_a_mapping() -> None:
    started = time.monotonic()
    [doc], problems = read_text(merge_bomb(), "bomb.yaml")
    assert time.monotonic() - started < 3
    assert problems == []
    assert doc.data == {"bomb": {"k": "v"}}


def test_a_few_aliases_below_the_limit_are_fine() -> None:
    [doc], problems = read_text(billion_laughs(levels=2), "ok.yaml")
    assert problems == []
    assert len(doc.data["a2"]) == 10
    assert doc.data["a2"][9][9][9] == "lol"


@pytest.mark.parametrize(
    ("depth", "path_prefix"),
    [
        pytest.param(MAX_DEPTH + 2, "[0][0]", id="one-level-too-deep"),
        pytest.param(100_000, "(YAML nesting)", id="deep-enough-to-crash-a-composer"),
    ],
)
def test_deep_nesting_is_refused(depth: int, path_prefix: str) -> None:
    problem = only_problem("[" * depth + "]" * depth)
    assert problem.expected == f"nesting at most {MAX_DEPTH} levels deep"
    assert problem.found == "deeper nesting"
    assert problem.path.startswith(path_prefix)
    assert problem.line == 1
    assert problem.column > MAX_DEPTH


def test_a_value_max_depth_levels_below_the_top_is_fine() -> None:
    depth = MAX_DEPTH + 1  # the top-level list, then MAX_DEPTH lists inside it
    [doc], problems = read("[" * depth + "]" * depth)
    assert problems == []
    value = doc.data
    for _ in range(depth - 1):
        value = value[0]
    assert value == []


def test_an_integer_python_will_not_convert_is_a_problem_not_a_crash() -> None:
    problem = only_problem(f"a: {'1' * 5000}\n")
    assert (problem.path, problem.found) == ("a", "a number of 5000 characters")
    assert problem.hint == "quote it if it is text"


@pytest.mark.parametrize(
    ("text", "path", "expected", "value"),
    [
        pytest.param("a: !!bool maybe\n", "a", "a boolean", "maybe", id="bool"),
        pytest.param("a: !!int x\n", "a", "an integer", "x", id="int"),
        pytest.param("a: [!!int 0x]\n", "a[0]", "an integer", "0x", id="int-in-a-list"),
        pytest.param("a: !!float x\n", "a", "a number", "x", id="float"),
        pytest.param("a: {!!bool maybe: 1}\n", "a", "a boolean", "maybe", id="bool-key"),
        pytest.param("a: {!!int x: 1, !!int y: 2}\n", "a", "an integer", "x", id="int-keys"),
    ],
)
def test_a_standard_tag_on_text_it_cannot_read_is_a_problem_not_a_crash(
    text: str, path: str, expected: str, value: str
) -> None:
    # PyYAML raises KeyError for !!bool maybe (a traceback), and the ValueError of
    # !!int x was taken for an integer of over 4300 digits.
    _, problems = read(text)
    problem = problems[0]
    tag = text.split("!!")[1].split()[0]
    assert problem.path == path
    assert problem.expected == f"{expected}, as the tag !!{tag} says"
    assert problem.found == repr(value)
    assert problem.hint == f"remove the tag !!{tag}, and quote the value if it is text"
    assert len(problems) == text.count("!!"), problems  # each key once, not twice


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        pytest.param("a: {!x y: 1}\n", "!x", id="local-tag-on-a-flow-key"),
        pytest.param("a:\n  !x y: 1\n", "!x", id="local-tag-on-a-block-key"),
        pytest.param("a: {!!binary aGk=: 1}\n", "!!binary", id="binary-key"),
        pytest.param("a: {!!map x: 1}\n", "!!map", id="map-tag-on-a-key"),
        pytest.param("a: {!!seq x: 1}\n", "!!seq", id="seq-tag-on-a-key"),
    ],
)
def test_a_tag_on_a_key_is_refused_as_on_a_value(text: str, tag: str) -> None:
    # Was PyYAML's own "could not determine a constructor for the tag '!x'", as a
    # syntax error, or "a complex key" for a scalar.
    problem = only_problem(text)
    assert (problem.path, problem.found) == ("a", f"the tag {tag}")
    assert "safe YAML" in problem.hint


def test_a_date_as_a_key_is_the_text_written_as_a_date_value_is() -> None:
    [doc], problems = read("a: {2001-12-14: x, !!timestamp y: z}\nb: 2001-12-14\n")
    assert problems == []
    assert doc.data == {"a": {"2001-12-14": "x", "y": "z"}, "b": "2001-12-14"}


def test_a_syntax_error_in_a_later_document_is_placed_in_that_document() -> None:
    _, [problem] = read_text("name: a\n---\nname: [\n", "s.yaml")
    assert (problem.path, problem.line) == ("(YAML syntax)", 4)


# Texts whose documents have problems of their own besides the file's syntax or composer
# error: what is built, and in which order the failures come, shows which pass found what.
FAILING = {
    "syntax-after-a-duplicate": "a: 1\na: 2\n---\nname: [\n",
    "alias-after-a-duplicate": "a: 1\na: 2\n---\nb: *nowhere\n",
    "alias-then-syntax": "a: 1\na: 2\n---\nb: *nowhere\n---\nc: [\n",
    "syntax-then-alias": "a: 1\na: 2\n---\nc: [\n---\nb: *nowhere\n",
    "valid": "a: &x {b: [1, 2]}\n---\n- *x\n- c: d\n",
    "bad-indentation": "a:\n  b: 1\n c: 2\n",
}


@pytest.mark.parametrize("text", FAILING.values(), ids=FAILING.keys())
def test_a_text_too_small_to_nest_deeply_is_read_as_after_a_pass_measuring_its_depth(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert source._indicators(text) <= source._PARSE_DEPTH  # read in one pass
    one_pass = read_text(text, "s.yaml")
    # As if every text could nest too deep: each is measured by a parse first.
    monkeypatch.setattr(source, "_indicators", lambda text: source._PARSE_DEPTH + 1)
    assert read_text(text, "s.yaml") == one_pass


@pytest.mark.parametrize(
    "text",
    [
        *(path.read_text() for path in sorted(Path("scenarios").glob("*.yaml"))),
        "- - - - [[{a: [b: {c: d}]}]]\n",
        "? - a\n  - b\n: {x: [y]}\n",
        "[a: b, ? c, {d: e}]\n",
        "a:\n- b:\n  - c\n",
    ],
)
def test_a_text_holds_fewer_collections_than_its_indicators(text: str) -> None:
    import yaml

    starts = [e for e in yaml.parse(text) if isinstance(e, yaml.CollectionStartEvent)]
    assert 0 < len(starts) <= source._indicators(text)


# -- files -----------------------------------------------------------------------


def test_a_file_is_read_and_named_by_its_path(tmp_path: Path) -> None:
    file = tmp_path / "one.yaml"
    file.write_text("name: one\n", encoding="utf-8")
    [doc], problems = read_file(file)
    assert problems == []
    assert (doc.file, doc.data) == (str(file), {"name": "one"})


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path: Path) -> None:
    file = tmp_path / "latin1.yaml"
    file.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    docs, [problem] = read_file(file)
    assert docs == []
    assert (problem.path, problem.expected) == ("(file)", "UTF-8 text")
    assert problem.found == "byte 9 that is not UTF-8"


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    file = tmp_path / "big.yaml"
    # Invalid YAML and invalid UTF-8 alike: only the size may be reported.
    file.write_bytes(b"[\xff" * (MAX_FILE_BYTES // 2 + 1))
    docs, [problem] = read_file(file)
    assert docs == []
    assert problem.expected == f"a file of at most {MAX_FILE_BYTES} bytes"
    assert problem.found == str(MAX_FILE_BYTES + 2)


def test_oversized_text_is_refused_before_it_is_parsed() -> None:
    docs, [problem] = read_text("[" * (MAX_FILE_BYTES + 1), "big.yaml")
    assert docs == []
    assert problem.expected == f"a file of at most {MAX_FILE_BYTES} bytes"


def test_a_file_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    file = tmp_path / "edge.yaml"
    head = b"name: edge\n"
    file.write_bytes(head + b"#" * (MAX_FILE_BYTES - len(head)))
    assert file.stat().st_size == MAX_FILE_BYTES
    [doc], problems = read_file(file)
    assert problems == []
    assert doc.data == {"name": "edge"}


def test_an_unreadable_path_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    docs, [problem] = read_file(tmp_path / "missing.yaml")
    assert docs == []
    assert problem.expected == "a readable file"


@pytest.mark.timeout(20)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_in_a_files_place_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # opening it to read would wait for a writer that never comes
    docs, [problem] = read_file(fifo)
    assert docs == []
    assert (problem.path, problem.expected) == ("(file)", "a scenario file or folder")
    assert problem.found == "a FIFO (named pipe) there"


@pytest.mark.timeout(20)
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="a POSIX device")
def test_a_device_in_a_files_place_is_refused_not_read_past_the_limit(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")  # its size says 0, and it never ends
    docs, [problem] = read_file(link)
    assert docs == []
    assert problem.found == "a character device there"


# -- YAML 1.1's booleans ----------------------------------------------------------


@pytest.mark.parametrize(
    "word", ["no", "No", "NO", "yes", "Yes", "YES", "on", "On", "ON", "off", "Off", "OFF"]
)
def test_an_unquoted_yaml_1_1_boolean_word_as_a_value_is_a_problem_saying_to_quote_it(
    word: str,
) -> None:
    meaning = "true" if word.lower() in ("yes", "on") else "false"
    problem = only_problem(f"country: {word}\n")
    assert (problem.path, problem.line, problem.column) == ("country", 1, 10)
    assert problem.found == f"{word} unquoted, which YAML 1.1 reads as the boolean {meaning}"
    assert f"quote it ('{word}')" in problem.hint


def test_boolean_words_are_caught_in_lists_and_flow_mappings_too() -> None:
    _, problems = read("tags: [fr, NO, 'no', \"off\", off]\nflags: {a: On}\n")
    assert [(p.path, p.found.split()[0]) for p in problems] == [
        ("tags[1]", "NO"),
        ("tags[4]", "off"),
        ("flags.a", "On"),
    ]


@pytest.mark.parametrize("text", ["a: 'no'\n", 'a: "ON"\n', "a: true\n", "a: False\n", "a: nO\n"])
def test_quoted_words_true_false_and_words_yaml_does_not_read_as_booleans_are_fine(
    text: str,
) -> None:
    _, problems = read(text)
    assert problems == []


def test_a_boolean_word_as_a_key_is_the_word() -> None:
    [doc], problems = read("on: 1\nOFF: 2\nyes: {no: 3}\n")
    assert problems == []
    assert doc.data == {"on": 1, "OFF": 2, "yes": {"no": 3}}
    assert doc.key_positions[("yes", "no")] == (3, 7)


def test_a_boolean_word_key_and_its_quoted_twin_are_one_key_twice() -> None:
    problem = only_problem("on: 1\n'on': 2\n")
    assert problem.found == "'on' again (first on line 1)"
