"""Scenario files in, the frozen model out.

This stage owns everything between a YAML file and a :class:`ScenarioSet`:
finding and opening the files (``path_access``), reading YAML safely with the
position of every value (``source``, syntax errors said in words by
``syntax``), the problems a file can have (``problems``), the reader that
checks values and collects those problems (``reader``), the parts of a
scenario (``skills``, ``steps``, ``delays``, ``credentials``; a step's bytes body,
``body_base64`` or ``body_file``, in ``bodies``), putting one scenario set
together (``loader``) and refusing clashes between scenarios (``uniqueness``),
a step's behaviour on the wire (``waits_and_faults``), an endpoint's ``cases``, the
``proxy:`` forwarding (``proxy_config``), commit then fail on any step
(``after``), a skill's or route's ``rate_limit:`` and the ``rate_limited:`` step
(``rate_limits``), free routes' paths (``routes``), a skill's long-running
``task:`` (``tasks``; its ``callback:`` in ``task_callbacks``) and the durations
written with their unit that its timings are (``durations``), a step's ``stream:`` of
events (``streams``),
the frozen values the engine plays (``model``, with ``reply`` and a case's
``when`` apart), the scenario states steps set and cases require
(``states``), what a verification of the journal asks (``verification``:
``/__admin/verify``'s body, its conditions read as a ``when``), the one
declaration of step kinds, faults and delay shapes that the rest follows
(``kinds``), the ``{{...}}`` placeholders of answers made from the request,
read at load (``template_syntax``) and rendered per request (``templates``)
and the scenario JSON Schema for editors (``schema``; the file stays at the
published ``mockskill/scenario.schema.json``).

It may import only :mod:`mockskill.protocol`: a scenario is read against what
the protocol says, and knows nothing of requests being served.
"""
