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
  2017, Sec. 6.1) — and the report says so. A task whose score has fixed bounds
  on every env (``Task.score_bounds``: lm's sampled pass@1, rlhf's share of positions
  right, both in [0, 1]) is normalized by them, whatever its problem.
* With ``normalize="best-setting"`` (``ppo-jax report --normalize best-setting``)
  every environment is normalized as in the PPO paper: ``best`` is the best
  setting's mean final return in the report, documented or not (its Table 1 is
  the mean of these scores over environments: ``ppo_jax.report.paper_table1``).
* **Diverged runs** (``DIVERGED_RULE``): a run diverged at its first update with
  ``non_finite`` > 0 (``ppo_jax.final_values``; a directory written before that
  column existed: its first update with a non-finite loss). It has no final
  return (NaN, never averaged in); its normalized score is 0, its env's random
  policy's, where the env's reference is a random policy's score
  (``Reference.chance``), and it is left out, and counted, where it is not
  (the RLHF copy task's 0 is a bound, not chance).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ppo_jax.errors import ReportError
from ppo_jax.final_values import final_value
from ppo_jax.report.sources import Runs, each_run


class Reference(NamedTuple):
    random: float
    best: float | None
    source: str
    chance: bool = True
    """``random`` is a random policy's score, so a diverged run scores it (normalized 0); False: a bound (RLHF)."""


DIVERGED_RULE = (
    "a run diverged at its first update whose loss or training state was NaN or infinite (metrics' non_finite; "
    "a directory written before non_finite was recorded: its first update with a non-finite loss, the parameters "
    "unchecked). A diverged run has no final return: it is never averaged in, and tables give the number of diverged "
    "runs beside each cell, as (k/n diverged), where the final return's statistics are over the other runs. In "
    "normalized scores and their aggregates a diverged run scores 0, its env's random-policy score, where the env's "
    "reference is a random policy: a policy whose parameters are not finite cannot act better than chance, and "
    "leaving it out would bias its setting upward. Where the reference is not a random policy's score (the RLHF copy "
    "task's bounds) the run is left out of the scores and counted."
)
"""What the report does with a diverged run, as its definitions say it (index.md, report.json)."""


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
    "MemoryChain-bsuite": Reference(
        0.0,
        1.0,
        "analytic: the reward is +1 or -1 at the last step for naming the first step's context bit, so a random "
        "answer scores 0 (scripts/reference_scores.py measured -0.07 +- 0.03 over 1000 episodes) and the right one 1",
    ),
    "Breakout-MinAtar": Reference(0.41, None, f"{_RANDOM_SOURCE}; best: none documented"),
    "SpaceInvaders-MinAtar": Reference(4.20, None, f"{_RANDOM_SOURCE}; best: none documented"),
    # Brax tasks on the spring pipeline (our 1000-step time limit); no documented best: the PPO paper's normalization.
    "brax/inverted_pendulum": Reference(22.61, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/inverted_double_pendulum": Reference(257.11, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/hopper": Reference(128.35, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/walker2d": Reference(236.55, None, f"{_BRAX_RANDOM}; best: none documented"),
    "brax/halfcheetah": Reference(-63.14, None, f"{_BRAX_RANDOM}; best: none documented"),
}


def load_reference_scores(path: Path | None, bounded: dict[str, Reference] | None = None) -> dict[str, Reference]:
    """The built-in table, with ``bounded`` (a task's score bounds per env: ``bounded_references``), updated from a
    YAML file ``{env: {random: R, best: B, source: text}}`` if given."""
    table = {**REFERENCE_SCORES, **(bounded or {})}
    if path is None:
        return table
    from ppo_jax.errors import SpecError
    from ppo_jax.sweep.spec_yaml import parse_yaml  # one-line errors with the line, as for sweep specs

    try:
        raw, _ = parse_yaml(Path(path).read_text(encoding="utf-8"), str(path))
    except OSError as error:
        raise ReportError(f"{path}: cannot read reference scores ({error.strerror or error}).") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text; save the reference scores as UTF-8 YAML.") from None
    except SpecError as error:
        raise ReportError(str(error)) from None
    if not isinstance(raw, dict):
        raise ReportError(f"{path}: expected a mapping env -> {{random: R, best: B, source: text}}.")
    for env, entry in raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("random"), (int, float)):
            raise ReportError(f"{path}: entry {env!r} needs a number under 'random' (and optionally 'best', 'source').")
        best = entry.get("best")
        if best is not None and (not isinstance(best, (int, float)) or best == entry["random"]):
            raise ReportError(f"{path}: entry {env!r}: 'best' must be a number different from 'random'.")
        table[env] = Reference(
            float(entry["random"]),
            None if best is None else float(best),
            str(entry.get("source", path)),
            bool(entry.get("chance", True)),
        )
    return table


def bounded_references(task, envs) -> dict[str, Reference]:
    """``{env: Reference}`` from ``task.score_bounds`` for each env (a bound, not a random policy's score); {} if none."""
    if task.score_bounds is None:
        return {}
    low, high = task.score_bounds
    return {env: Reference(low, high, task.score_bounds_source, chance=False) for env in envs}


def final_returns(runs: Runs, last_percent: float) -> pd.DataFrame:
    """One row per run: env, setting, seed, final_return (mean score over the last ``last_percent``% of updates),
    diverged and diverged_at (the update it diverged at; empty where it did not).

    A diverged run's final_return is NaN (see the module docstring).
    """
    if not 0.0 < last_percent <= 100.0:
        raise ReportError(f"--last-percent must be in (0, 100], got {last_percent}.")
    rows = []
    for run in each_run(runs):
        values = run.curves[runs.task.score].to_numpy()
        rows.append(
            {
                "env": run.env,
                "setting": run.setting,
                "pretrain_seed": run.pretrain_seed,
                "seed": run.seed,
                "final_return": math.nan if run.diverged else float(final_value(values, last_percent / 100)),
                "diverged": run.diverged,
                "diverged_at": int(run.curves["update"].iloc[run.divergence]) if run.diverged else None,
            }
        )
    finals = pd.DataFrame(rows)
    finals["diverged_at"] = finals["diverged_at"].astype("Int64")
    return finals


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
        best = _scored_returns(rows, ref).groupby(rows["setting"]).mean().max()
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


def _scored_returns(rows: pd.DataFrame, ref: Reference) -> pd.Series:
    """Final returns with a diverged run's as its env's random score where that is chance (``DIVERGED_RULE``)."""
    if "diverged" not in rows or not ref.chance:
        return rows["final_return"]
    return rows["final_return"].where(~rows["diverged"].astype(bool), ref.random)


def normalize(
    finals: pd.DataFrame, norms: dict[str, tuple[float, float, str]], references: dict[str, Reference] | None = None
) -> np.ndarray:
    """Normalized scores of ``finals`` rows: ``(R - random) / (best - random)``, float64.

    With ``references``, a diverged run (``finals["diverged"]``) scores 0 where its env's reference is chance
    (``Reference.chance``) and NaN (left out) where it is not; without, NaN (its final return).
    """
    random = finals["env"].map(lambda e: norms[e][0]).to_numpy(float)
    best = finals["env"].map(lambda e: norms[e][1]).to_numpy(float)
    scores = (finals["final_return"].to_numpy(float) - random) / (best - random)
    if references is not None and "diverged" in finals:
        chance = finals["env"].map(lambda e: references[e].chance).to_numpy(bool)
        scores = np.where(finals["diverged"].to_numpy(bool) & chance, 0.0, scores)
    return scores
