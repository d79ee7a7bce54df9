"""The tidy sweep table and its summary.

One row per env x setting x seed x logging step::

    env, setting_id, [pretrain_seed,] seed, update, env_steps, <one column per swept field>, <one per metric>

``pretrain_seed`` (tasks whose settings share pretraining, ``Task.shared_fields``: lm,
rlhf) is the seed of the pretrained model the run started from (``pretrain: {seed}``
or each of ``pretrain: {seeds}``); a table written before the column existed is read
as holding the spec's one pretraining seed (``sort_table``).

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
run's last row only (NaN elsewhere). ``non_finite`` (``ppo_jax.scan_updates``) is 1.0
where the loss or the training state was NaN or infinite after the update, 0.0
else; logged every k updates, the count of such updates in the window. Rows are
in canonical order: env and setting as in the spec, then pretraining seed and seed as listed, then update.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.final_values import divergence_flags, final_value, first_divergence, hierarchical_ci, seed_ci
from ppo_jax.sweep.plan import Chunk
from ppo_jax.sweep.program import log_updates
from ppo_jax.sweep.spec import SweepSpec
from ppo_jax.sweep.spec_values import column_value, field_kind
from ppo_jax.task_contract import Task

KEY_COLUMNS = ("env", "setting_id", "seed", "update", "env_steps")
PRETRAIN_SEED = "pretrain_seed"
"""The column of the pretraining seed, before ``seed``, in the tables of tasks with shared pretraining."""
_DTYPES = {"float": "float64", "int": "int64", "bool": "bool", "str": "object", "sizes": "object"}


def metric_columns(task: Task) -> dict[str, str]:
    """Metric name -> its table column (``name_now`` where a config field has the name)."""
    return {name: f"{name}_now" if name in task.field_names else name for name in task.metric_names}


def chunk_frame(spec: SweepSpec, chunk: Chunk, metrics: dict[str, np.ndarray], pretrain_seed: int) -> pd.DataFrame:
    """Rows of one chunk, whose runs start from pretraining seed ``pretrain_seed``; ``metrics[name]`` is
    ``[len(chunk.pairs), num_logs]``."""
    task, settings = spec.task, [spec.settings[i] for i, _ in chunk.pairs]
    cfg = settings[0].cfg
    updates = log_updates(task.num_updates(cfg), spec.log_every)
    n, num_logs = len(settings), len(updates)
    columns = {
        "env": np.repeat(np.array([s.env for s in settings], dtype=object), num_logs),
        "setting_id": np.repeat([s.setting_id for s in settings], num_logs).astype(np.int64),
        **({PRETRAIN_SEED: np.full(n * num_logs, pretrain_seed, np.int64)} if task.shared_fields else {}),
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


def with_pretrain_seed(spec: SweepSpec, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its ``pretrain_seed`` column before ``seed`` (tasks with shared pretraining): where it is
    missing (chunks written before the column existed, of a sweep of one pretraining seed), the spec's seed."""
    if not spec.task.shared_fields or (PRETRAIN_SEED in table and table[PRETRAIN_SEED].notna().all()):
        return table
    values = table[PRETRAIN_SEED] if PRETRAIN_SEED in table else pd.Series(np.nan, index=table.index)
    table = table.drop(columns=[PRETRAIN_SEED], errors="ignore")
    table.insert(table.columns.get_loc("seed"), PRETRAIN_SEED, values.fillna(spec.pretrain_seed).astype(np.int64))
    return table


def sort_table(spec: SweepSpec, table: pd.DataFrame) -> pd.DataFrame:
    """Rows in canonical order (env and setting as in the spec, pretraining seed and seed as listed, update),
    index reset; ``pretrain_seed`` filled in where missing (``with_pretrain_seed``)."""
    if table.empty:
        return table
    table = with_pretrain_seed(spec, table)
    order = pd.DataFrame(
        {"env": [s.env for s in spec.settings], "setting_id": [s.setting_id for s in spec.settings]}
    ).reset_index(names="_setting")
    seed_position = {seed: i for i, seed in enumerate(spec.seeds)}
    keyed = table.merge(order, on=["env", "setting_id"], how="left", validate="many_to_one")
    keyed["_seed"] = keyed["seed"].map(seed_position)
    model_position = {seed: i for i, seed in enumerate(spec.pretrain_seeds)}
    keyed["_model"] = keyed[PRETRAIN_SEED].map(model_position) if PRETRAIN_SEED in keyed else 0
    keyed = keyed.sort_values(["_setting", "_model", "_seed", "update"], kind="stable")
    return keyed.drop(columns=["_setting", "_model", "_seed"]).reset_index(drop=True)


def run_keys(table: pd.DataFrame) -> list[str]:
    """The columns that name a run within a setting: ``pretrain_seed`` (where there is one) and ``seed``."""
    return [PRETRAIN_SEED, "seed"] if PRETRAIN_SEED in table else ["seed"]


def nested(runs: pd.DataFrame) -> bool:
    """Whether ``runs`` start from more than one pretrained model (their CIs: ``hierarchical_ci``)."""
    return PRETRAIN_SEED in runs and runs[PRETRAIN_SEED].nunique() > 1


