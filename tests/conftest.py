"""Session-wide pytest hooks: the bad-input battery's case counts in the terminal summary (see tests/battery.py).

Under pytest-xdist (``-n 2``, the README's command) the batteries run in workers: each worker hands its counts
to the controller at the end (``workeroutput``), which adds them up and prints them.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict

_FROM_WORKERS: dict[str, Counter] = defaultdict(Counter)


def _local_cases() -> dict:
    battery = sys.modules.get("tests.battery")  # only when a battery test ran in this process
    return battery.CASES if battery is not None else {}


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)  # set on an xdist worker only
    if workeroutput is not None:
        workeroutput["battery_cases"] = json.dumps({test: dict(c) for test, c in _local_cases().items()})


def pytest_testnodedown(node, error):  # the xdist controller, as each worker finishes
    for test, outcomes in json.loads(node.workeroutput.get("battery_cases", "{}")).items():
        _FROM_WORKERS[test].update(outcomes)


def pytest_terminal_summary(terminalreporter):
    cases = defaultdict(Counter, {test: Counter(c) for test, c in _local_cases().items()})
    for test, outcomes in _FROM_WORKERS.items():
        cases[test].update(outcomes)
    if not cases:
        return
    terminalreporter.section("bad-input battery: generated cases")
    for test, outcomes in cases.items():
        detail = ", ".join(f"{outcome} {n}" for outcome, n in sorted(outcomes.items()))
        terminalreporter.write_line(f"{test}: {sum(outcomes.values())} cases ({detail})")
