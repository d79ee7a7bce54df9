"""Progress of a training program on the host: the ``on_update`` callback of ``Task.train``.

    reporter = ProgressReporter(num_updates, steps_per_update, num_runs=8, score="episode_return")
    with reporter:
        jax.jit(jax.vmap(lambda c, k: train(c, k, on_update=reporter), in_axes=(None, 0)))(cfg, keys)

The program calls the reporter once per update of every run (``jax.debug.callback``;
under ``vmap``, once per run, in any order); the reporter merges the calls of an
update and shows it once every run has reported it. On a terminal that is a
tqdm bar redrawn in place; when stdout is not a terminal (CI, SLURM logs,
``| tee``) it prints one plain line every ``every_percent`` percent of the
updates instead, so a log holds about ten lines, not hundreds of redraws. It
writes to stderr, so ``ppo-jax train ... | tee log`` keeps the bar on the
terminal and out of the log.

``ppo-jax train`` always puts the reporter in its program and switches it off
with ``enabled=False`` (``--no-progress``): both runs use the same compiled
program. ``on_update=None`` puts no callback in the program at all.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np


class ProgressReporter:
    """``on_update(update_idx, metrics)`` for ``num_runs`` runs of ``num_updates`` updates each."""

    def __init__(self, num_updates: int, steps_per_update: int, num_runs: int = 1, *, score: str,
                 stream=None, every_percent: float = 10.0, unit: str = "env steps", enabled: bool = True):  # fmt: skip
        self.num_updates, self.steps_per_update, self.num_runs = num_updates, steps_per_update, num_runs
        self.score, self.unit = score, unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.every = max(1, round(num_updates * every_percent / 100))
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = None
        self.start = time.perf_counter()
        self._pending: dict[int, list[float]] = {}
        self._lock = threading.Lock()

    def __call__(self, update_idx, metrics) -> None:
        if not self.enabled:
            return
        update_idx = int(update_idx)
        with self._lock:
            scores = self._pending.setdefault(update_idx, [])
            scores.append(float(np.asarray(metrics[self.score])))
            if len(scores) < self.num_runs:
                return
            del self._pending[update_idx]
            self._show(update_idx, np.asarray(scores))

    def _show(self, update_idx: int, scores: np.ndarray) -> None:
        done = update_idx + 1
        steps = done * self.steps_per_update
        rate = steps * self.num_runs / max(time.perf_counter() - self.start, 1e-9)
        mean = float(np.nanmean(scores)) if np.isfinite(scores).any() else float("nan")
        text = f"{steps:,} {self.unit}/run  {self.score} {mean:.3g}  {rate:,.0f} {self.unit}/s"
        if self.interactive:
            if self.bar is None:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=self.num_updates, unit="upd", file=self.stream, dynamic_ncols=True)
            self.bar.n = max(self.bar.n, done)
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.refresh()
        elif done % self.every == 0 or done == self.num_updates:
            print(f"update {done}/{self.num_updates} ({100 * done / self.num_updates:.0f}%): {text}",
                  file=self.stream, flush=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.close()
