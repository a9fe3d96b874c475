"""The ``--workers`` supervisor: N serving processes on one port.

A face: the command line starts it (``mockskill serve --workers N``), and each
worker is that same command. Modules:

- ``supervisor`` — the parent that keeps the port, starts, restarts and
  drains its workers, and the worker's side of the arrangement.

It may import the server face's listening helpers and every stage below; it
knows nothing of click.
"""
