"""A step's body given as bytes: ``body_base64:`` in the file, or ``body_file:`` beside it.

``json:`` and ``text:`` are bodies a person writes; an answer a provider
sent compressed (``Content-Encoding: gzip``) or binary (an image, a
download) is bytes that no text can hold exactly. These keys hold them, and
the step sends them as they are (no ``{base_url}`` is filled in), with the
step's ``Content-Type`` header (``application/octet-stream`` without one).

``body_file`` is read once, at load time, from the scenario file's own
folder: a relative path that stays inside it (symbolic links resolved), a
regular file of at most :data:`MAX_BODY_FILE_BYTES`. A scenario that is not
a file on disk (text uploaded to ``/__admin/scenarios``, a recording being
checked) has no folder, so no ``body_file``: it could otherwise read any
file the server may read, and serve it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from typing import Any

from .problems import Path, describe
from .reader import Reader

BYTES_TYPE = "application/octet-stream"
"""The type of a bytes body whose step sets no ``Content-Type``."""
MAX_BODY_FILE_BYTES = 8 * 1024 * 1024
"""The largest file a ``body_file`` may name (it is held in memory, as every body is)."""
_BASE64 = "base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =; line breaks allowed)"


def base64_body(r: Reader, value: Any, path: Path) -> bytes | None:
    """The bytes *value* (``body_base64``) stands for, or None with a problem."""
    if not isinstance(value, str):
        r.bad(path, _BASE64, describe(value))
        return None
    packed = re.sub(r"\s+", "", value)  # a long value is folded over lines in YAML
    try:
        return base64.b64decode(packed, validate=True)
    except (binascii.Error, ValueError) as exc:
        shown = packed if len(packed) <= 40 else f"{packed[:37]}..."
        r.bad(path, _BASE64, f"{shown!r}, which is not ({exc})")
        return None


def file_body(r: Reader, value: Any, path: Path) -> bytes | None:
    """The bytes of the file *value* (``body_file``) names, or None with a problem."""
    expected = "the path of a file beside the scenario (relative to its folder, inside it)"
    if not isinstance(value, str) or not value:
        r.bad(path, expected, describe(value))
        return None
    folder = r.doc.folder
    if folder is None:
        r.bad(
            path,
            "body_file in a scenario read from a file",
            f"a scenario given as text ({r.doc.file})",
            "there is no folder to read it from: use body_base64",
        )
        return None
    if os.path.isabs(value):
        r.bad(path, expected, f"{value!r}, an absolute path")
        return None
    root = os.path.realpath(folder)
    found = os.path.realpath(os.path.join(root, value))
    if os.path.commonpath((root, found)) != root:
        r.bad(path, expected, f"{value!r}, which is outside {root} ({found})")
        return None
    try:
        # Not blocking: a FIFO named here must not hold the load up (it is refused below).
        handle = os.open(found, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(handle, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                r.bad(path, expected, f"{value!r}, which is not a regular file ({found})")
                return None
            if info.st_size > MAX_BODY_FILE_BYTES:
                r.bad(
                    path,
                    f"a file of at most {MAX_BODY_FILE_BYTES} bytes",
                    f"{value!r}, {info.st_size} bytes",
                )
                return None
            body = file.read(MAX_BODY_FILE_BYTES + 1)
    except OSError as exc:
        r.bad(path, expected, f"{value!r}, which cannot be read: {exc.strerror or exc}")
        return None
    if len(body) > MAX_BODY_FILE_BYTES:  # (it grew while being read)
        r.bad(path, f"a file of at most {MAX_BODY_FILE_BYTES} bytes", f"{value!r}, more")
        return None
    return body
