"""The interpreter's settings in a process that is the server's: the cyclic
collector's, and how long a thread may keep the GIL from another.

:func:`own_process` runs once :meth:`~mockskill.server.Server.serve_forever`
has loaded the scenarios and bound the port. Apart from
:mod:`mockskill.server` because it is about the process, not the server:
only a process that serves and nothing else may set them.
"""

from __future__ import annotations

import gc
import sys

YOUNG_GC_THRESHOLD = 10_000
"""Allocations between young collections in a process that is the server's (Python's: 700)."""

MIDDLE_GC_THRESHOLD = 100
"""Young collections between middle ones in a process that is the server's (Python's: 10)."""


def freeze_heap() -> None:
    """Keep what start-up built out of the cyclic collector's sight (:func:`gc.freeze`).

    Called by :meth:`Server.serve_forever` once the scenarios are loaded and the
    port is bound: the modules, the Flask app and the scenario model live as
    long as the process, and a full collection (which the journal's growth
    triggers now and then) need not walk them each time. Only here, where the
    process is the server's: an embedded server (:meth:`Server.start`, in a test
    suite's process) leaves the collector alone, since freezing would also keep
    the suite's own garbage of the moment for good.

    The young generation's threshold is raised too (:data:`YOUNG_GC_THRESHOLD`; the
    ``mockskill serve`` command's launcher, :mod:`mockskill.launch`, sets both before
    start-up imports anything, so that start-up pays for fewer collections too):
    a burst of connections that each wait keeps everything it allocates alive
    for the wait, so every young collection promotes it all, and a full one
    follows each time the old generation has grown by a quarter — at Python's
    700, a quarter of a 10 000-connection burst's CPU went to the collector,
    six full passes over the burst's ~40 objects per connection among them.

    And the middle generation's (:data:`MIDDLE_GC_THRESHOLD`): what a young
    collection promotes is mostly a waiting request's, which the answer frees
    (by reference count) a second later. At Python's 10 a middle collection
    came every 100 000 allocations, walked what had been promoted since and
    moved it to the old generation: in a 10 000 x 1 s burst, five of them,
    ~45 ms each, a quarter of a second of the burst (gc.callbacks in the
    server, bench/burst_peers.py). At 100 they come every million
    allocations, and the burst's objects are gone before one does; cyclic
    garbage that survived a young collection waits longer to be found, and
    is found all the same.

    No collection first: start-up leaves no cyclic garbage to speak of (none on
    the bundled scenarios), and a full pass over its ~30 000 tracked objects
    cost 10-20 ms before the first answer (issue 13, start-up).
    """
    gc.freeze()
    old = gc.get_threshold()[2]
    gc.set_threshold(YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, old)


SWITCH_INTERVAL = 0.001
"""Seconds a thread that wants the GIL waits before asking its holder to let go
(:func:`sys.setswitchinterval`; Python's: 0.005), in a process that is the server's."""


def shorten_switches() -> None:
    """Let the loop's thread take the GIL back from a busy admin worker within 1 ms.

    The admin app answers on worker threads (:mod:`mockskill.transport.wsgi`);
    a report or a journal listing over a full journal is a few hundred ms of
    Python on one of them. Each time the loop's thread wakes for a skill
    request it must take the GIL, and Python makes a thread that wants it
    wait a whole switch interval before the holder is asked to let go. So a
    skill request's median while reports ran back to back was the interval
    plus ~0.3 ms (bench/admin_interference.py, 10 000 entries, this 2-CPU
    machine, two runs each; 0.17-0.19 ms with no report at any interval):

    ========  ==============  ===========  ===========
    interval  median (ms)     p99 (ms)     max (ms)
    ========  ==============  ===========  ===========
    0.5 ms    0.80, 0.82      9.8, 10.0    27, 49
    1 ms      1.30, 1.43      6.7, 13.8    21, 42
    2 ms      2.55, 2.57      13.6, 16.7   25, 48
    5 ms      5.53, 5.61      17.8, 24.1   41, 72
    ========  ==============  ===========  ===========

    1 ms: the p99 no longer improved below it (the rest is the machine's,
    and the workers' young collections, ~3 ms each), while every halving
    doubles the forced switches a busy worker makes. The max is the
    machine's: ~20-50 ms at every interval on these shared CPUs.

    Only the server's process: the interval is process-wide, and a test
    suite's own threads are its business (an embedded server leaves it
    alone). A shorter interval costs nothing while one thread runs (no one
    waits): the loop serving skills alone keeps the GIL as before.
    """
    sys.setswitchinterval(SWITCH_INTERVAL)


def own_process(_: object) -> None:
    """What a process that is the server's sets once it serves: the transport's
    ``on_started`` of :meth:`Server.serve_forever` (given the server, not needed)."""
    freeze_heap()
    shorten_switches()
