"""A server's recording: started, stopped, looked at.

:class:`Recordings` is the one recording a server may run at a time. Started
with a target, it loads an in-memory scenario whose ``proxy:`` forwards
every request nothing else scripts (:data:`PROXY_SCENARIO`), and sets a
:class:`~mockskill.recording.Recording` as the engine's recorder; without a
target it records what the proxies already served forward. Stopped, it
unsets the recorder, unloads that scenario and turns the exchanges into a
scenario file (:func:`mockskill.recording.write`), written to ``out`` or
handed back. A recording that does not make a valid file stays here,
stopped, with its exchanges (:attr:`Recordings.failed`): nothing is lost,
and stopping again tries again (without delays, say). Its methods take one
lock, so the admin's threads, a signal handler and the Python API may call
them alike.

Where a file goes is checked at start and again when it is written
(:func:`save`): a relative ``out`` stays under the working directory once
its folders' symbolic links are resolved, and an existing file is replaced
only when asked (``force``). The file is written whole (a temporary file
linked or renamed into place) with the usual permissions: ``0666`` less the
process's umask, as any tool that writes a file makes it.

Its routes are :mod:`.recording_routes`'s; this module does not import Flask
(``mockskill record`` and ``Server.recording`` use it without the admin app).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..control.registry import Registry, UnknownScenario
from ..protocol import jsonstyle
from ..protocol.catalog import unified_body
from ..recording import Recording, RecordingError, Written, write
from ..scenario.loader import load_text
from ..scenario.problems import ScenarioError

OUT_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*\.ya?ml")
"""``out`` over HTTP (the OpenAPI document's pattern)."""
PROXY_SCENARIO = "mockskill-recording"
"""The name of the scenario a recording with a target loads (forwarding to it)."""


class RecordingRefused(Exception):
    """A start or stop that cannot be done now: answered with *status* and the unified body."""

    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def body(self) -> dict[str, Any]:
        return unified_body(self.code, self.message, self.details or None)


@dataclass(frozen=True)
class Stopped:
    """A recording stopped and written: the file's text, and where it went (if anywhere)."""

    written: Written
    path: str | None
    dropped: int


class Recordings:
    """The recording of one server (at most one at a time)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._current: Recording | None = None
        self._out: str | None = None
        self._delays = True
        self._name = "recording"
        self._force = False
        self._loaded_proxy = False
        self.failed: Recording | None = None
        """A stopped recording whose file could not be made (its exchanges kept)."""

    @property
    def current(self) -> Recording | None:
        return self._current

    def start(
        self,
        target: str | None = None,
        out: str | None = None,
        *,
        delays: bool = True,
        name: str = "recording",
        force: bool = False,
    ) -> Recording:
        """Record from now on: forwarding unscripted requests to *target*, if given; written
        to *out* when stopped (an existing file only replaced with *force*)."""
        with self._lock:
            if self._current is not None:
                raise RecordingRefused(
                    409,
                    "MOCKSKILL_RECORDING_CONFLICT",
                    "a recording is already running: stop it first",
                    target=self._current.target,
                )
            if out is not None:  # said now, not at stop (and checked again then)
                check_out(out, force=force)
            if target is None and not _proxies_somewhere(self.registry):
                raise RecordingRefused(
                    400,
                    "MOCKSKILL_BAD_REQUEST",
                    "nothing here forwards to a provider: give the recording a target"
                    " (the provider's URL), or serve a scenario with proxy:",
                )
            if target is not None:
                try:
                    proxy = load_text(
                        f"name: {PROXY_SCENARIO}\nproxy: {jsonstyle.dumps(target)}\n",
                        "<recording target>",
                    )
                except ScenarioError as exc:
                    raise RecordingRefused(
                        400,
                        "MOCKSKILL_BAD_REQUEST",
                        f"the recording's target {target!r} is not a provider's URL",
                        problems=[p.as_json() for p in exc.problems],
                    ) from None
                self.registry.add(proxy, replace=True)
                self._loaded_proxy = True
            recording = Recording(target)
            self._current, self._out, self._delays, self._name = recording, out, delays, name
            self._force = force
            self.failed = None
            self.registry.engine.recorder = recording
            return recording

    def stop(
        self, out: str | None = None, *, delays: bool | None = None, force: bool | None = None
    ) -> Stopped:
        """Stop recording and write the file (to *out*, or the start's, if any; an existing
        file only replaced with *force*, or the start's).

        Raises :class:`~mockskill.recording.RecordingError` when the exchanges do
        not make a valid file: the recording is kept (:attr:`failed`) and a next
        ``stop`` tries again.
        """
        with self._lock:
            recording = self._current or self.failed
            if recording is None:
                raise RecordingRefused(
                    409, "MOCKSKILL_NOT_RECORDING", "no recording is running: start one first"
                )
            if self._current is not None:
                self.registry.engine.recorder = None
                recording.close()
                self._current = None
                if self._loaded_proxy:
                    self._loaded_proxy = False
                    with contextlib.suppress(UnknownScenario):  # (removed by hand already)
                        self.registry.remove(PROXY_SCENARIO)
            status = recording.status()
            try:
                written = write(
                    recording.exchanges(),
                    name=self._name,
                    target=recording.target,
                    delays=self._delays if delays is None else delays,
                    dropped=status.dropped,
                    max_delay_ms=self.registry.max_delay_ms,
                )
            except RecordingError:
                self.failed = recording
                raise
            path = out or self._out
            if path is not None:
                try:
                    save(path, written.text, force=self._force if force is None else force)
                except RecordingRefused:
                    self.failed = recording
                    raise
                except OSError as exc:
                    self.failed = recording
                    raise RecordingRefused(
                        500,
                        "MOCKSKILL_RECORDING_UNWRITTEN",
                        f"could not write {path}: {exc.strerror or exc}",
                        out=path,
                    ) from None
            self.failed = None
            return Stopped(written, path, status.dropped)

    def status(self) -> dict[str, Any]:
        with self._lock:
            recording = self._current or self.failed
            if recording is None:
                return {
                    "recording": False,
                    "target": None,
                    "since": None,
                    "count": 0,
                    "dropped": 0,
                    "bytes": 0,
                    "out": None,
                }
            body = recording.status().as_json()
            body["out"] = self._out
            if self.failed is not None:
                body["failed"] = True
            return body


def _proxies_somewhere(registry: Registry) -> bool:
    """Whether a served scenario forwards somewhere (``proxy:``, or a proxy step)."""
    for scenario in registry.engine.scenarios.scenarios:
        if scenario.proxy is not None:
            return True
        for sequence in (
            *(s for k in scenario.skills for s in k.sequences),
            *(s for r in scenario.routes for s in r.sequences),
        ):
            if any(step.proxy is not None for step in sequence.steps):
                return True
    return False


def check_out(out: str, *, force: bool = False) -> Path:
    """Where *out* is written (its folder's links resolved), or a :class:`RecordingRefused`:
    a folder that is not one, a relative path whose folder leads out of the working
    directory (through a symbolic link), an existing file without *force* (409)."""
    given = Path(out)
    if not given.parent.is_dir():
        raise RecordingRefused(
            400, "MOCKSKILL_BAD_REQUEST", f"out: {given.parent} is not a folder", key="out"
        )
    folder = given.parent.resolve()
    if not given.is_absolute():
        here = Path.cwd().resolve()
        if folder != here and here not in folder.parents:
            raise RecordingRefused(
                400,
                "MOCKSKILL_BAD_REQUEST",
                f"out: {given.parent} leads out of the working directory (to {folder})",
                key="out",
            )
    target = folder / given.name
    if not force and os.path.lexists(target):
        raise RecordingRefused(
            409,
            "MOCKSKILL_RECORDING_EXISTS",
            f"out: {out} exists; force replaces it",
            key="out",
            out=out,
        )
    return target


def save(path: str, text: str, *, force: bool = False, mode: int = 0o666) -> None:
    """Write *text* to *path* whole or not at all: a temporary file beside it, made with the
    usual permissions (*mode* less the umask), then renamed over it (*force*) or linked to
    it, which fails if a file is there (:func:`check_out`'s refusals, checked again)."""
    target = check_out(path, force=force)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(temporary, flags, mode)  # the umask applies, as for any new file
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        if force:
            os.replace(temporary, target)
        else:
            try:
                os.link(temporary, target)  # never over a file that appeared meanwhile
            except FileExistsError:
                raise RecordingRefused(
                    409,
                    "MOCKSKILL_RECORDING_EXISTS",
                    f"out: {path} exists; force replaces it",
                    key="out",
                    out=path,
                ) from None
    finally:
        temporary.unlink(missing_ok=True)


_OF: weakref.WeakKeyDictionary[Registry, Recordings] = weakref.WeakKeyDictionary()
_OF_LOCK = threading.Lock()


def recordings_of(registry: Registry) -> Recordings:
    """The recording of the server *registry* belongs to (one per registry, made once)."""
    with _OF_LOCK:
        found = _OF.get(registry)
        if found is None:
            found = _OF[registry] = Recordings(registry)
        return found
