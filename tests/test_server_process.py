"""A process that is the server's: the start-up heap frozen, young collections rarer,
the GIL's switch interval shorter."""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Iterator

import pytest
import requests

from mockskill import Server, load_text


@contextlib.contextmanager
def _serving_forever() -> Iterator[Server]:
    """A server run as the CLI runs it (serve_forever, here on a thread), stopped after."""
    server = Server(load_text("skills: [{id: a}]"))
    server.bind()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(timeout=10)


def test_serve_forever_freezes_the_start_up_heap_and_an_embedded_server_does_not() -> None:
    """The CLI's way of serving keeps the loaded scenarios, app and modules out of the
    cyclic collector's walks (gc.freeze); a server embedded in a test suite leaves the
    suite's collector alone."""
    gc.unfreeze()
    threshold = gc.get_threshold()
    with Server(load_text("skills: [{id: a}]")) as embedded:
        assert requests.get(f"{embedded.url}/skills", timeout=10).status_code == 200
        assert gc.get_freeze_count() == 0
    try:
        with _serving_forever() as server:
            # Frozen before the loop serves anything: answered means frozen.
            assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_serve_forever_collects_young_and_middle_generations_less_often_embedded_not() -> None:
    """A burst's connections keep what they allocate alive while they wait: the CLI's
    way of serving collects the young and the middle generations less often (fewer
    walks over them); an embedded server leaves the suite's collector as it is."""
    from mockskill.server import MIDDLE_GC_THRESHOLD, YOUNG_GC_THRESHOLD

    suites = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's own
    before = gc.get_threshold()
    with Server(load_text("skills: [{id: a}]")) as embedded:
        assert requests.get(f"{embedded.url}/skills", timeout=10).status_code == 200
        assert gc.get_threshold() == before
    try:
        with _serving_forever() as server:
            assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
            assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, before[2])
            assert before[0] < YOUNG_GC_THRESHOLD
            assert before[1] < MIDDLE_GC_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*suites)


def test_serve_forever_shortens_the_switch_interval_and_an_embedded_server_does_not() -> None:
    """A busy admin worker gives the GIL back to the loop's thread within 1 ms in the
    CLI's way of serving; a server embedded in a test suite leaves the suite's
    interval as it is."""
    from mockskill.server_process import SWITCH_INTERVAL

    suites = sys.getswitchinterval()
    gc_threshold = gc.get_threshold()
    sys.setswitchinterval(0.005)  # Python's own
    try:
        with Server(load_text("skills: [{id: a}]")) as embedded:
            assert requests.get(f"{embedded.url}/skills", timeout=10).status_code == 200
            assert sys.getswitchinterval() == pytest.approx(0.005)
        with _serving_forever() as server:
            assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
            assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
            assert SWITCH_INTERVAL < 0.005
    finally:
        gc.unfreeze()
        gc.set_threshold(*gc_threshold)
        sys.setswitchinterval(suites)
