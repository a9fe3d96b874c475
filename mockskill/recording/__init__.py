"""Record and replay: proxied exchanges in, a scenario file out (or descriptors in, a
failure pack out).

This stage owns what a recording is while it runs and what it becomes:
:class:`~.buffer.Recording`, the :class:`~mockskill.engine.exchange.Recorder`
that keeps the exchanges a proxy hands it (in order, bounded, never blocking
the serving loop); :mod:`.secrets`, which says what of an exchange is a
secret and keeps it out of the file (:mod:`.replay_credentials`: what a replay accepts
instead); :mod:`.answers`, :mod:`.error_steps` and :mod:`.rebase`, an answer as a
step (a protocol error as its ``error:`` step, URLs back to ``{base_url}``, what it
echoes of its request as ``{{...}}`` placeholders: :mod:`.echoes`; a relayed stream of
events as a ``stream:`` step with its timing: :mod:`.stream_steps`);
:mod:`.request_cases`, which finds the conditions that tell an endpoint's
different requests apart (its ``cases``); :mod:`.endpoints`, an endpoint's
requests as the sequences and cases a replay plays; and :mod:`.writer`,
which turns the exchanges into scenario YAML and checks it with the
project's own loader before anyone writes it. :mod:`.failure_packs` writes a scenario
from Skill Descriptors instead: a named case for every way each skill can fail
(``mockskill generate``).

It may import :mod:`mockskill.engine`, :mod:`mockskill.scenario` and
:mod:`mockskill.protocol`. The admin stage and the faces import it.
"""

from __future__ import annotations

from .buffer import Recording, Status, dump
from .writer import RecordingError, Written, write

__all__ = ["Recording", "RecordingError", "Status", "Written", "dump", "write"]
