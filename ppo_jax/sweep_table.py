"""The tidy sweep table and its summary.

One row per env x setting x seed x logging step::

    env, setting_id, seed, update, env_steps, <one column per swept field>, <one per metric>

``update`` is the last update of the logging window (every update when
log_every is 1) and ``env_steps = (update + 1) * num_envs * num_steps``, per run.
Swept values are as the run used them (float32-exact floats such as 0.2;
hidden_sizes as "64x64"). Metric columns are ``ppo_jax.train.METRIC_NAMES``,
except that a metric named like a config field (the coefficient in effect at
that update, e.g. a scheduled ``clip_eps``) gets the suffix ``_now``
(``clip_eps_now``), so that ``clip_eps`` is always the swept setting.
``eval_return_stochastic`` / ``eval_return_deterministic`` are the run's
evaluation of its final parameters (``ppo_jax.evaluate``), on its last row only
(NaN elsewhere). Rows are in
canonical order: env and setting as in the spec, then seed as listed, then update.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.stats import bootstrap_ci, final_return
from ppo_jax.sweep_plan import Chunk
from ppo_jax.sweep_program import EVAL_NAMES, log_updates
from ppo_jax.config import field_names
from ppo_jax.sweep_spec import SweepSpec, column_value, field_kind
from ppo_jax.train import METRIC_NAMES

KEY_COLUMNS = ("env", "setting_id", "seed", "update", "env_steps")
METRIC_COLUMNS = {name: f"{name}_now" if name in field_names() else name for name in METRIC_NAMES}
_DTYPES = {"float": "float64", "int": "int64", "bool": "bool", "str": "object", "sizes": "object"}


def chunk_frame(spec: SweepSpec, chunk: Chunk, metrics: dict[str, np.ndarray]) -> pd.DataFrame:
    """Rows of one chunk; ``metrics[name]`` is ``[len(chunk.pairs), num_logs]``."""
    settings = [spec.settings[i] for i, _ in chunk.pairs]
    cfg = settings[0].cfg
    updates = log_updates(cfg.num_updates, spec.log_every)
    n, num_logs = len(settings), len(updates)
    columns = {
        "env": np.repeat(np.array([s.env for s in settings], dtype=object), num_logs),
        "setting_id": np.repeat([s.setting_id for s in settings], num_logs).astype(np.int64),
        "seed": np.repeat([seed for _, seed in chunk.pairs], num_logs).astype(np.int64),
        "update": np.tile(updates, n).astype(np.int64),
        "env_steps": np.tile((updates + 1) * cfg.batch_size, n).astype(np.int64),
    }
    for axis in spec.axes:
        values = np.array([column_value(s.values[axis]) for s in settings], dtype=_DTYPES[field_kind(axis)])
        columns[axis] = np.repeat(values, num_logs)
    for name in METRIC_NAMES:
        array = np.asarray(metrics[name], dtype=np.float32)
        if array.shape != (n, num_logs):
            raise ValueError(f"metric {name!r} has shape {array.shape}, expected {(n, num_logs)}")
        columns[METRIC_COLUMNS[name]] = array.reshape(-1)
    for name in EVAL_NAMES:
        if name in metrics:  # per run: on its last row
            column = np.full((n, num_logs), np.nan, np.float32)
            column[:, -1] = np.asarray(metrics[name], dtype=np.float32)
            columns[name] = column.reshape(-1)
    return pd.DataFrame(columns)


def sort_table(spec: SweepSpec, table: pd.DataFrame) -> pd.DataFrame:
    """Rows in canonical order (env and setting as in the spec, seed as listed, update), index reset."""
    if table.empty:
        return table
    order = pd.DataFrame(
        {"env": [s.env for s in spec.settings], "setting_id": [s.setting_id for s in spec.settings]}
    ).reset_index(names="_setting")
    seed_position = {seed: i for i, seed in enumerate(spec.seeds)}
    keyed = table.merge(order, on=["env", "setting_id"], how="left", validate="many_to_one")
    keyed["_seed"] = keyed["seed"].map(seed_position)
    keyed = keyed.sort_values(["_setting", "_seed", "update"], kind="stable")
    return keyed.drop(columns=["_setting", "_seed"]).reset_index(drop=True)


def summarize(spec: SweepSpec, table: pd.DataFrame) -> pd.DataFrame:
    """Final return per env x setting: one row with the swept values, seeds, mean and 95% bootstrap CI over seeds.

    Final return of a run = mean episodic return over the last 5% of its logged
    rows (``ppo_jax.stats.final_return``); the CI is ``ppo_jax.stats.bootstrap_ci``.
    """
    rows = []
    for (env, setting_id), runs in table.groupby(["env", "setting_id"], sort=False):
        per_seed = [final_return(run["episode_return"].to_numpy()) for _, run in runs.groupby("seed", sort=False)]
        mean, low, high = bootstrap_ci(per_seed)
        first = runs.iloc[0]
        rows.append(
            {"env": env, "setting_id": setting_id, **{a: first[a] for a in spec.axes},
             "seeds": len(per_seed), "final_return": mean, "ci95_low": low, "ci95_high": high}
        )  # fmt: skip
    return pd.DataFrame(rows)


def format_summary(summary: pd.DataFrame, top: int = 10) -> str:
    """A text table per env; with more than ``3 * top`` settings, the ``top`` best by mean final return."""
    lines = []
    for env, rows in summary.groupby("env", sort=False):
        shown = rows if len(rows) <= 3 * top else rows.nlargest(top, "final_return")
        title = f"{env}: final return (mean over the last 5% of updates; mean over seeds, 95% bootstrap CI)"
        if len(shown) < len(rows):
            title += f", best {top} of {len(rows)} settings"
        table = shown.drop(columns=["env"]).copy()
        table["final_return"] = [f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in
                                 zip(table.final_return, table.ci95_low, table.ci95_high)]  # fmt: skip
        lines += [title, table.drop(columns=["ci95_low", "ci95_high"]).to_string(index=False), ""]
    return "\n".join(lines).rstrip()
