"""An embedded Server lives in the user's process and leaves it as it found it.

The pytest plugin and ``mockskill.Server`` run inside a test suite's own
interpreter: mockskill may not patch a module of the standard library, swap
an event-loop policy, or tune the collector or the GIL there. A fresh
interpreter takes a snapshot of what a user's code could notice, imports
mockskill, serves (plain HTTP and HTTPS, a skill, the admin app, a TLS
fault), stops, and takes the snapshot again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, dataclasses, gc, json, ssl, sys, threading
    import json.decoder, json.encoder


    def snapshot():
        modules = {
            "dataclasses": dataclasses,
            "asyncio": asyncio,
            "asyncio.events": asyncio.events,
            "ssl": ssl,
            "ssl.SSLContext": ssl.SSLContext,
            "ssl.SSLObject": ssl.SSLObject,
            "json": json,
            "json.encoder": json.encoder,
            "json.decoder": json.decoder,
            "gc": gc,
            "threading": threading,
        }
        settings = {
            "gc.threshold": repr(gc.get_threshold()),
            "gc.enabled": repr(gc.isenabled()),
            "gc.freeze_count": repr(gc.get_freeze_count()),
            "gc.callbacks": repr(len(gc.callbacks)),
            "sys.switchinterval": repr(sys.getswitchinterval()),
            "sys.recursionlimit": repr(sys.getrecursionlimit()),
            "asyncio.policy": type(asyncio.get_event_loop_policy()).__qualname__,
        }
        # Settings first: asking for the policy makes asyncio's default one, once.
        taken = {
            name: {key: repr(id(value)) for key, value in vars(module).items()}
            for name, module in modules.items()
        }
        taken["settings"] = settings
        return taken


    before = snapshot()
    import urllib.request

    import mockskill
    from mockskill import Server, load_text

    scenarios = load_text(
        "skills:\\n"
        "  - id: plain\\n"
        "  - id: broken\\n"
        "    tls: client_cert_required\\n"
    )
    for tls in (False, True):
        with Server(scenarios, tls=tls) as server:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            for path in ("/skills/plain", "/__admin/health", "/skills/broken"):
                with urllib.request.urlopen(server.url + path, context=context) as answer:
                    answer.read()
    print(json.dumps({"before": before, "after": snapshot()}))
    """
)


def test_serving_leaves_the_host_process_s_modules_and_settings_as_they_were() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    taken = json.loads(done.stdout.strip().splitlines()[-1])
    before, after = taken["before"], taken["after"]
    assert after["settings"] == before["settings"]
    for name in before:
        changed = {
            key
            for key in before[name].keys() | after[name].keys()
            if before[name].get(key) != after[name].get(key)
        }
        # A module may gain a lazily imported submodule as an attribute (asyncio's
        # own, json's): a new module object, never a replaced function or setting.
        replaced = {key for key in changed if key in before[name]}
        assert replaced == set(), (name, sorted(replaced))
