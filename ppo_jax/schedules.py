"""Schedules of a coefficient over a run: one rule for the learning rate, clip_eps and the entropy coefficient."""

from __future__ import annotations

from typing import Literal

Schedule = Literal["constant", "linear"]
SCHEDULES = ("constant", "linear")


def scheduled(kind: str, value, update_idx, num_updates: int):
    """``value`` at update ``update_idx`` of ``num_updates``: constant, or linear decay ``value * (1 - u / num_updates)``.

    ``kind`` is static (a Python branch); ``value`` and ``update_idx`` may be traced.
    """
    if kind == "constant":
        return value
    if kind == "linear":
        return value * (1.0 - update_idx / num_updates)
    raise ValueError(f"unknown schedule {kind!r}; choose one of {SCHEDULES}")
