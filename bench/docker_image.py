"""The Docker image: its size over the base image, and time from ``docker run`` to healthy.

Targets (issue 7): at most 50 MB over the base image's own size; healthy
within 1 s of ``docker run``.

It builds the image from the Dockerfile at the root (``--no-cache``, timed;
or measures ``--image TAG``), then, each round, takes the time from just
before ``docker run --detach --init --network host`` to

- ``started``: ``docker run`` has returned (the container is running);
- ``serving``: ``GET /__admin/health`` on its port answers 200 (polled on a
  new connection every 5 ms): what the image's HEALTHCHECK asks;
- ``docker healthy``: Docker's own status is ``healthy``. Docker (before 25)
  runs the first check one ``--health-interval`` after the start: the
  image's own 5 s, unless ``--health-interval`` is given here;
- ``stop``: how long ``docker stop`` takes after that.

For scale, ``docker run --rm IMAGE python -c pass`` (a container, and an
interpreter that starts and exits) is timed too. The base image is
``BASE_IMAGE`` (``python:3.12-slim`` unless set); the engine is the one
``docker`` reaches (``eval "$(.ci/setup-docker)"`` starts CI's).

Run::

    python bench/docker_image.py [--rounds 10] [--image TAG] [--health-interval 1s]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import _common as c

SIZE_TARGET_MB = 50.0
HEALTHY_TARGET_S = 1.0


def docker(*args: str, timeout: float = 120) -> str:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"docker {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout.strip()


def size_mb(image: str) -> float:
    return int(docker("image", "inspect", "--format", "{{.Size}}", image)) / 1e6


def serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{c.HOST}:{port}/__admin/health", timeout=1) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def one_round(image: str, health_interval: str | None, docker_status: bool) -> dict[str, float]:
    port = c.free_port()
    args = ["run", "--detach", "--init", "--network", "host", "--env", f"MOCKSKILL_PORT={port}"]
    if health_interval:
        args += ["--health-interval", health_interval]
    started = time.perf_counter()
    container = docker(*args, image)
    times = {"started": time.perf_counter() - started}
    try:
        deadline = started + 30
        while not serving(port):
            if time.perf_counter() > deadline:
                raise SystemExit(f"not serving after 30 s:\n{docker('logs', container)}")
            time.sleep(0.005)
        times["serving"] = time.perf_counter() - started
        if docker_status:
            template = "{{.State.Health.Status}}"
            while docker("inspect", "--format", template, container) != "healthy":
                if time.perf_counter() > deadline:
                    raise SystemExit("Docker did not report healthy within 30 s")
                time.sleep(0.02)
            times["docker healthy"] = time.perf_counter() - started
        stopping = time.perf_counter()
        docker("stop", container)
        times["stop"] = time.perf_counter() - stopping
    finally:
        subprocess.run(["docker", "rm", "--force", container], capture_output=True, check=False)
    return times


def python_floor(image: str) -> float:
    started = time.perf_counter()
    docker("run", "--rm", "--network", "host", "--entrypoint", "python", image, "-c", "pass")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="containers started")
    parser.add_argument("--image", help="measure this image instead of building one")
    parser.add_argument("--base", default=os.environ.get("BASE_IMAGE") or "python:3.12-slim")
    parser.add_argument("--health-interval", help="docker run --health-interval (image: 5s)")
    parser.add_argument(
        "--skip-docker-status", action="store_true", help="do not wait for Docker's own status"
    )
    options = parser.parse_args()

    image, built = options.image, None
    before = set(docker("images", "--all", "--quiet", "--no-trunc").split())
    if image is None:
        image = f"mockskill-bench:{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        docker(
            "build", "--no-cache", "--network", "host", "--build-arg",
            f"BASE_IMAGE={options.base}", "--tag", image, str(c.REPO), timeout=900,
        )  # fmt: skip
        built = time.perf_counter() - started
    try:
        base, total = size_mb(options.base), size_mb(image)
        print(f"## Image ({image} on {options.base})\n")
        rows: list[list[object]] = [
            ["base image", f"{base:.1f} MB", ""],
            ["mockskill image", f"{total:.1f} MB", ""],
            ["over the base", f"{total - base:.1f} MB", f"<= {SIZE_TARGET_MB:.0f} MB"],
        ]
        if built is not None:
            rows.append(["build (no cache, pip downloads included)", f"{built:.1f} s", ""])
        c.print_table(["what", "value", "target"], rows)
        base_id = docker("image", "inspect", "--format", "{{.Id}}", options.base)
        print("\nLayers over the base (newest first):\n")
        history = docker("history", "--no-trunc", "--format", "{{json .}}", image)
        for layer in map(json.loads, history.splitlines()):
            if layer["ID"] == base_id:
                break
            if layer["Size"] not in ("0B", "0"):
                print(f"- {layer['Size']:>8}  {' '.join(layer['CreatedBy'].split())[:100]}")

        floors = [python_floor(image) for _ in range(3)]
        results = [
            one_round(image, options.health_interval, not options.skip_docker_status)
            for _ in range(options.rounds)
        ]
        interval = options.health_interval or "5s (the image's)"
        print(f"\n## From docker run ({options.rounds} rounds; health interval {interval})\n")
        rows = []
        for key in results[0]:
            values = [r[key] for r in results]
            target = f"<= {HEALTHY_TARGET_S:.0f} s" if key == "serving" else ""
            rows.append(
                [
                    key,
                    f"{c.median(values):.3f}",
                    f"{c.percentile(values, 90):.3f}",
                    f"{min(values):.3f}",
                    f"{max(values):.3f}",
                    target,
                ]
            )
        rows.append(["(docker run python -c pass)", f"{c.median(floors):.3f}", "", "", "", ""])
        c.print_table(["seconds", "median", "p90", "min", "max", "target"], rows)
        print(f"\n{c.machine()}; engine {docker('version', '--format', '{{.Server.Version}}')}")
    finally:
        if built is not None:  # the image, and the build stage it left behind
            subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
            for _ in range(3):
                made = set(docker("images", "--all", "--quiet", "--no-trunc").split()) - before
                for image_id in made:
                    subprocess.run(["docker", "rmi", image_id], capture_output=True, check=False)


if __name__ == "__main__":
    main()
