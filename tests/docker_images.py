"""Images on one Docker engine, shared by the suite's xdist workers: used, then removed.

Two test files build the Dockerfile at the root on the engine at once
(tests/test_docker.py and tests/test_typescript_package.py). A build takes its cache
from what the engine has, the other file's image included, so removing an image while
another worker still builds or runs from it fails that worker ("failed to set parent ...:
unknown parent image ID"). A worker therefore holds :func:`using` (a shared lock) from
its first build to its last container, and :func:`removing` (the lock whole, once every
user has let go) to remove what it made. The lock is a file, as the workers are processes.
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "mockskill-test-docker-images.lock"


@contextmanager
def _locked(kind: int) -> Iterator[None]:
    with LOCK.open("a") as held:
        fcntl.flock(held, kind)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


@contextmanager
def using() -> Iterator[None]:
    """Building images and running containers from them, beside other workers doing so."""
    with _locked(fcntl.LOCK_SH):
        yield


@contextmanager
def removing() -> Iterator[None]:
    """Removing images, once no worker builds or runs any (let go of :func:`using` first)."""
    with _locked(fcntl.LOCK_EX):
        yield
