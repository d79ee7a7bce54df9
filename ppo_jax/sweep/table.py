"""The tidy sweep table and its summary.

One row per env x setting x seed x logging step::

    env, setting_id, seed, update, env_steps, <one column per swept field>, <one per metric>

``update`` is the last update of the logging window (every update when
log_every is 1) and ``env_steps = (update + 1) * Task.steps_per_update(cfg)``
(env steps; RLHF: sequences), per run. ``env`` is the environment id (RLHF:
"copy"). Swept values are as the run used them (float32-exact floats such as
0.2; hidden_sizes as "64x64"). Metric columns are the task's ``metric_names``,
except that a metric named like a config field (the coefficient in effect at
that update, e.g. a scheduled ``clip_eps``) gets the suffix ``_now``
(``clip_eps_now``), so that ``clip_eps`` is always the swept setting. The
task's ``eval_names`` (PPO: ``eval_return_stochastic`` /
``eval_return_deterministic``, the evaluation of the final parameters) are on a
run's last row only (NaN elsewhere). Rows are in canonical order: env and
setting as in the spec, then seed as listed, then update.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.final_values import bootstrap_ci, final_value
from ppo_jax.sweep.plan import Chunk
from ppo_jax.sweep.program import log_updates
from ppo_jax.sweep.spec import SweepSpec
from ppo_jax.sweep.spec_values import column_value, field_kind
from ppo_jax.task_contract import Task

KEY_COLUMNS = ("env", "setting_id", "seed", "update", "env_steps")
_DTYPES = {"float": "float64", "int": "int64", "bool": "bool", "str": "object", "sizes": "object"}


def metric_columns(task: Task) -> dict[str, str]:
    """Metric name -> its table column (``name_now`` where a config field has the name)."""
    return {name: f"{name}_now" if name in task.field_names else name for name in task.metric_names}


def chunk_frame(spec: SweepSpec, chunk: Chunk, metrics: dict[str, np.ndarray]) -> pd.DataFrame:
    """Rows of one chunk; ``metrics[name]`` is ``[len(chunk.pairs), num_logs]``."""
    task, settings = spec.task, [spec.settings[i] for i, _ in chunk.pairs]
    cfg = settings[0].cfg
    updates = log_updates(task.num_updates(cfg), spec.log_every)
    n, num_logs = len(settings), len(updates)
    columns = {
        "env": np.repeat(np.array([s.env for s in settings], dtype=object), num_logs),
        "setting_id": np.repeat([s.setting_id for s in settings], num_logs).astype(np.int64),
        "seed": np.repeat([seed for _, seed in chunk.pairs], num_logs).astype(np.int64),
        "update": np.tile(updates, n).astype(np.int64),
        "env_steps": np.tile((updates + 1) * task.steps_per_update(cfg), n).astype(np.int64),
    }
    for axis in spec.axes:
        values = np.array(
            [column_value(s.values[axis]) for s in settings], dtype=_DTYPES[field_kind(task.config_class, axis)]
        )
        columns[axis] = np.repeat(values, num_logs)
    for name, column in metric_columns(task).items():
        array = np.asarray(metrics[name], dtype=np.float32)
        if array.shape != (n, num_logs):
            raise ValueError(f"metric {name!r} has shape {array.shape}, expected {(n, num_logs)}")
        columns[column] = array.reshape(-1)
    for name in task.eval_names:
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
    """Final values per env x setting: the swept values, seeds, and per reported metric its mean and 95% CI over seeds.

    A run's final value of metric m = its mean over the last ``task.final_fraction``
    of the run's logged rows (``ppo_jax.final_values.final_value``); columns
    ``final_m``, ``final_m_ci95_low``, ``final_m_ci95_high`` for every m in
    ``task.reported`` (the CI: ``ppo_jax.final_values.bootstrap_ci``).
    """
    task, rows = spec.task, []
    for (env, setting_id), runs in table.groupby(["env", "setting_id"], sort=False):
        first = runs.iloc[0]
        row = {
            "env": env,
            "setting_id": setting_id,
            **{a: first[a] for a in spec.axes},
            "seeds": runs["seed"].nunique(),
        }
        for name in task.reported:
            per_seed = [
                final_value(run[name].to_numpy(), task.final_fraction) for _, run in runs.groupby("seed", sort=False)
            ]
            row[f"final_{name}"], row[f"final_{name}_ci95_low"], row[f"final_{name}_ci95_high"] = bootstrap_ci(per_seed)
        rows.append(row)
    return pd.DataFrame(rows)


def format_summary(summary: pd.DataFrame, task: Task, top: int = 10) -> str:
    """A text table per env; with more than ``3 * top`` settings, the ``top`` best by the task's score."""
    lines, score = [], f"final_{task.score}"
    percent = f"{100 * task.final_fraction:g}%"
    for env, rows in summary.groupby("env", sort=False):
        shown = rows if len(rows) <= 3 * top else rows.nlargest(top, score)
        title = f"{env}: final values (mean over the last {percent} of updates; mean over seeds, 95% bootstrap CI)"
        if len(shown) < len(rows):
            title += f", best {top} of {len(rows)} settings by {task.score}"
        table = shown.drop(columns=["env"]).copy()
        for name in task.reported:
            column = f"final_{name}"
            table[column] = [
                f"{m:.4g} [{lo:.4g}, {hi:.4g}]"
                for m, lo, hi in zip(
                    table[column], table[f"{column}_ci95_low"], table[f"{column}_ci95_high"], strict=True
                )
            ]
            table = table.drop(columns=[f"{column}_ci95_low", f"{column}_ci95_high"])
        lines += [title, table.to_string(index=False), ""]
    return "\n".join(lines).rstrip()
