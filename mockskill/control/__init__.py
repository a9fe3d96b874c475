"""The loaded scenario set and every change to it: one owner for the set's whole life.

A server's scenarios are loaded, checked, activated, swapped into the engine,
shared with other replicas and reloaded from their files here, and only here:
the Python server (:class:`mockskill.server.Server`), the admin API
(``/__admin/scenarios``) and the file watcher all call the same
:class:`~.registry.Registry`. Modules:

- ``registry`` — :class:`~.registry.Registry`: the loaded scenarios, each
  change applied whole or not at all (``Engine.load``), the watcher it runs,
  and the shared set it serves;
- ``changes`` — what each change (add, remove, activate, deactivate, reload)
  does, planned from the loaded scenarios before anything is applied;
- ``clashes`` — what a change may not do: a name loaded twice, a skill id or
  route served twice (:class:`~.clashes.Conflict`);
- ``loaded`` — one loaded scenario and how it is served, and a name not loaded;
- ``sharing`` — a shared set's side here: loaded scenarios to the records kept
  on Redis and back (imported only when a set is shared);
- ``watch`` — noticing that scenario files changed (a polling thread), and
  what a reload reports.

It may import :mod:`mockskill.engine`, :mod:`mockskill.scenario` and
:mod:`mockskill.protocol`, and :mod:`mockskill.store` only where a set is
shared (lazily: a server that shares nothing never loads the Redis client).
The faces (``admin/``, ``wsgi/``, ``server/``, ``cli/``) import it; it imports
none of them.
"""
