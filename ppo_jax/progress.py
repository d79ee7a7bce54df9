"""Progress of a training program on the host: the ``on_update`` callback of ``Task.train``.

    reporter = ProgressReporter(num_updates, steps_per_update, num_runs=8, score="episode_return")
    with reporter:
        jax.jit(jax.vmap(lambda c, k: train(c, k, on_update=reporter), in_axes=(None, 0)))(cfg, keys)

The program calls the reporter once per update of every run (``jax.debug.callback``;
under ``vmap``, once per run, in any order); the reporter merges the calls of an
update and shows it once every run has reported it. On a terminal that is a
tqdm bar redrawn in place; when its stream is not a terminal (CI, SLURM logs)
it prints one plain line every ``every_percent`` percent of the updates
instead, so a log holds about ten lines, not hundreds of redraws. It
writes to stderr, so ``ppo-jax train ... | tee log`` keeps the bar on the
terminal and out of the log.

``ppo-jax train`` always puts the reporter in its program, called every 5% of
the updates (``report_every``; the reporter shows what it gets), and switches it
off with ``enabled=False`` (``--no-progress``): both runs use the same compiled
program. ``on_update=None`` (the default of ``train``) puts no callback in the
program at all.

``ChunkProgress`` does the same for the chunks of ``ppo-jax sweep``: a bar on a
terminal, else a plain line every 10% of the chunks.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import jax
import numpy as np
from jax import lax


def report_update(on_update: Callable | None, update_idx, metrics: dict, *, num_updates: int, every: int = 1) -> None:
    """Inside a training scan: ``on_update(update_idx, metrics)`` on the host after every ``every``-th update and the last.

    ``every`` is static; the condition depends only on the (unbatched) update
    counter, so under ``vmap`` it stays one branch and the callback runs once per
    run. Each callback stops the program for a device-to-host transfer of the
    metrics, so ``every`` trades progress detail for speed (docs/benchmarks/).
    """
    if on_update is None:
        return
    if every <= 1:
        jax.debug.callback(on_update, update_idx, metrics)
        return
    due = ((update_idx + 1) % every == 0) | (update_idx == num_updates - 1)

    def send(update_idx, metrics):
        jax.debug.callback(on_update, update_idx, metrics)

    lax.cond(due, send, lambda *_: None, update_idx, metrics)


class ProgressReporter:
    """``on_update(update_idx, metrics)`` for ``num_runs`` runs of ``num_updates`` updates each.

    ``report_every``: the program calls it after every ``report_every``-th update (and
    the last), as ``train(..., report_every=k)`` does; lines fall on those updates, in
    any order the callbacks arrive.
    """

    def __init__(
        self,
        num_updates: int,
        steps_per_update: int,
        num_runs: int = 1,
        *,
        score: str,
        stream=None,
        every_percent: float = 10.0,
        unit: str = "env steps",
        enabled: bool = True,
        report_every: int = 1,
        start_update: int = 0,
    ):
        self.num_updates, self.steps_per_update, self.num_runs = num_updates, steps_per_update, num_runs
        self.start_update = start_update  # a resumed run: the rate counts the updates of this process
        self.score, self.unit = score, unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        # A plain line every `every` updates: a multiple of report_every, the program's callback interval.
        self.every = report_every * max(1, round(num_updates * every_percent / 100 / report_every))
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
        rate = (
            (done - self.start_update)
            * self.steps_per_update
            * self.num_runs
            / max(time.perf_counter() - self.start, 1e-9)
        )
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
            print(
                f"update {done}/{self.num_updates} ({100 * done / self.num_updates:.0f}%): {text}",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.close()


class ChunkProgress:
    """Progress over the ``total`` chunks of a sweep: a tqdm bar on a terminal; else a line every ``every_percent`` percent of them.

    ``update(note)`` after each chunk; ``note`` (e.g. its throughput) goes after the bar or at the end of the line.
    """

    def __init__(self, total: int, *, enabled: bool = True, stream=None, every_percent: float = 10.0):
        self.total, self.enabled, self.done = total, enabled, 0
        self.stream = stream if stream is not None else sys.stderr
        self.every = max(1, round(total * every_percent / 100))
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = None
        self.start = time.perf_counter()

    def update(self, note: str = "") -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update()
        elif self.enabled and not self.interactive and (self.done % self.every == 0 or self.done == self.total):
            elapsed = time.perf_counter() - self.start
            line = f"chunks {self.done}/{self.total} ({100 * self.done / self.total:.0f}%) in {elapsed:.0f} s"
            print(line + (f": {note}" if note else ""), file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        self.start = time.perf_counter()
        if self.enabled and self.interactive:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="chunk", file=self.stream, dynamic_ncols=True)
        return self

    def __exit__(self, *exc):
        self.close()
