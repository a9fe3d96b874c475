"""The registry: loaded scenarios, active or not, and every change to them, whole or not at all."""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import ScenarioError, ScenarioSet, Server, load_paths, load_text
from mockskill.control.registry import CannotShare, Conflict, Registry, UnknownScenario
from mockskill.control.watch import ReloadResult
from mockskill.engine.engine import Engine
from mockskill.engine.state import State

Serve = Callable[..., Server]

COUNTER = """
name: counter
skills:
  - id: count
    invoke:
      - json: {n: 1}
      - json: {n: 2}
      - json: {n: 3}
"""


def scenario(name: str, skill: str, answer: object = "ok") -> ScenarioSet:
    return load_text(f"name: {name}\nskills: [{{id: {skill}, invoke: {{json: {answer!r}}}}}]\n")


def invoke(server: Server, skill: str, session: str = "default") -> requests.Response:
    headers = {"Mockskill-Session": session}
    return requests.post(server.invoke_url(skill), headers=headers, timeout=10)


def count(server: Server, session: str = "default") -> Any:
    return invoke(server, "count", session).json()["n"]


def served(server: Server) -> list[str]:
    listing = requests.get(f"{server.url}/skills", timeout=10).json()
    return [s["id"] for s in listing["skills"]]


def test_it_starts_with_the_engines_scenarios_all_active(serve: Serve) -> None:
    before = time.time()
    server = serve(COUNTER)
    (entry,) = server.registry.scenarios
    assert (entry.name, entry.active, entry.origin) == ("counter", True, "test.yaml")
    assert entry.activated == entry.loaded
    assert before - 60 < entry.loaded <= time.time()
    assert server.scenarios == server.registry.scenarios


def test_add_serves_the_new_scenarios_and_says_where_they_came_from(serve: Serve) -> None:
    server = serve(COUNTER)
    (added,) = server.registry.add(scenario("extra", "extra"))
    assert (added.name, added.active, added.origin) == ("extra", True, "<text>")
    assert [e.name for e in server.scenarios] == ["counter", "extra"]
    assert invoke(server, "extra").json() == "ok"
    (named,) = server.add("name: more\nskills: [{id: more}]\n")
    assert named.origin.startswith("<added ")


def test_a_name_already_loaded_is_a_conflict_and_changes_nothing(serve: Serve) -> None:
    server = serve(COUNTER)
    loaded, serving = server.registry.scenarios, server.engine.scenarios
    with pytest.raises(Conflict) as refused:
        server.registry.add(scenario("counter", "other"))
    assert refused.value.reasons == (
        "a scenario named 'counter' is loaded already (from test.yaml)",
    )
    (problem,) = refused.value.problems
    assert (problem.path, problem.line) == ("name", 1)
    assert "scenario name" in str(problem)
    assert server.registry.scenarios is loaded
    assert server.engine.scenarios is serving
    assert invoke(server, "other").status_code == 404


def test_replace_takes_the_old_ones_place_and_restarts_only_its_sequences(serve: Serve) -> None:
    server = serve(COUNTER)
    server.add("name: other\nskills: [{id: other, invoke: [{json: 1}, {json: 2}]}]\n")
    assert [count(server), count(server)] == [1, 2]
    assert invoke(server, "other").json() == 1
    replacement = COUNTER.replace("{n: 1}", "{n: 10}")
    (entry,) = server.registry.add(load_text(replacement, "new.yaml"), replace=True)
    assert [e.name for e in server.scenarios] == ["counter", "other"]  # in its place
    assert entry.origin == "new.yaml"
    assert count(server) == 10  # restarted, on the new steps
    assert invoke(server, "other").json() == 2  # kept its place


def test_an_inactive_scenario_is_listed_not_served_and_may_share_skill_ids(serve: Serve) -> None:
    server = serve(COUNTER)
    (variant,) = server.registry.add(scenario("variant", "count", "variant"), active=False)
    assert (variant.active, variant.activated) == (False, None)
    assert [(e.name, e.active) for e in server.scenarios] == [("counter", True), ("variant", False)]
    assert server.scenario_names == ["counter"]
    assert served(server) == ["count"]
    assert count(server) == 1


