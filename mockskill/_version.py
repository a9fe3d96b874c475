"""The version of mockskill, in a leaf module: the faces and the admin API read it without
importing the package's public face (which imports them: a circle)."""

from __future__ import annotations

__version__ = "0.1.0"
