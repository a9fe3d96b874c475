"""A plan waiting on the store: the need handed out, and how to go on with its answer.

The engine never calls the store while it plans (see :mod:`.store`): where it
needs one (a :class:`~.store.Take`, a :class:`~.store.UseToken`, an
:class:`~.store.IssueToken`), it returns a :class:`Pending` instead of its
result, and whoever drives it answers the need and resumes it. One code path,
two drivers: :func:`answered` answers inline (the in-memory store, or a remote
one off the loop: the WSGI surface, admin threads) and :func:`awaited` awaits
the answers on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeAlias, TypeVar

from .store import Need, NeedAnswer, Store

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")


class Pending(NamedTuple, Generic[T_co]):
    """*need*, to answer; then ``resume(answer)`` is the result, or the next Pending.

    A NamedTuple: one is made per sequence step, and ``tuple.__new__(Pending,
    (need, resume))`` makes it without a Python call.
    """

    need: Need
    resume: Callable[[NeedAnswer], Later[T_co]]

    def then(self, after: Callable[[T_co], Later[U]]) -> Pending[U]:
        """This, then *after* on its result (whatever needs each of them hands out)."""
        resume = self.resume

        def resumed(answer: NeedAnswer) -> Later[U]:
            result = resume(answer)
            if isinstance(result, Pending):
                return result.then(after)
            return after(result)

        return Pending(self.need, resumed)


Later: TypeAlias = T | Pending[T]
"""A result, or a Pending that comes to one once its needs are answered."""


def answered(pending: Pending[T], store: Store) -> T:
    """What *pending* comes to, its needs answered one after the other by ``store.answer``
    (blocking on a remote store: only off the loop)."""
    result: Later[T] = pending
    while isinstance(result, Pending):
        result = result.resume(store.answer(result.need))
    return result


async def awaited(pending: Pending[T], store: Store) -> T:
    """What *pending* comes to, its needs answered one after the other by
    ``await store.answer_async`` (on the loop)."""
    result: Later[T] = pending
    while isinstance(result, Pending):
        result = result.resume(await store.answer_async(result.need))
    return result