def test_activating_a_clashing_scenario_is_refused_naming_the_clash(serve: Serve) -> None:
    server = serve(COUNTER + "routes: [{path: /ping, steps: [{json: pong}]}]\n")
    clashing = "name: variant\nskills: [{id: count}]\nroutes: [{path: /ping, steps: [{json: 1}]}]\n"
    server.add(clashing, active=False)
    with pytest.raises(Conflict) as refused:
        server.activate("variant")
    assert refused.value.reasons == (
        "skill id 'count' is served by active scenario 'counter'",
        "route 'GET /ping' is served by active scenario 'counter'",
    )
    assert {p.path for p in refused.value.problems} == {"skills[0].id", "routes[0].path"}
    assert all("deactivate or remove 'counter' first" in p.hint for p in refused.value.problems)
    assert server.scenario_names == ["counter"]
    with pytest.raises(ScenarioError, match="skill id"):  # and so is adding one active
        server.add("name: third\nskills: [{id: count}]\n")


def test_deactivate_then_activate_swaps_variants_from_their_first_step(serve: Serve) -> None:
    server = serve(COUNTER)
    server.add(COUNTER.replace("counter", "variant").replace("{n: 1}", "{n: 100}"), active=False)
    assert [count(server), count(server)] == [1, 2]
    server.deactivate("counter")
    assert served(server) == []
    assert invoke(server, "count").status_code == 404
    entry = server.activate("variant")
    assert entry.active
    assert entry.activated is not None
    assert count(server) == 100
    server.deactivate("variant")
    server.activate("counter")
    assert count(server) == 1  # restarted: activation starts a scenario afresh


def test_activation_restarts_the_outage_window(serve: Serve) -> None:
    # The window opens 1 s after activation: at first the sequence answers.
    server = serve(COUNTER + "outage: {start: 1000, duration: 600000}\n")
    time.sleep(1.1)
    assert invoke(server, "count").status_code == 503  # in the window
    server.deactivate("counter")
    server.activate("counter")
    assert invoke(server, "count").status_code == 200  # the window starts again


def test_activating_an_active_or_deactivating_an_inactive_one_changes_nothing(
    serve: Serve,
) -> None:
    server = serve(COUNTER)
    assert count(server) == 1
    entry = server.registry.get("counter")
    assert server.activate("counter") is entry
    assert count(server) == 2  # not restarted
    server.deactivate("counter")
    inactive = server.registry.get("counter")
    assert server.deactivate("counter") is inactive


def test_an_unknown_name_is_a_key_error_with_the_nearest_names(serve: Serve) -> None:
    server = serve(COUNTER)
    for change in (server.remove, server.activate, server.deactivate, server.registry.get):
        with pytest.raises(UnknownScenario) as unknown:
            change("countr")
        assert isinstance(unknown.value, KeyError)
        assert unknown.value.suggestions == ["counter"]
        assert str(unknown.value) == (
            "no scenario named 'countr' is loaded; did you mean 'counter'? (loaded: 'counter')"
        )


def test_remove_unloads_active_and_inactive_scenarios(serve: Serve) -> None:
    server = serve(COUNTER)
    server.add(COUNTER.replace("counter", "variant"), active=False)
    assert count(server) == 1
    assert server.registry.remove("variant").name == "variant"
    assert count(server) == 2  # the active twin (same skill id) kept its place
    removed = server.registry.remove("counter")
    assert removed.active
    assert server.scenarios == ()
    assert served(server) == []
    server.add(COUNTER)
    assert count(server) == 1  # loaded again, it starts afresh


def test_every_change_swaps_a_new_snapshot_and_leaves_the_old_one_whole(serve: Serve) -> None:
    server = serve(COUNTER)
    before = server.registry.scenarios
    server.add(scenario("extra", "extra"))
    server.deactivate("counter")
    assert [e.name for e in before] == ["counter"]
    assert before[0].active
    assert isinstance(server.registry.scenarios, tuple)
    assert server.registry.scenarios is not before


