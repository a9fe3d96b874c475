"""A rate limit's token bucket as arithmetic: what spending one token comes to, at a time.

Pure: a store keeps each bucket's tokens and the time they were counted at,
and asks :func:`spend` what a request makes of them on its own clock (the
in-memory :class:`~.state.State` on ``time.monotonic``). The Redis store's
Take script does the same sums in Lua on Redis's clock
(``mockskill/store/scripts.py``, ``SPEND``); tests/store/test_redis_needs.py
holds the two to the same answers.

A bucket no store holds is full: a full bucket and a fresh one are the same,
so a store may forget one once it is full again (a Spent's ``full_ms`` says when).
"""

from __future__ import annotations

import math

from .store import Spent


def spend(capacity: int, refill: float, tokens: float, elapsed: float) -> tuple[float, Spent]:
    """Spend a token of a bucket of *capacity* refilled *refill* tokens a second, which held
    *tokens* *elapsed* seconds ago: the tokens it holds now, and what the spending came to.

    It refills first (never past its capacity); with a whole token there, one is spent
    (admitted), else nothing is (refused: the tokens now are what it holds).
    """
    if elapsed > 0:  # (a clock gone back refills nothing)
        tokens += elapsed * refill
        if tokens > capacity:
            tokens = capacity
    admitted = tokens >= 1
    if admitted:
        tokens -= 1
    next_ms = 0 if tokens >= 1 else math.ceil((1 - tokens) / refill * 1000)
    full_ms = math.ceil((capacity - tokens) / refill * 1000)
    return tokens, (admitted, math.floor(tokens), next_ms, full_ms)
