"""What a shared store raises at start (at run time it is StoreUnavailable, the engine's)."""

from __future__ import annotations


class StoreOpenError(Exception):
    """The store named cannot be used at start (unreachable, refused): its masked URL and why.

    mockskill refuses to start with it; the faces print it as it is.
    """
