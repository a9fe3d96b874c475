"""Memory per live task in the in-memory store (issue 30: at most 2 KB each).

Submits N tasks in N/10 sessions straight to a :class:`~mockskill.engine.state.State`
(no server: the store's own bookkeeping is what a live task costs it), polls each
once and logs a cancel on every tenth, and reports what tracemalloc counts as held
per task. Run: ``python bench/task_memory.py [N]`` (default 10000).
"""

from __future__ import annotations

import sys
import tracemalloc

from mockskill.engine.state import State
from mockskill.engine.store import Submit, Submitted, Touch


def main(count: int = 10_000) -> None:
    state = State()
    sessions = [f"session-{n:05d}" for n in range(max(1, count // 10))]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    numbers = []
    for n in range(count):
        session = sessions[n % len(sessions)]
        submitted = state.answer(Submit(session, "bench/report", 600_000, count))
        assert isinstance(submitted, Submitted)
        assert submitted.number is not None
        numbers.append((session, submitted.number))
    for n, (session, number) in enumerate(numbers):
        state.answer(Touch(session, number, "poll", 600_000, "bench/report"))
        if n % 10 == 0:
            state.answer(Touch(session, number, "cancel", 600_000, "bench/report"))
    after = tracemalloc.take_snapshot()
    held = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # The list of numbers is the benchmark's, not the store's.
    own = sys.getsizeof(numbers) + sum(sys.getsizeof(pair) for pair in numbers)
    per_task = (held - own) / count
    print(f"{count} live tasks: {held - own} bytes held by the store, {per_task:.0f} B per task")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
