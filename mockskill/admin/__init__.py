"""The control surface: ``/__admin``, the scenarios over HTTP, and the dashboard.

This stage owns what a test harness or a person uses to steer a running
server and look into it: the blueprint of the admin API (``blueprint``, with
its OpenAPI document ``openapi.json``; ``json_provider`` writes Flask's JSON
in the one style), scenarios added, replaced, activated and removed over
HTTP (``scenario_routes``: a face over :mod:`mockskill.control`, which owns the
loaded scenarios and every change to them), the journal's query filters
(``journal_query``), verification of what consumers sent and the requests
listed (``verify_routes``: ``/__admin/verify``, ``/__admin/requests``), the
report served at ``/__admin/report`` (``report_routes``), one session's pass or fail
at ``/__admin/verdict`` as a status and an RFC 9457 problem (``verdict_routes``), the server's
recording and ``/__admin/recordings`` (``recordings``, ``recording_routes``),
the CA and client certificates at ``/__admin/tls`` (``tls_routes``), the
dashboard page and its static files (``dashboard``), and the checks that
keep a web page from using ``/__admin`` through its visitor's browser
(``browsers``: Origin, Content-Type, Host).

It may import :mod:`mockskill.control` (the scenario set it shows and changes),
:mod:`mockskill.audit` (the report and the verdict it serves), :mod:`mockskill.recording` (the
recording it drives), the transport (``mockskill/transport/``),
:mod:`mockskill.engine`, :mod:`mockskill.scenario` and :mod:`mockskill.protocol`.
Only the faces import it.
"""
