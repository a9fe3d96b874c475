"""Protocol versions: parsing, ranges, and a provider that refuses incompatible consumers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests

from mockskill import ScenarioError, Server, load_text
from mockskill.protocol.versions import Range, parse_version

Serve = Callable[..., Server]


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.4.0", (1, 4, 0)),
        (" 10.0.12 ", (10, 0, 12)),
        ("2.0.0-rc.1", (2, 0, 0)),
        ("1.0.0+build.5", (1, 0, 0)),
        ("1.4", None),
        ("v1.4.0", None),
        ("01.4.0", None),
        ("banana", None),
    ],
)
def test_parse_version(text: str, version: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("1.x", [(1, 0, 0), (1, 99, 3)], [(0, 9, 9), (2, 0, 0)]),
        ("1.x.x", [(1, 0, 0), (1, 4, 0)], [(2, 0, 0)]),
        ("1", [(1, 7, 0)], [(2, 0, 0)]),
        ("1.2.x", [(1, 2, 0), (1, 2, 9)], [(1, 1, 9), (1, 3, 0)]),
        ("1.2", [(1, 2, 5)], [(1, 3, 0)]),
        ("1.2.3", [(1, 2, 3)], [(1, 2, 4)]),
        (">=1.2.0 <3.0.0", [(1, 2, 0), (2, 9, 9)], [(1, 1, 9), (3, 0, 0)]),
        (">= 1.2.0", [(1, 2, 0), (9, 0, 0)], [(1, 1, 0)]),
        ("1.x || 3.x", [(1, 5, 0), (3, 0, 1)], [(2, 0, 0)]),
    ],
)
def test_a_range_holds_what_it_says(
    text: str, inside: list[tuple[int, int, int]], outside: list[tuple[int, int, int]]
) -> None:
    accepted = Range.parse(text)
    assert accepted is not None
    assert all(v in accepted for v in inside)
    assert not any(v in accepted for v in outside)


@pytest.mark.parametrize("text", ["", "banana", ">=1.2", "1.x ||", "<>1.0.0", "1.2.3.4"])
def test_what_is_not_a_range_is_refused(text: str) -> None:
    assert Range.parse(text) is None


def test_the_default_range_is_the_descriptors_major() -> None:
    accepted = Range.same_major((2, 1, 0))
    assert accepted.text == "2.x.x"
    assert (2, 0, 0) in accepted
    assert (3, 0, 0) not in accepted


SKILLS = """
    skills:
      - id: v1
      - id: v2
        descriptor: {protocol_version: 2.0.0}
      - id: wide
        descriptor: {protocol_version: 2.0.0}
        accepts: ">=1.2.0 <3.0.0"
        upgrade_url: https://example.test/upgrade
"""


def call(server: Server, skill: str, version: str | None) -> requests.Response:
    headers = {"Skill-Protocol-Version": version} if version else {}
    return requests.post(server.invoke_url(skill), headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("skill", "version", "status"),
    [
        ("v1", "1.4.0", 200),
        ("v1", "1.0.0", 200),
        ("v1", "2.0.0", 422),
        ("v2", "1.4.0", 422),
        ("v2", "2.3.1", 200),
        ("v2", None, 200),
        ("wide", "1.4.0", 200),
        ("wide", "1.1.0", 422),
    ],
)
def test_same_major_is_compatible_unless_the_skill_says_otherwise(
    serve: Serve, skill: str, version: str | None, status: int
) -> None:
    assert call(serve(SKILLS), skill, version).status_code == status


def test_an_incompatible_consumer_gets_the_chapters_details(serve: Serve) -> None:
    response = call(serve(SKILLS), "v2", "1.4.0")
    assert response.status_code == 422
    assert response.json() == {
        "error": {
            "code": "VERSION_INCOMPATIBLE",
            # the chapter's wording: the consumer's major, as "1.x"
            "message": "Protocol version 2.0.0 is not compatible with consumer version 1.x",
            "details": {
                "descriptor_version": "2.0.0",
                "consumer_supported_range": "1.x.x",
                "upgrade_url": "https://skill-sharing.org/upgrade-guide",
                "accepted_consumer_versions": "2.x.x",
            },
        }
    }


def test_a_refused_consumer_does_not_move_the_sequence(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: s
            invoke: [{json: first}, {json: second}]
        """
    )
    assert call(server, "s", "9.0.0").status_code == 422
    assert call(server, "s", "1.0.0").json() == "first"
    [refused, served] = server.state.journal()
    assert (refused.error_code, refused.position) == ("VERSION_INCOMPATIBLE", None)
    assert served.position == 0


def test_a_skill_with_its_own_upgrade_url_names_it(serve: Serve) -> None:
    details = call(serve(SKILLS), "wide", "1.0.0").json()["error"]["details"]
    assert details["upgrade_url"] == "https://example.test/upgrade"
    assert details["accepted_consumer_versions"] == ">=1.2.0 <3.0.0"


def test_descriptors_are_served_whatever_the_consumers_version(serve: Serve) -> None:
    server = serve(SKILLS)
    headers = {"Skill-Protocol-Version": "1.0.0"}
    response = requests.get(server.skill_url("v2"), headers=headers, timeout=10)
    assert response.status_code == 200  # the consumer finds out from protocol_version


def test_a_version_that_is_not_semantic_is_a_bad_request(serve: Serve) -> None:
    response = call(serve(SKILLS), "v1", "latest")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"
    assert "'latest' is not a semantic version" in response.json()["error"]["message"]


def test_a_bad_range_is_a_load_error() -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text("skills:\n  - id: s\n    accepts: newest\n", "s.yaml")
    [problem] = caught.value.problems
    assert (problem.path, problem.line) == ("skills[0].accepts", 3)
    assert problem.expected.startswith("a range of consumer versions")
