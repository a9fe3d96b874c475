"""A wheel, installed without the source tree, still serves the bundled scenarios."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        timeout=240,
    )
    (built,) = out.glob("mockskill-*.whl")
    return built


def test_the_wheel_carries_scenarios_schema_and_type_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = {p.name for p in (ROOT / "scenarios").glob("*.yaml")}
    assert bundled
    assert {f"mockskill/scenarios/{name}" for name in bundled} <= names
    assert "mockskill/py.typed" in names
    # the JSON files the package reads at run time
    assert {"mockskill/admin/openapi.json", "mockskill/descriptor.schema.json"} <= names
    assert "mockskill/scenario.schema.json" in names
    dashboard = {p.name for p in (ROOT / "mockskill" / "admin" / "dashboard").iterdir()}
    assert {"index.html", "dashboard.js", "dashboard.css"} <= dashboard
    assert {f"mockskill/admin/dashboard/{name}" for name in dashboard} <= names
    assert not any(name.startswith(("tests/", "scenarios/")) for name in names)


@pytest.mark.timeout(300)
def test_a_non_editable_install_serves_the_bundled_scenarios_from_elsewhere(
    wheel: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    # System site-packages give Flask & co. without a download (pip installs only
    # what they lack: httptools); the wheel's own copy of mockskill shadows the
    # editable one of the checkout. The environment gets no pip of its own: this
    # one installs into it (--python), as the Dockerfile's build stage does.
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheel)],
        check=True,
        timeout=120,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import mockskill; print(mockskill.bundled_path())"],
        cwd=elsewhere,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir))
    assert not where.startswith(str(ROOT))

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [str(env_dir / "bin" / "mockskill"), "serve", "--port", str(port), "--quiet"],
        cwd=elsewhere,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = requests.get(f"http://127.0.0.1:{port}/skills/translate", timeout=2)
                break
            except requests.ConnectionError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert response.status_code == 200
        assert response.json()["id"] == "translate"
        page = requests.get(f"http://127.0.0.1:{port}/__admin/dashboard/dashboard.js", timeout=5)
        assert page.status_code == 200  # the dashboard's files come from the installed wheel
    finally:
        process.terminate()
        process.communicate(timeout=10)
