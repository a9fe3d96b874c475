"""Scenario states across endpoints, on a real server with real clients (WireMock's
scenario states): a step moves the session into a named state (``set_state:``), a case
requires one (``state:``); per session and per scenario, ``Started`` until moved, put back
by a reset; shared by every replica on Redis.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from collections.abc import Callable

import httpx
import pytest
import requests

from mockskill import Server
from mockskill.scenario.loader import combine, load_text

ORDERS = """
name: orders
routes:
  - path: /orders
    method: POST
    steps:
      - status: 201
        json: {id: 1}
        set_state: placed
  - path: /orders/1/pay
    method: POST
    cases:
      - state: placed
        json: {id: 1, status: paid}
        set_state: paid
    steps:
      - status: 409
        json: {error: nothing to pay}
  - path: /orders/1
    cases:
      - state: placed
        json: {id: 1, status: placed}
      - state: paid
        json: {id: 1, status: paid}
    steps:
      - status: 404
        json: {error: no such order}
  - path: /orders/1/cancel
    method: POST
    steps:
      - status: 204
        set_state: Started
"""


def get(server: Server, path: str, session: str) -> requests.Response:
    return requests.get(server.url + path, headers={"Mockskill-Session": session}, timeout=10)


def post(server: Server, path: str, session: str) -> requests.Response:
    return requests.post(server.url + path, headers={"Mockskill-Session": session}, timeout=10)


def test_after_post_orders_get_orders_1_returns_it(serve: Callable[..., Server]) -> None:
    server = serve(ORDERS)
    assert get(server, "/orders/1", "s").status_code == 404
    assert post(server, "/orders", "s").status_code == 201
    assert get(server, "/orders/1", "s").json() == {"id": 1, "status": "placed"}
    assert post(server, "/orders/1/pay", "s").json() == {"id": 1, "status": "paid"}
    assert get(server, "/orders/1", "s").json() == {"id": 1, "status": "paid"}
    assert post(server, "/orders/1/pay", "s").status_code == 409  # paid: nothing to pay
    assert post(server, "/orders/1/cancel", "s").status_code == 204  # back to Started
    assert get(server, "/orders/1", "s").status_code == 404


def test_the_state_is_the_sessions_own(serve: Callable[..., Server]) -> None:
    server = serve(ORDERS)
    post(server, "/orders", "alice")
    assert get(server, "/orders/1", "alice").status_code == 200
    assert get(server, "/orders/1", "bob").status_code == 404


def test_a_reset_puts_the_session_back_in_started(serve: Callable[..., Server]) -> None:
    server = serve(ORDERS)
    for session in ("a", "b", "c"):
        post(server, "/orders", session)
    server.reset("a")
    assert get(server, "/orders/1", "a").status_code == 404
    assert get(server, "/orders/1", "b").status_code == 200
    reset = requests.post(f"{server.url}/__admin/reset?session=b", timeout=10)
    assert reset.status_code == 200
    assert get(server, "/orders/1", "b").status_code == 404
    assert get(server, "/orders/1", "c").status_code == 200
    server.reset()
    assert get(server, "/orders/1", "c").status_code == 404


def test_each_scenario_has_its_own_state(serve: Callable[..., Server]) -> None:
    other = """
    name: carts
    routes:
      - path: /carts
        method: POST
        steps:
          - json: {cart: 1}
            set_state: placed
      - path: /carts/1
        cases:
          - state: placed
            json: {cart: 1}
    """
    scenarios = combine(
        [
            load_text(textwrap.dedent(ORDERS), "orders.yaml"),
            load_text(textwrap.dedent(other), "carts.yaml"),
        ]
    )
    with Server(scenarios) as server:
        post(server, "/carts", "s")  # placed in carts, not in orders
        assert get(server, "/carts/1", "s").json() == {"cart": 1}
        assert get(server, "/orders/1", "s").status_code == 404


def test_a_cases_only_endpoint_says_which_state_the_session_is_in(
    serve: Callable[..., Server],
) -> None:
    server = serve("""
    name: shop
    routes:
      - path: /cart
        method: POST
        steps:
          - json: {ok: true}
            set_state: filled
      - path: /checkout
        method: POST
        cases:
          - state: filled
            when: {body: {/pay: card}}
            json: {paid: true}
    """)
    missed = requests.post(f"{server.url}/checkout", json={"pay": "card"}, timeout=10)
    assert missed.status_code == 404
    [near] = missed.json()["error"]["details"]["near_misses"]
    assert near["reasons"] == ["the session's state is 'Started', not 'filled'"]
    requests.post(f"{server.url}/cart", timeout=10)
    wrong_body = requests.post(f"{server.url}/checkout", json={"pay": "cash"}, timeout=10)
    assert wrong_body.json()["error"]["details"]["near_misses"][0]["reasons"] == [
        "body /pay equals 'card': found \"cash\""
    ]
    assert requests.post(f"{server.url}/checkout", json={"pay": "card"}, timeout=10).json() == {
        "paid": True
    }


def test_a_skill_invocation_moves_the_state_a_route_requires(
    serve: Callable[..., Server],
) -> None:
    server = serve("""
    name: tasks
    skills:
      - id: start-task
        invoke:
          one_of:
            - json: {task: 7}
              set_state: running
    routes:
      - path: /tasks/7
        cases:
          - state: running
            json: {task: 7, status: running}
        steps:
          - status: 404
            json: {error: no task}
    """)
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{server.url}/tasks/7").status_code == 404
        assert client.post(server.invoke_url("start-task"), json={"input": {}}).json() == {
            "task": 7
        }
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        ["curl", "-s", f"{server.url}/tasks/7"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(done.stdout) == {"task": 7, "status": "running"}


def test_replicas_on_one_redis_share_the_state(redis_url: str) -> None:
    scenarios = load_text(ORDERS.replace("name: orders", "name: shared-orders"), "orders.yaml")
    with Server(scenarios, state=redis_url) as one, Server(scenarios, state=redis_url) as two:
        assert get(two, "/orders/1", "r").status_code == 404
        assert post(one, "/orders", "r").status_code == 201
        assert get(two, "/orders/1", "r").json() == {"id": 1, "status": "placed"}
        assert post(two, "/orders/1/pay", "r").status_code == 200
        assert get(one, "/orders/1", "r").json() == {"id": 1, "status": "paid"}
        one.reset("r")
        assert get(two, "/orders/1", "r").status_code == 404
