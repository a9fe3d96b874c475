"""One request through the scenarios: match, step, act, record.

This stage owns what happens to a request once it has arrived: finding the
skill or route it is for (``matching``), the engine that runs it through its
scenario (``engine``: forced errors, versions, sessions, descriptors, the
token endpoint), the credentials checked at request time (``auth``), playing
the step that answers (``actions``: waits, hangs, slow bodies, cuts; the
transport faults on the raw socket in ``faults``), the interface of all
state — sequences, sessions, tokens, draws and the journal (``store``), whose
needs the engine hands out (``pending``) and the in-memory store answers
(``state``) — and the port that refuses connections for
``ENDPOINT_UNREACHABLE`` (``ports``).

It may import :mod:`mockskill.scenario` and :mod:`mockskill.protocol`. The
serving layer (``mockskill/transport/``, the stage above) and the faces call
into it; nothing here knows which server carries the request.
"""
