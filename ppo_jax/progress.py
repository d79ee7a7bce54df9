"""Progress reported from inside the jitted run through ``jax.debug.callback``.

The callback fires about 100 times per run (never per step), so it costs
nothing measurable. Under ``vmap`` it runs once per seed/setting; the host side
merges those calls into one bar. (``io_callback`` would be the natural choice,
but JAX 0.10 rejects an IO effect inside a ``cond`` under ``vmap``.)
"""

from __future__ import annotations

import threading
import time

import numpy as np
from jax import lax
import jax


class ProgressBar:
    """A tqdm bar over updates showing env steps, mean episodic return and env steps/s (all runs together)."""

    def __init__(self, num_updates: int, batch_size: int, num_runs: int = 1, *, disable: bool = False):
        from tqdm.auto import tqdm

        self.num_updates, self.batch_size, self.num_runs = num_updates, batch_size, num_runs
        self.bar = tqdm(total=num_updates, unit="upd", disable=disable, dynamic_ncols=True)
        self.start = time.perf_counter()
        self._update, self._returns, self._lock = -1, [], threading.Lock()

    def __call__(self, update_idx, episode_return) -> None:
        update_idx = int(update_idx)
        with self._lock:
            if update_idx != self._update:
                self._update, self._returns = update_idx, []
            self._returns.append(float(episode_return))
            if len(self._returns) < self.num_runs:
                return  # redraw once every run has reported this update
            done = update_idx + 1
            steps = done * self.batch_size
            elapsed = max(time.perf_counter() - self.start, 1e-9)
            returns = np.asarray(self._returns)
            mean_return = float(np.nanmean(returns)) if np.isfinite(returns).any() else float("nan")
            self.bar.n = done
            self.bar.set_postfix_str(
                f"steps {steps:,}/run  return {mean_return:8.2f}  {steps * self.num_runs / elapsed:,.0f} steps/s",
                refresh=False,
            )
            self.bar.refresh()

    def close(self):
        self.bar.close()

    def __enter__(self):
        global _ACTIVE
        _ACTIVE = self
        return self

    def __exit__(self, *exc):
        global _ACTIVE
        _ACTIVE = None
        self.close()


_ACTIVE: ProgressBar | None = None


def _host_report(update_idx, episode_return, num_updates, batch_size):
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = ProgressBar(num_updates, batch_size)
    _ACTIVE(update_idx, episode_return)


def report(update_idx, episode_return, *, num_updates: int, batch_size: int) -> None:
    """Inside jit: send (update index, mean episodic return) to the host every ~1% of updates."""
    every = max(1, num_updates // 100)
    due = ((update_idx + 1) % every == 0) | (update_idx == num_updates - 1)

    def send(update_idx, episode_return):
        jax.debug.callback(lambda u, r: _host_report(u, r, num_updates, batch_size), update_idx, episode_return)

    lax.cond(due, send, lambda *_: None, update_idx, episode_return)
