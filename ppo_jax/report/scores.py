"""Final values and normalized scores.

* **Final return** of a run (the column ``final_return``): the mean of its task's
  score metric (``Task.score``: PPO's episodic return; RLHF's programmatic score)
  over the last ``last_percent`` percent of its logged updates (at least one),
  from its own metrics table (``ppo_jax.final_values.final_value``); NaN updates
  (no episode ended yet) are skipped.
* **Normalized score** (per environment): ``(R - random) / (best - random)``, so
  that a uniform random policy scores 0 and the reference best scores 1; scores
  above 1 beat the reference. ``random`` is measured by
  ``scripts/reference_scores.py`` (uniform random policy, 1000 episodes, fixed key);
  ``best`` is the best mean return among the trained agents of the RL Baselines
  Zoo benchmark table (Raffin, rl-baselines-zoo ``benchmark.md``) or, for
  CartPole, the maximum the time limit allows. For an environment without a
  documented best (MinAtar and the Brax tasks here), ``best`` is the best final return among the
  settings in the report — the normalization of the PPO paper (Schulman et al.
  2017, Sec. 6.1) — and the report says so. The RLHF copy task's score is a
  share of positions right, so its own bounds, 0 and 1, normalize it.
* With ``normalize="best-setting"`` (``ppo-jax report --normalize best-setting``)
  every environment is normalized as in the PPO paper: ``best`` is the best
  setting's mean final return in the report, documented or not (its Table 1 is
  the mean of these scores over environments: ``ppo_jax.report.paper_table1``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import yaml

from ppo_jax.errors import ReportError
from ppo_jax.final_values import final_value
from ppo_jax.report.sources import Runs


class Reference(NamedTuple):
    random: float
    best: float | None
    source: str


_RANDOM_SOURCE = "random: uniform random policy, 1000 episodes (scripts/reference_scores.py)"
_ZOO = "best: RL Baselines Zoo benchmark.md"
_BRAX_RANDOM = f"{_RANDOM_SOURCE}, spring pipeline"
REFERENCE_SCORES = {
    "CartPole-v1": Reference(21.68, 500.0, f"{_RANDOM_SOURCE}; best: 500, the time limit"),
    "Acrobot-v1": Reference(-499.13, -85.14, f"{_RANDOM_SOURCE}; {_ZOO} (ppo2, -85.137)"),
    "Pendulum-v1": Reference(
        -1227.37, -168.29, f"{_RANDOM_SOURCE}; {_ZOO} (ppo2 on Pendulum-v0, same dynamics, -168.285)"
    ),
    "MountainCarContinuous-v0": Reference(-32.75, 91.86, f"{_RANDOM_SOURCE}; {_ZOO} (ddpg, 91.858)"),
    "Breakout-MinAtar": Reference(0.41, None, f"{_RANDOM_SOURCE}; best: none documented"),
    "SpaceInvaders-MinAtar": Reference(4.20, None, f"{_RANDOM_SOURCE}; best: none documented"),
    # Brax tasks on the spring pipeline (our 1000-step time limit); no documented best: the PPO paper's normalization.
    "brax/inverted_pendulum": Reference(22.61, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/inverted_double_pendulum": Reference(257.11, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/hopper": Reference(128.35, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/walker2d": Reference(236.55, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/halfcheetah": Reference(-63.14, None, f"{_BRAX_RANDOM}; best: none documented"),
    "copy": Reference(
        0.0,
        1.0,
        "the programmatic score's bounds: 0 = no position of the intended response right, "
        "1 = every position (RLHF copy task; not a random policy)",
    ),
}


def load_reference_scores(path: Path | None) -> dict[str, Reference]:
    """The built-in table, updated from a YAML file ``{env: {random: R, best: B, source: text}}`` if given."""
    table = dict(REFERENCE_SCORES)
    if path is None:
        return table
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ReportError(f"{path}: cannot read reference scores ({error.strerror or error}).") from None
    except yaml.YAMLError as error:
        raise ReportError(f"{path}: not valid YAML ({error}).") from None
    if not isinstance(raw, dict):
        raise ReportError(f"{path}: expected a mapping env -> {{random: R, best: B, source: text}}.")
    for env, entry in raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("random"), (int, float)):
            raise ReportError(f"{path}: entry {env!r} needs a number under 'random' (and optionally 'best', 'source').")
        best = entry.get("best")
        if best is not None and (not isinstance(best, (int, float)) or best == entry["random"]):
            raise ReportError(f"{path}: entry {env!r}: 'best' must be a number different from 'random'.")
        table[env] = Reference(
            float(entry["random"]), None if best is None else float(best), str(entry.get("source", path))
        )
    return table


def final_returns(runs: Runs, last_percent: float) -> pd.DataFrame:
    """One row per run: env, setting, seed, final_return (mean score over the last ``last_percent``% of updates)."""
    if not 0.0 < last_percent <= 100.0:
        raise ReportError(f"--last-percent must be in (0, 100], got {last_percent}.")
    rows = []
    for (env, setting, seed), run in runs.curves.groupby(["env", "setting", "seed"], sort=False):
        values = run.sort_values("update")[runs.task.score].to_numpy()
        rows.append(
            {
                "env": env,
                "setting": setting,
                "seed": seed,
                "final_return": float(final_value(values, last_percent / 100)),
            }
        )
    return pd.DataFrame(rows)


NORMALIZATIONS = ("reference", "best-setting")


def normalizers(
    finals: pd.DataFrame, references: dict[str, Reference], normalize: str = "reference"
) -> dict[str, tuple[float, float, str]]:
    """env -> (random, best, how best was chosen); ReportError for an env with no random score.

    ``normalize``: "reference" (a documented best where there is one) or "best-setting" (always the best
    setting's mean final return, the PPO paper's normalization).
    """
    out = {}
    for env, rows in finals.groupby("env", sort=False):
        if env not in references:
            raise ReportError(
                f"no reference score for {env}: measure a random policy (scripts/reference_scores.py) and pass "
                "--reference-scores FILE.yaml with {env: {random: R, best: B, source: text}}."
            )
        ref = references[env]
        if ref.best is not None and normalize == "reference":
            out[env] = (ref.random, ref.best, ref.source)
            continue
        best = rows.groupby("setting")["final_return"].mean().max()
        if not math.isfinite(best) or best == ref.random:
            raise ReportError(
                f"{env}: no best score to normalize by: none documented (or --normalize best-setting) "
                f"and the best setting's mean final return ({best}) is not finite or equals random's."
            )
        source = ref.source.split("; best:")[0]
        out[env] = (
            ref.random,
            float(best),
            f"{source}; best: the best setting in this report (PPO paper normalization)",
        )
    return out


def normalize(finals: pd.DataFrame, norms: dict[str, tuple[float, float, str]]) -> np.ndarray:
    """Normalized scores of ``finals`` rows: ``(R - random) / (best - random)``, float64."""
    random = finals["env"].map(lambda e: norms[e][0]).to_numpy(float)
    best = finals["env"].map(lambda e: norms[e][1]).to_numpy(float)
    return (finals["final_return"].to_numpy(float) - random) / (best - random)
