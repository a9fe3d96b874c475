"""mockskill in a pytest suite through testcontainers-python.

    pip install testcontainers pytest requests
    docker build -t mockskill .          # in mockskill's repository
    python -m pytest testcontainers_example.py

The session starts the image once, on a free host port, with this folder's
scenarios (examples/scenarios) mounted; each test gets a Mockskill-Session of
its own, so that sequences start afresh for it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from testcontainers.core.container import DockerContainer

IMAGE = "mockskill:latest"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"


@pytest.fixture(scope="session")
def mockskill() -> Iterator[str]:
    """The base URL of a mockskill container, stopped at the end of the session."""
    container = (
        DockerContainer(IMAGE)
        .with_exposed_ports(8080)
        .with_env("MOCKSKILL_SEED", "1234")
        .with_volume_mapping(str(SCENARIOS), "/scenarios", "ro")
    )
    with container:
        url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}"
        deadline = time.monotonic() + 30
        while True:  # what the image's HEALTHCHECK asks, from the host
            try:
                if requests.get(f"{url}/__admin/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mockskill did not answer at {url} within 30 s")
            time.sleep(0.1)
        yield url


@pytest.fixture
def session() -> dict[str, str]:
    return {"Mockskill-Session": f"test-{uuid.uuid4().hex[:12]}"}


def test_flaky_fails_twice_then_succeeds(mockskill: str, session: dict[str, str]) -> None:
    url = f"{mockskill}/skills/flaky/invoke"
    answers = [requests.post(url, headers=session, timeout=5) for _ in range(3)]
    assert [a.status_code for a in answers] == [503, 503, 200]
    error = answers[0].json()["error"]
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert error["retry"]["suggested_delay_ms"] == 200
    assert answers[0].headers["Retry-After"] == "1"


def test_an_invalid_descriptor_is_served_as_scripted(mockskill: str) -> None:
    descriptor = requests.get(f"{mockskill}/skills/broken", timeout=5).json()
    assert descriptor["capability_type"] == "unknown_type"
    assert "url" not in descriptor["endpoint"]
