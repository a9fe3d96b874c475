"""The WSGI face: mockskill as a WSGI app (:func:`mockskill.create_app`), and its blocking player.

Modules:

- ``app`` — :func:`create_app`: the Flask admin app and the skill endpoints in
  one WSGI app, with the safe defaults of docs/security.md;
- ``player`` — a step acted out on a WSGI server's thread: it sleeps the
  waits, watches the socket for the client's goodbye, dribbles a body;
- ``socket_faults`` — the transport faults done to the raw socket that Werkzeug's
  server hands the app.

The engine is sans-IO: it decides, and says as data what to play; here it is
played on a thread instead of on the event loop. Serving on the loop never
loads this package's Werkzeug, except for ``/__admin``, which the server's
dispatcher runs through ``app`` in a thread pool.

It may import :mod:`mockskill.admin` and every stage below it; the other faces
import it.
"""