def summarize(spec: SweepSpec, table: pd.DataFrame) -> pd.DataFrame:
    """Final values per env x setting: the swept values, seeds, diverged runs, and per reported metric its mean and 95% CI over seeds.

    A run's final value of metric m = its mean over the last ``task.final_fraction``
    of the run's logged rows (``ppo_jax.final_values.final_value``); columns
    ``final_m``, ``final_m_ci95_low``, ``final_m_ci95_high`` for every m in
    ``task.reported`` (the CI: ``ppo_jax.final_values.seed_ci``). A run that
    diverged (``non_finite``; ``ppo_jax.final_values.first_divergence``) has no
    final value: ``diverged`` counts those seeds and ``diverged_at`` names them
    ("seed 3 at update 112; ..." — logged every k updates: the last update of the
    first window holding a non-finite one), and the means and CIs are over the
    other seeds; ``final_m_seeds`` says how many seeds a mean is over (fewer than
    ``seeds`` also where a run has no value, e.g. no episode ended).

    Runs of several pretraining seeds (``nested``): ``pretrain_seeds`` counts them, ``seeds`` stays the RL seeds
    per pretrained model, ``final_m_seeds`` counts runs (of ``pretrain_seeds x seeds``), ``diverged_at`` names
    "pretrain seed p, seed s at update u", and the CI is ``ppo_jax.final_values.hierarchical_ci`` over pretrained
    models x seeds.
    """
    task, rows = spec.task, []
    for (env, setting_id), runs in table.groupby(["env", "setting_id"], sort=False):
        first, keys, two_level = runs.iloc[0], run_keys(runs), nested(runs)
        row = {
            "env": env,
            "setting_id": setting_id,
            **{a: first[a] for a in spec.axes},
            **({"pretrain_seeds": runs[PRETRAIN_SEED].nunique()} if two_level else {}),
            "seeds": runs["seed"].nunique(),
        }
        by_run = list(runs.groupby(keys, sort=False))
        diverged_at = {}
        for key, run in by_run:
            flags = divergence_flags(run)
            index = -1 if flags is None else int(first_divergence(flags))
            if index >= 0:
                diverged_at[key] = int(run["update"].iloc[index])
        row["diverged"] = len(diverged_at)
        row["diverged_at"] = "; ".join(
            (f"pretrain seed {k[0]}, seed {k[1]}" if two_level else f"seed {k[-1]}") + f" at update {u}"
            for k, u in diverged_at.items()
        )
        for name in task.reported:
            per_run = [
                np.nan if key in diverged_at else final_value(run[name].to_numpy(), task.final_fraction)
                for key, run in by_run
            ]
            ci = hierarchical_ci(per_run, [key[0] for key, _ in by_run]) if two_level else seed_ci(per_run)
            row[f"final_{name}"], row[f"final_{name}_ci95_low"], row[f"final_{name}_ci95_high"] = ci[:3]
            row[f"final_{name}_seeds"] = ci.count
        rows.append(row)
    return pd.DataFrame(rows)


def format_summary(summary: pd.DataFrame, task: Task, top: int = 10) -> str:
    """A text table per env; with more than ``3 * top`` settings, the ``top`` best by the task's score.

    A mean over fewer seeds than ran says so ("(7 of 8 seeds)"); the ``diverged`` column counts diverged
    seeds, and a line under the table names each and its update (a summary.csv without them: as before).
    """
    lines, score = [], f"final_{task.score}"
    percent = f"{100 * task.final_fraction:g}%"
    for env, rows in summary.groupby("env", sort=False):
        shown = rows if len(rows) <= 3 * top else rows.nlargest(top, score)
        models = int(rows["pretrain_seeds"].max()) if "pretrain_seeds" in rows else 1
        over = (
            f"mean over runs, 95% CI, hierarchical bootstrap over {models} SFT models x {int(rows['seeds'].max())} "
            "RL seeds"
            if models > 1
            else "mean over seeds, 95% bootstrap CI"
        )
        title = f"{env}: final values (mean over the last {percent} of updates; {over})"
        if len(shown) < len(rows):
            title += f", best {top} of {len(rows)} settings by {task.score}"
        table = shown.drop(columns=["env", "diverged_at"], errors="ignore").copy()
        for name in task.reported:
            column = f"final_{name}"
            counts = table[f"{column}_seeds"] if f"{column}_seeds" in table else table["seeds"]
            table[column] = [
                f"{m:.4g} [{lo:.4g}, {hi:.4g}]"
                + (f" ({n} of {seeds * models} {'runs' if models > 1 else 'seeds'})" if n != seeds * models else "")
                for m, lo, hi, n, seeds in zip(
                    table[column],
                    table[f"{column}_ci95_low"],
                    table[f"{column}_ci95_high"],
                    counts,
                    table["seeds"],
                    strict=True,
                )
            ]
            table = table.drop(
                columns=[f"{column}_ci95_low", f"{column}_ci95_high", f"{column}_seeds"], errors="ignore"
            )
        lines += [title, table.to_string(index=False)]
        if "diverged_at" in shown:
            where = shown[shown["diverged"] > 0]
            lines += [
                f"  setting {i} diverged: {at}" for i, at in zip(where["setting_id"], where["diverged_at"], strict=True)
            ]
        lines.append("")
    return "\n".join(lines).rstrip()
