"""The WSGI face's blocking player: a step acted out on a WSGI server's thread.

The engine is sans-IO: it decides, and says as data what to play. Mounted in a
WSGI server (:func:`mockskill.create_app`), a request is played here instead
of on the event loop: ``player`` sleeps the waits on the request's thread,
watches its socket for the client's goodbye, dribbles a body through
Werkzeug, and ``faults`` does the transport faults to the raw socket that
Werkzeug's server hands the app. Only the WSGI app (``mockskill/app.py``)
imports this package, so serving on the loop never loads Werkzeug.

It may import :mod:`mockskill.engine`, :mod:`mockskill.scenario` and
:mod:`mockskill.protocol`; only the faces import it.
"""
