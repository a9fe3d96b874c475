"""The pack's text (:mod:`mockskill.recording.failure_packs`): written by hand as YAML, so
whatever a descriptor holds, the loaded pack must serve it exactly as it is."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mockskill import load_text
from mockskill.recording.failure_packs import generate, served_descriptor

# Strings YAML reads as something else when written bare, and characters JSON leaves as
# they are that YAML does not read back so (line breaks, controls, a byte-order mark).
_TRICKY = [
    *("yes", "No", "null", "~", "true", "0x1F", "1e3", "007", ".inf", "12:30", "2001-12-14"),
    *("- x", "#c", ": a", "a: b", "'q'", '"d"', "&a", "*a", "!t", "%p", "@", "`", "|", "<<"),
    *("a\nb", " lead", "trail ", "\t", "\x85", "\u2028", "\x7f", "\ufeff"),
]
# (no lone surrogate: JSON's \ud800 escape can make one, but no UTF-8 text can carry it,
# and generate refuses it: tests/cli/test_generate.py)
TEXT = st.one_of(st.text(st.characters(codec="utf-8"), max_size=10), st.sampled_from(_TRICKY))
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-05, 1e300, 5e-324, -0.0]),  # JSON spells these with an exponent
    TEXT,
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=10,
)
DESCRIPTOR = st.fixed_dictionaries(
    {
        "protocol_version": st.sampled_from(["1.0.0", "2.0.0", "1.0.0-rc.1+b.5"]),
        "id": st.from_regex(r"[a-z0-9][a-z0-9._~-]{0,12}", fullmatch=True),
        "name": TEXT,
        "capability_type": st.sampled_from(["plugin", "api", "knowledge", "task"]),
        "endpoint": st.fixed_dictionaries(
            {"url": st.just("https://api.example.com/skills/x/invoke")},
            optional={"method": st.sampled_from(["GET", "POST"]), "x_extra": JSON},
        ),
    },
    optional={
        "description": TEXT,
        "auth": st.fixed_dictionaries(
            {
                "type": st.just("oauth2"),
                "authorization_url": st.just("https://example.com/authorize"),
                "scopes": st.lists(TEXT, max_size=3),
            }
        ),
        "rate_limit": JSON,
        "x_vendor": JSON,
    },
)
EXTENDED = st.builds(
    lambda extra, known: {**extra, **known}, st.dictionaries(TEXT, JSON), DESCRIPTOR
)
"""A descriptor with members of any name beside the ones the pack reads."""


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(EXTENDED)
def test_the_pack_serves_any_descriptor_as_it_is(descriptor: dict[str, Any]) -> None:
    (skill,) = load_text(generate([descriptor], "skill.json")).skills
    # compared as JSON text: 1 is not 1.0, -0.0 is not 0.0, and the members keep their order
    assert json.dumps(json.loads(skill.descriptor)) == json.dumps(served_descriptor(descriptor))
