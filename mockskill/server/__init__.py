"""The Python server API: :class:`Server`, the mock skill provider in a thread or the foreground.

A face: the command line, the pytest plugin and user code run it. Modules:

- ``server`` — :class:`Server`: binds, serves the event-loop transport, stops; its
  scenario methods delegate to :mod:`mockskill.control`'s registry, its HTTPS ones
  to ``https``;
- ``expectations`` — :meth:`Server.expect`: expectations from Python, as
  pytest-httpserver users write them, served as scenarios and checked from the journal;
- ``dispatch`` — what the transport asks of mockskill request by request:
  skill requests to the engine, ``/__admin`` to the WSGI app in a thread pool;
- ``https`` — :class:`~.https.ServerTLS`: HTTPS ports, the server's certificate
  authority and TLS faults;
- ``state_store`` — which state a server keeps (in memory or shared on Redis),
  and where it shares its scenario set;
- ``listening`` — binding a port, and :class:`ServerError` with its hints;
- ``access_log`` — one line a request, with secrets masked;
- ``collector`` — :class:`~.collector.FrozenSet`: the served scenario set kept out of
  the cyclic collector's view in a process that only serves (``mockskill serve``);
- ``remote`` — :class:`RemoteServer`: the same control of a server running elsewhere.

It may import the WSGI face and every stage below.
"""

from __future__ import annotations

from .listening import ServerError
from .server import Server

__all__ = ["Server", "ServerError"]
