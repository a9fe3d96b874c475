"""What the engine makes of a provider's answers on the way back (engine/proxying.py)."""

from __future__ import annotations

import json

from mockskill.engine.proxying import _listing, _rewriter

BASE = "http://127.0.0.1:8080"


def test_a_proxied_list_points_at_mockskill_and_holds_the_scripted_skills_in_place() -> None:
    provider = {
        "skills": [
            {"id": "real", "descriptor_url": "https://provider.example/skills/real"},
            {"id": "mine", "descriptor_url": "https://provider.example/skills/mine"},
        ]
    }
    scripted = [{"id": "mine", "descriptor_url": f"{BASE}/skills/mine", "scenario": "s"}]
    rewrite = _rewriter(BASE, lambda d, b: _listing(d, b, scripted))
    listed = json.loads(rewrite(json.dumps(provider).encode()))["skills"]
    assert listed == [
        {"id": "real", "descriptor_url": f"{BASE}/skills/real"},
        scripted[0],  # the scripted skill of the same id wins: the provider's is not listed
    ]


def test_a_list_that_is_not_one_is_relayed_as_it_came() -> None:
    rewrite = _rewriter(BASE, lambda d, b: _listing(d, b, [{"id": "mine"}]))
    assert rewrite(b'{"skills": "none"}') == b'{"skills": "none"}'
    assert rewrite(b"not json") == b"not json"
