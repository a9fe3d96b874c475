"""One request through the scenarios: match, step, act, record.

This stage owns what happens to a request once it has arrived, as data: the
engine reads it through ``incoming``'s view (and ``request_facts``) and runs
it through its scenario (``engine``: forced errors, versions, sessions,
descriptors, the token endpoint; ``builtin_answers`` and ``replies`` the answers
it gives of its own, ``addresses`` the URLs its replies are filled for).
``matching`` finds the skill or route, ``conditions`` the case; ``choosing``
picks the step and its draws; ``auth`` checks credentials; ``actions`` makes
the step a ``plan`` (``wire``: an answer's bytes or a fault; ``forwarding``
and ``proxying``: a proxy step, its recorded ``exchange``, ``relayed_streams``: the
events of a provider's stream it relays; ``rendering``: a
templated reply made for its request) that the transport plays; ``streams``
makes a stream step's plan (its format by ``Accept``, its events framed, its fault)
and its journal record;
``idempotency`` answers a retry from its key's first execution, for a skill
that honours ``Idempotency-Key``; ``limits`` says which rate limit's bucket a
request spends and writes what the limit answers (a refusal, a scripted
``rate_limited:`` step, an admitted answer's headers) in every wire form.
A skill run as a long-running task: ``tasks`` works out its state from what
the store holds (its life, a pure function), ``task_ids`` makes and reads its
ids, ``task_wire`` writes it on the wire, ``task_skills`` answers a submit and
``task_requests`` a poll, cancel or input, ``task_records`` keeps the in-memory
store's tasks, and ``callback_hosts`` says whether a callback URL may be called
(loopback, or a host the server allows); ``callbacks`` finds a task's changes and plans
their deliveries (when, signed how, with which fault) for the transport to send;
``task_watch`` plans a task watched as a stream of its state changes, from the life.
``capabilities`` says whether a server can play a scenario set.
All state is behind ``store``'s interface — sequences, sessions, tokens,
draws and the journal (``entries``, ``journalling``, ``digests``; ``verifying``
counts its entries against a verification, reading each as ``conditions`` read
a request) — whose
needs the engine hands out (``pending``) and the in-memory ``state``
answers (``buckets``: the sums of a rate limit's token bucket, which it
spends). ``named_ports`` says what the engine asks of the ports its replies name
(the refused port of ``ENDPOINT_UNREACHABLE``, the TLS faults'), which the
transport binds and the server hands in. Nothing here sleeps or touches a
socket (tests/test_layout.py holds it): the WSGI face plays a step on a
thread (``mockskill/wsgi/``), the transport on its loop.

It may import :mod:`mockskill.scenario` and :mod:`mockskill.protocol`. The
serving layer (``mockskill/transport/``, the stage above) and the faces call
into it; nothing here knows which server carries the request.
"""
