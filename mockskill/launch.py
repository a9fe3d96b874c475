"""The ``mockskill`` command's first step: which memory allocator a serving process runs on.

``mockskill serve`` (the console script, ``python -m mockskill serve``, the
image) runs on the C library's allocator, ``PYTHONMALLOC=malloc``, not on
Python's own (pymalloc). pymalloc carves small objects out of 1 MiB arenas
and gives an arena back to the system only when *every* object in it is
gone. A flood of connections fills dozens of arenas; when it leaves, the few
hundred objects made during it that live on — a session's first state,
replaced caches, the free lists of the C extensions (uvloop's handles,
asyncio's future iterators) — are scattered over those arenas and hold each
one, ~1 MiB apiece: 10 000 hanging connections left the server 11-14 MB
above its idle size for good (issue 13 asks for 10 MB at most). glibc's
allocator keeps what it frees in pages that ``malloc_trim`` hands back
whatever lives beside them, so the same flood leaves ~3 MB. The price is
~3 % more instructions per request (``bench/callgrind_request.py``: 94.2 k
-> 97.4 k), measured in ``docs/performance.md``.

The allocator is chosen when the interpreter starts, from the environment,
so a ``serve`` that finds no ``PYTHONMALLOC`` sets it and executes itself
again at once (the same process id, arguments and interpreter flags), before
it has imported anything else. A ``PYTHONMALLOC`` already set is the user's
choice and is kept (``PYTHONMALLOC=pymalloc mockskill serve`` keeps Python's
allocator); other commands, an embedded :class:`~mockskill.Server` and
systems without ``exec`` (Windows) are left as they are.

Nothing here may import the rest of the package: its cost would be paid
twice (``mockskill/__init__`` imports nothing either until a name is asked for).

The image that serves then sets the cyclic collector's thresholds of a
serving process (:mod:`mockskill.server_process`) before it imports anything
else, rather than once the scenarios are loaded: at Python's own (700, 10)
the collector passed over the growing heap again and again while start-up
imported ~300 modules and built the scenario model, ~9.5 M of the ~665 M
instructions up to the first answer, and found next to nothing (a full
collection where the heap is frozen finds ~10 objects, either way).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's and collections.abc's imports cost the first image ~5 ms
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

SERVE_ALLOCATOR = "malloc"
"""The ``PYTHONMALLOC`` a serving process runs on when nobody chose one."""


def allocator_to_set(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The allocator to execute this process again on, or None to go on as it is."""
    if len(argv) < 2 or argv[1] != "serve":
        return None
    if "PYTHONMALLOC" in environ or os.name != "posix" or not sys.executable:
        return None
    return SERVE_ALLOCATOR


def main() -> None:
    """The console script: ``serve`` on its allocator (see the module), then the commands."""
    allocator = allocator_to_set(sys.argv, os.environ)
    if allocator is not None:
        # orig_argv keeps the interpreter's own flags (-X, -W, -m mockskill or the script).
        argv = [sys.executable, *sys.orig_argv[1:]]
        try:  # noqa: SIM105 - contextlib would be one more import for the first image
            os.execve(sys.executable, argv, {**os.environ, "PYTHONMALLOC": allocator})
        except OSError:
            # Not allowed to execute the interpreter again (a user switched by setpriv or
            # su without the search rights its path needs, a seccomp policy): serve on
            # Python's allocator rather than not at all.
            pass
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        _collect_as_a_server()
    from .cli import main as commands

    commands()


def _collect_as_a_server() -> None:
    """The collector's thresholds of a serving process, from its first import (see the module)."""
    import gc

    # (server_process imports gc and sys alone: nothing else of the package, yet)
    from .server_process import MIDDLE_GC_THRESHOLD, YOUNG_GC_THRESHOLD

    gc.set_threshold(YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, gc.get_threshold()[2])
