"""Whether this process may read the scenario paths it is given, and what to do when not.

A folder mounted into the Docker image is read by the image's user (uid
10001), not by whoever owns the files on the host; the same goes for any
server run under a service account. A path that user cannot read is a
problem like any other in a scenario file — positioned at the path, saying
which user could not read it and how to fix it (make it readable, or run as
a user who can) — not a traceback, and not a silent skip: a folder whose
listing is refused would otherwise look empty, and a subfolder left out
would look like scenarios that vanished.

Only regular files are read: a FIFO, a device or a socket named ``*.yaml``
(or given as a path) is a problem too, said before it is opened — opening a
FIFO waits for a writer, and ``/dev/zero`` never ends.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .problems import Problem

SCENARIO_SUFFIXES = (".yaml", ".yml")


def _user() -> str:
    return f"uid {_uid()} (the user mockskill runs as)"


def _uid() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else "UID"


def refused(path: Path, error: OSError, *, folder: bool) -> Problem:
    """The problem for *path*, which this process may not read (*error* says how)."""
    what = "folder" if folder else "file"
    found = (error.strerror or "permission denied").lower()
    owner = "UID:GID"
    try:
        info = path.stat()
    except OSError:
        pass  # a folder above it is closed: its owner cannot be seen either
    else:
        found += f" (owner uid {info.st_uid}, mode {stat.filemode(info.st_mode)})"
        owner = f"{info.st_uid}:{info.st_gid}"
    chmod = f"chmod -R a+rX {path}" if folder else f"chmod a+r {path}"
    fix = (
        f"make it readable by uid {_uid()}: {chmod} (for a Docker mount, on the host's"
        f" folder), or run mockskill as a user who can read it: docker run --user {owner}"
    )
    return Problem(str(path), 1, 1, f"({what})", f"a {what} {_user()} can read", found, fix)


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special(mode: int) -> str | None:
    """What a path of *mode* is, in words, when it is neither a regular file nor a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def not_a_file(path: Path, what: str) -> Problem:
    """The problem for *path*, which is *what* (:func:`special`) rather than a file."""
    return Problem(
        str(path),
        1,
        1,
        "(file)",
        "a scenario file or folder",
        f"{what} there",
        "only regular files are read (a pipe or a device may never end, or never begin)",
    )


def unreadable(path: Path) -> Problem | None:
    """A problem if *path* (a file or folder that exists) cannot be read by this process,
    or is not a regular file or a folder (a FIFO, a device, a socket)."""
    try:
        info = path.stat()
    except PermissionError:
        above = PermissionError(errno.EACCES, "permission denied on a folder above it")
        return refused(path, above, folder=False)
    except OSError:
        return None  # not there: the caller says so
    what = special(info.st_mode)
    if what is not None:
        return not_a_file(path, what)
    folder = stat.S_ISDIR(info.st_mode)
    wanted = os.R_OK | os.X_OK if folder else os.R_OK
    if os.access(path, wanted):
        return None
    return refused(path, PermissionError(errno.EACCES, "permission denied"), folder=folder)


def scenario_files(folder: Path) -> tuple[list[Path], list[Problem]]:
    """The YAML files under *folder*, sorted, and a problem for each part that cannot be read."""
    files: list[Path] = []
    problems: list[Problem] = []

    def cannot_list(error: OSError) -> None:
        where = Path(error.filename) if error.filename else folder
        problems.append(refused(where, error, folder=True))

    for root, _dirs, names in os.walk(folder, onerror=cannot_list):
        for name in names:
            path = Path(root) / name
            if path.suffix not in SCENARIO_SUFFIXES:
                continue
            problem = unreadable(path)
            if problem is None:
                files.append(path)
            else:
                problems.append(problem)
    return sorted(files), problems