def test_concurrent_changes_are_never_lost_nor_mixed(serve: Serve) -> None:
    server = serve(COUNTER)
    server.add(COUNTER.replace("counter", "twin"), active=False)
    errors: list[BaseException] = []
    both_active = []

    def add(i: int) -> None:
        try:
            server.registry.add(scenario(f"s{i}", f"skill{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def swap(first: str, second: str) -> None:
        for _ in range(30):
            try:
                server.deactivate(first)
                server.activate(second)
            except Conflict:
                pass  # the other thread activated its twin first: refused, as it must be
            active = [s.name for s in server.engine.scenarios.scenarios]
            if "counter" in active and "twin" in active:  # pragma: no cover - the bug
                both_active.append(active)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(20)]
    threads += [
        threading.Thread(target=swap, args=("counter", "twin")),
        threading.Thread(target=swap, args=("twin", "counter")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert both_active == []
    names = {e.name for e in server.scenarios}
    assert names == {"counter", "twin"} | {f"s{i}" for i in range(20)}
    served_names = {s.name for s in server.engine.scenarios.scenarios}
    assert served_names == {e.name for e in server.scenarios if e.active}


class Hold:
    """An engine hook that holds the first request matched to *path* until released.

    A test lands a change of scenarios while that request is matched but not
    yet answered: the race, made deterministic.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.matched = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._held = False

    def __call__(self, request: Any, target: Any) -> None:
        with self._lock:
            if request.path != self.path or self._held:
                return
            self._held = True
        self.matched.set()
        assert self.release.wait(30), "the test never released the held request"


def held_invoke(server: Server, skill: str, **kwargs: Any) -> tuple[Hold, Callable[[], Any]]:
    """Invoke *skill* on a thread, held once matched; returns the hold and the answer's getter."""
    hold = Hold(f"/skills/{skill}/invoke")
    server.engine.matched = hold
    answers: list[requests.Response] = []
    thread = threading.Thread(
        target=lambda: answers.append(requests.post(server.invoke_url(skill), timeout=30, **kwargs))
    )
    thread.start()
    assert hold.matched.wait(30), "the request never reached the engine"

    def answer() -> requests.Response:
        hold.release.set()
        thread.join(timeout=30)
        (response,) = answers
        return response

    return hold, answer


@pytest.mark.parametrize("change", ["deactivate", "remove"])
def test_a_request_matched_before_its_scenario_goes_finishes_on_the_table_it_matched(
    serve: Serve, change: str
) -> None:
    server = serve(COUNTER)
    _, answer = held_invoke(server, "count")
    getattr(server.registry, change)("counter")  # lands between the match and the answer
    response = answer()
    assert (response.status_code, response.json()) == (200, {"n": 1})
    (entry,) = server.state.journal()
    assert (entry.scenario, entry.position, entry.status) == ("counter", 0, 200)
    assert invoke(server, "count").status_code == 404  # and the next request sees it gone


def test_a_protected_request_matched_before_its_scenario_goes_keeps_its_credentials(
    serve: Serve,
) -> None:
    server = serve(
        """
        name: guarded
        auth: {tokens: [{token: t0k3n, scopes: [run]}]}
        skills: [{id: count, requires: {scopes: [run]}, invoke: {json: {n: 1}}}]
        """
    )
    _, answer = held_invoke(server, "count", headers={"Authorization": "Bearer t0k3n"})
    server.registry.remove("guarded")
    response = answer()
    assert (response.status_code, response.json()) == (200, {"n": 1})


def test_a_request_in_flight_over_a_replace_does_not_take_the_new_sequences_first_step(
    serve: Serve,
) -> None:
    server = serve(COUNTER)
    _, answer = held_invoke(server, "count")
    replacement = COUNTER.replace("{n: 1}", "{n: 10}").replace("{n: 2}", "{n: 20}")
    # Through the admin app itself, not the wire: the held request holds the event
    # loop (the hook runs where the engine plans), and the swap must land meanwhile.
    put = server.app.test_client().put(
        "/__admin/scenarios/counter",
        data=replacement,
        headers={"Content-Type": "application/yaml"},
    )
    assert put.status_code == 200  # the swap has answered
    assert answer().json() == {"n": 1}  # the old sequence's first step, as it matched
    # Every request after the swap answered starts the new sequence afresh.
    assert [count(server), count(server)] == [10, 20]


def test_a_scenario_the_engine_cannot_play_is_refused_and_changes_nothing() -> None:
    engine = Engine(ScenarioSet(), State())  # no raw socket: no transport faults
    registry = Registry(engine)
    faulty = load_text("name: faulty\nskills: [{id: f, invoke: {fault: EMPTY_RESPONSE}}]\n")
    with pytest.raises(ScenarioError, match="raw socket"):
        registry.add(faulty)
    assert registry.scenarios == ()
    assert registry.add(faulty, active=False)[0].name == "faulty"  # loaded, not played
    with pytest.raises(ScenarioError, match="raw socket"):
        registry.activate("faulty")
    assert not registry.get("faulty").active


def test_reload_keeps_whether_each_scenario_is_active(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("name: a\nskills: [{id: a}]\n")
    b.write_text("name: b\nskills: [{id: b, invoke: [{json: 1}, {json: 2}]}]\n")
    with Server([a, b]) as server:
        server.deactivate("a")
        server.add("name: c\nskills: [{id: c}]\n")
        b.write_text("name: b\nskills: [{id: b, invoke: [{json: 10}]}]\n")
        result = server.reload([a, b])
        assert result.ok
        assert result.changed == ("b",)
        assert result.removed == ()
        listed = [(e.name, e.active) for e in server.scenarios]
        assert listed == [("a", False), ("b", True), ("c", True)]
        assert server.scenario_names == ["b", "c"]
        server.deactivate("b")
        b.write_text("name: b\nskills: [{id: b, invoke: [{json: 20}]}]\n")
        server.reload([a, b])
        listed = [(e.name, e.active) for e in server.scenarios]
        assert listed == [("a", False), ("b", False), ("c", True)]
        a.write_text("name: a\nskills: oops\n")
        before = server.scenarios
        failed = server.reload([a, b])
        assert failed.status == "failed"
        assert server.scenarios is before
        assert server.last_reload is failed


def test_reload_keeps_what_was_loaded_at_run_time_and_replaces_only_the_files(
    tmp_path: Path,
) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("name: a\nskills: [{id: a, invoke: {json: 1}}]\n")
    with Server([a]) as server:
        server.add(COUNTER)
        assert count(server) == 1
        a.write_text("name: a2\nskills: [{id: a, invoke: {json: 2}}]\n")
        result = server.reload([a])
        assert result.ok
        assert result.removed == ("a",)
        assert result.changed == ("a2",)
        assert server.scenario_names == ["a2", "counter"]
        assert count(server) == 2  # its sequence went on: the reload did not touch it
        assert next(e for e in server.scenarios if e.name == "counter").added


@pytest.mark.parametrize(
    ("text", "clash"),
    [
        ("name: counter\nskills: [{id: other}]\n", "'counter', loaded already (from <added 1>)"),
        ("name: a\nskills: [{id: count}]\n", "'count', served by active scenario 'counter'"),
    ],
    ids=["name", "skill-id"],
)
def test_a_reload_that_clashes_with_a_scenario_loaded_at_run_time_fails_and_changes_nothing(
    tmp_path: Path, text: str, clash: str
) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("name: a\nskills: [{id: a}]\n")
    with Server([a]) as server:
        server.add(COUNTER)
        before = server.scenarios
        a.write_text(text)
        result = server.reload([a])
        assert result.status == "failed"
        assert any(clash in p.found for p in result.problems), result.problems
        assert server.scenarios is before


def test_a_broken_add_reports_its_clashes_with_the_loaded_scenarios_too(serve: Serve) -> None:
    server = serve(COUNTER)
    before = server.scenarios
    with pytest.raises(ScenarioError) as caught:
        server.add("name: other\nskills:\n  - id: count\n    timeout_ms: soon\n")
    assert [(p.path, p.found.split(",")[0]) for p in caught.value.problems] == [
        ("skills[0].id", "'count'"),
        ("skills[0].timeout_ms", "'soon' (a string)"),
    ]
    assert "served by active scenario 'counter'" in caught.value.problems[0].found
    assert server.scenarios is before


def test_a_broken_reload_reports_its_clashes_with_run_time_scenarios_too(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("name: a\nskills: [{id: a}]\n")
    with Server([a]) as server:
        server.add(COUNTER)
        before = server.scenarios
        a.write_text("name: counter\nskills:\n  - id: count\n    invok: {json: 1}\n")
        result = server.reload([a])
        assert result.status == "failed"
        assert [(p.path, p.found.split(",")[0]) for p in result.problems] == [
            ("name", "'counter'"),
            ("skills[0].id", "'count'"),
            ("skills[0].invok", "unknown key 'invok'"),
        ]
        assert server.scenarios is before


def test_a_file_may_serve_the_skill_of_an_inactive_run_time_scenario(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("name: a\nskills: [{id: a}]\n")
    with Server([a]) as server:
        server.add(COUNTER, active=False)
        a.write_text("name: a\nskills: [{id: count, invoke: {json: {n: 9}}}]\n")
        assert server.reload([a]).ok
        assert count(server) == 9
        assert [(e.name, e.active) for e in server.scenarios] == [("a", True), ("counter", False)]


# -- the owner on its own: what the server, the watcher and the admin app all call ----------


def test_a_registry_alone_watches_its_files_and_swaps_each_edit_into_the_engine(
    tmp_path: Path,
) -> None:
    file = tmp_path / "s.yaml"
    file.write_text("name: s\nskills: [{id: one}]\n")
    engine = Engine(load_paths([file]), State())
    registry = Registry(engine)
    results: queue.Queue[ReloadResult] = queue.Queue()
    watcher = registry.watch([file], interval=0.05, on_reload=results.put)
    try:
        assert registry.last_reload == ReloadResult("none")  # the health answer's "reload"
        file.write_text("name: s\nskills: [{id: one}, {id: two}]\n")
        result = results.get(timeout=10)
        assert (result.status, result.changed) == ("ok", ("s",))
        assert [skill.id for skill in engine.scenarios.skills] == ["one", "two"]
        assert registry.last_reload is result
    finally:
        registry.stop_watching()
    assert not watcher.running


def test_load_names_text_and_refuses_a_broken_one_with_its_clashes_too() -> None:
    registry = Registry(Engine(load_text("name: a\nskills: [{id: a}]\n"), State()))
    (entry,) = registry.load("skills: [{id: b}]\n")
    assert (entry.origin, entry.active, entry.added) == ("<added 1>", True, True)
    before = registry.scenarios
    with pytest.raises(ScenarioError) as refused:
        registry.load("name: a\nskills: [{id: c, invoke: {error: NOPE}}]\n")
    found = " ".join(p.found for p in refused.value.problems)
    assert "NOPE" in found  # the problem in the text
    assert "loaded already" in found  # and its clash with the loaded scenario, at once
    assert registry.scenarios is before


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://127.0.0.1:1/0", 'is Redis running there? (shared_scenarios="memory"'),
        ("http://example.com", "shared_scenarios 'http://example.com': expected"),
    ],
)
def test_a_shared_set_it_cannot_serve_is_refused_and_nothing_is_shared(url: str, said: str) -> None:
    registry = Registry(Engine(load_text("name: a\nskills: [{id: a}]\n"), State()))
    with pytest.raises(CannotShare, match=re.escape(said)):
        registry.share_at(url, joins=False)
    assert registry.shared is None
    assert registry.version == 0
    registry.start_sharing()  # not shared: nothing to hear, nothing to stop
    registry.stop_sharing()
