"""The command line: the ``mockskill`` command and its subcommands.

A face: it may import every stage below and the other faces (the server, the
``--workers`` supervisor); nothing below imports it. Modules:

- ``main`` — the command group: ``validate``, ``report``, ``check-descriptor``,
  ``schema``, and :func:`main`, the console script;
- ``serve`` — ``mockskill serve``: options to a running :class:`~mockskill.server.Server`;
- ``workers`` — ``serve --workers N``: the settings handed to the supervisor;
- ``record`` — ``mockskill record``: a recording proxy from the command line;
- ``report`` — ``mockskill report``: a consumer's verdict from a journal;
- ``verify`` — ``mockskill verify``: whether a consumer sent the requests named;
- ``generate`` — ``mockskill generate``: a failure pack from Skill Descriptors;
- ``sources`` — a descriptor read from a file, a URL or standard input (for
  ``check-descriptor`` and ``generate``);
- ``options`` — what several commands share: paths, the admin token, messages;
- ``banner`` — what ``serve`` prints when it starts and on each reload.
"""

from __future__ import annotations

from .main import cli, main

__all__ = ["cli", "main"]
