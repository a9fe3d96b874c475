"""Shared stores: the state of several mockskill processes on one Redis.

Owns the Redis backend of the state interface (:mod:`mockskill.engine.store`)
and what it needs: the URL (:mod:`.url`), the Lua scripts that make each
need one atomic step, the shared journal, and the shared scenario set. It
may import ``engine``, ``scenario`` and ``protocol``; only the faces and the
admin app import it, and only when ``--state`` names a shared store, so that
the embedded default never imports the Redis client.
"""
