"""``/__admin/recordings``: the server's recording over HTTP.

``POST /__admin/recordings/start`` (``{target?, out?, delays?, name?, force?}``),
``POST /__admin/recordings/stop`` (``{out?, delays?, force?}``: the YAML itself
without ``out``) and ``GET /__admin/recordings/status``, each through the
server's :class:`~.recordings.Recordings` (docs/admin.md).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from ..control.registry import Registry
from ..protocol.catalog import unified_body
from ..recording import RecordingError
from ..scenario.loader import NAME_TEXT, SCENARIO_NAME
from .recordings import OUT_PATH, RecordingRefused, recordings_of


def register(bp: Blueprint, registry: Registry) -> None:
    """Add ``/recordings/start``, ``/stop`` and ``/status`` to *bp*."""
    recordings = recordings_of(registry)

    def options() -> dict[str, Any]:
        data = request.get_json(silent=True) if request.get_data() else {}
        if not isinstance(data, dict):
            raise RecordingRefused(
                400,
                "MOCKSKILL_BAD_REQUEST",
                "the body is a JSON object: {target?, out?, delays?, name?, force?}",
            )
        for key, kind in (
            ("target", str),
            ("out", str),
            ("name", str),
            ("delays", bool),
            ("force", bool),
        ):
            if key in data and not isinstance(data[key], kind):
                raise RecordingRefused(
                    400, "MOCKSKILL_BAD_REQUEST", f"{key} is a {kind.__name__}", key=key
                )
        unknown = sorted(set(data) - {"target", "out", "name", "delays", "force"})
        if unknown:
            raise RecordingRefused(
                400, "MOCKSKILL_BAD_REQUEST", f"unknown keys: {', '.join(unknown)}", keys=unknown
            )
        out = data.get("out")
        if out is not None and (not OUT_PATH.fullmatch(out) or ".." in out.split("/")):
            # Over HTTP, a file name under the server's directory: never a path anywhere.
            raise RecordingRefused(
                400,
                "MOCKSKILL_BAD_REQUEST",
                "out is a path relative to the server's working directory, ending in .yaml"
                " or .yml, without '..'",
                key="out",
            )
        name = data.get("name")
        if name is not None and not SCENARIO_NAME.fullmatch(name):
            raise RecordingRefused(400, "MOCKSKILL_BAD_REQUEST", f"name is {NAME_TEXT}", key="name")
        return data

    @bp.post("/recordings/start")
    def start_recording() -> tuple[dict[str, Any], int]:
        """Start recording what is forwarded (to ``target``, if given) (docs/admin.md)."""
        try:
            data = options()
            recordings.start(
                data.get("target"),
                data.get("out"),
                delays=data.get("delays", True) is not False,
                name=data.get("name") or "recording",
                force=data.get("force", False) is True,
            )
        except RecordingRefused as exc:
            return exc.body(), exc.status
        return recordings.status(), 201

    @bp.post("/recordings/stop")
    def stop_recording() -> Any:
        """Stop; write the file to ``out`` (JSON about it), or answer the YAML itself."""
        try:
            data = options()
            stopped = recordings.stop(
                data.get("out"), delays=data.get("delays"), force=data.get("force")
            )
        except RecordingRefused as exc:
            return exc.body(), exc.status
        except RecordingError as exc:
            details = {"problems": [p.as_json() for p in exc.problems], "kept": True}
            return unified_body("MOCKSKILL_RECORDING_INVALID", exc.why, details), 422
        if stopped.path is None:
            return Response(stopped.written.text, mimetype="application/yaml")
        return {
            "out": stopped.path,
            "count": stopped.written.count,
            "dropped": stopped.dropped,
            "redacted": list(stopped.written.redacted),
            "echoed": stopped.written.echoed,
            "notes": list(stopped.written.notes),
        }

    @bp.get("/recordings/status")
    def recording_status() -> dict[str, Any]:
        """Whether a recording runs: its target, since when, exchanges kept and dropped."""
        return recordings.status()
