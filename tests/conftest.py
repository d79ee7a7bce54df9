"""Session-wide pytest hooks: the bad-input battery's case counts in the terminal summary (see tests/battery.py)."""

from __future__ import annotations

import sys


def pytest_terminal_summary(terminalreporter):
    battery = sys.modules.get("tests.battery")  # only when a battery test ran
    if battery is None or not battery.CASES:
        return
    terminalreporter.section("bad-input battery: generated cases")
    for test, outcomes in battery.CASES.items():
        detail = ", ".join(f"{outcome} {n}" for outcome, n in sorted(outcomes.items()))
        terminalreporter.write_line(f"{test}: {sum(outcomes.values())} cases ({detail})")
