"""ProgressReporter: the on_update callback that merges the runs of a vmapped program; no JAX program here."""

from __future__ import annotations

import io
import random
import re

import numpy as np

from ppo_jax.progress import ProgressReporter

NUM_RUNS, NUM_UPDATES, STEPS = 3, 20, 128
LINE = re.compile(r"update (\d+)/20 \((\d+)%\): ([\d,]+) env steps/run  episode_return (\S+)  [\d,]+ env steps/s")


def score(run: int, update: int) -> float:
    """Run r's score at update u: u * (r + 1); run 2 has no finished episode yet (NaN) at update 1."""
    return float("nan") if (run, update) == (2, 1) else float(update * (run + 1))


# The lines by hand: one every 2 updates (10% of 20), after updates 1, 3, ..., 19 (done = 2, 4, ..., 20).
# Mean of the three scores u, 2u, 3u is 2u; at update 1 only runs 0 and 1 count: (1 + 2) / 2 = 1.5.
EXPECTED = {
    1: ("2", "10", "256", "1.5"),
    3: ("4", "20", "512", "6"),
    5: ("6", "30", "768", "10"),
    7: ("8", "40", "1,024", "14"),
    9: ("10", "50", "1,280", "18"),
    11: ("12", "60", "1,536", "22"),
    13: ("14", "70", "1,792", "26"),
    15: ("16", "80", "2,048", "30"),
    17: ("18", "90", "2,304", "34"),
    19: ("20", "100", "2,560", "38"),
}


def shuffled_calls(seed: int) -> list[tuple[int, int]]:
    calls = [(run, update) for run in range(NUM_RUNS) for update in range(NUM_UPDATES)]
    random.Random(seed).shuffle(calls)
    return calls


def metrics(run: int, update: int) -> dict:
    # what jax.debug.callback hands over: numpy scalars, the update index as a 0-d int32 array
    return {"episode_return": np.float32(score(run, update)), "loss": np.float32(0.5)}


def test_one_plain_line_per_10_percent_once_every_run_reported():
    stream = io.StringIO()  # not a tty: plain lines
    reporter = ProgressReporter(NUM_UPDATES, STEPS, NUM_RUNS, score="episode_return", stream=stream)
    reported = {u: 0 for u in range(NUM_UPDATES)}
    shown = []
    with reporter:
        for run, update in shuffled_calls(0):
            reporter(np.int32(update), metrics(run, update))
            reported[update] += 1
            if reported[update] == NUM_RUNS and update in EXPECTED:
                shown.append(update)
            lines = stream.getvalue().splitlines()
            assert len(lines) == len(shown), (run, update, lines)  # a line only once all 3 runs reported
            if lines and reported[update] == NUM_RUNS and update in EXPECTED:
                match = LINE.fullmatch(lines[-1])
                assert match, lines[-1]
                assert match.groups() == EXPECTED[update], lines[-1]
    assert sorted(shown) == sorted(EXPECTED) and len(stream.getvalue().splitlines()) == 10
    assert shown != sorted(shown)  # the shuffle really completed updates out of order


def test_disabled_reporter_prints_nothing():
    stream = io.StringIO()
    reporter = ProgressReporter(NUM_UPDATES, STEPS, NUM_RUNS, score="episode_return", stream=stream, enabled=False)
    with reporter:
        for run, update in shuffled_calls(1):
            reporter(np.int32(update), metrics(run, update))
    assert stream.getvalue() == ""


def test_a_terminal_gets_a_bar_over_the_updates():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    with ProgressReporter(4, 10, 1, score="true_score", stream=stream, unit="sequences") as reporter:
        for update in range(4):
            reporter(update, {"true_score": 0.25})
    text = stream.getvalue()
    assert "4/4" in text and "true_score 0.25" in text and "sequences/run" in text
    assert "update 4/4 (100%)" not in text  # the bar, not the plain lines


def test_lines_fall_on_the_updates_the_program_reports():
    """With report_every=3 (the program calls back after updates 3, 6, ..., 18 and the last, 20), a line per ~10%."""
    stream = io.StringIO()
    reporter = ProgressReporter(NUM_UPDATES, STEPS, 1, score="episode_return", stream=stream, report_every=3)
    assert reporter.every == 3  # round(2 / 3) = 1 report per line
    done = [3, 6, 9, 12, 15, 18, 20]
    for d in reversed(done):  # in any order
        reporter(np.int32(d - 1), {"episode_return": np.float32(d)})
    got = sorted(int(LINE.fullmatch(line).group(1)) for line in stream.getvalue().splitlines())
    assert got == done
