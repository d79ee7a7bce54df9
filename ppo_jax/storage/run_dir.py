"""The run directory written by ``ppo-jax train --out DIR`` and ``ppo-jax rlhf --out DIR``: one per task run.

Layout::

    DIR/
      config.json     {"task": name, <every config field>, "seeds": [the integer seed of each run]}
      metadata.json   ppo_jax.storage.provenance.collect_metadata() plus start/end time,
                      compile/run seconds, env steps/s and the final values
      metrics.csv     tidy table, one row per seed x update: seed, update, env_steps
                      (samples per run so far: env steps; RLHF: sequences), <the task's metric_names>
      evaluation.csv  (PPO, if evaluated) one row per seed x policy x episode: seed, policy
                      (stochastic | deterministic), episode, return, length — fresh
                      episodes played by the final parameters (ppo_jax.rl.evaluate)
      params.msgpack  flax.serialization msgpack (no pickle): the task's ``params_tree``
                      with a leading seed axis on per-run arrays, and "seeds" (int64)
                      (PPO: {"params", "obs_stats"}; RLHF: {"actor", "critic", "reference", "reward_model"})

Read it back with ``load_config``, ``pd.read_csv(DIR / "metrics.csv")`` and
``load_params``; ``check_run_dir`` reads every file back first, naming a corrupt one. PPO seed ``i``'s parameters are
``jax.tree.map(lambda x: x[i], p["params"])``, usable directly as
``ppo_jax.rl.build_network.make_network(cfg).apply(params_i, obs)``.

The directory is written while the run goes (``ppo_jax.storage.live_run``:
config.json first, metrics.csv appended segment by segment, params.msgpack and
evaluation.csv at the end); an old run replaced with ``--force`` is deleted only
once the new one is complete.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ppo_jax.storage.atomic import check_out_dir, read_json, write_file
from ppo_jax.storage.corrupt import corrupt, read_csv

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
METRICS_FILE = "metrics.csv"
EVALUATION_FILE = "evaluation.csv"
PARAMS_FILE = "params.msgpack"


def is_output_dir(path: Path) -> bool:
    """A ppo-jax run directory (config.json) or sweep directory (spec.json), each with metadata.json."""
    has_config = (path / CONFIG_FILE).is_file() or (path / "spec.json").is_file()
    return has_config and (path / METADATA_FILE).is_file()


def prepare_out_dir(path, force: bool) -> None:
    """``check_out_dir`` for run and sweep outputs: ``force`` replaces only a ppo-jax run or sweep directory."""
    check_out_dir(
        path,
        force,
        replaceable=is_output_dir,
        what="ppo-jax run directory",
        marker=f"no {CONFIG_FILE} or spec.json with {METADATA_FILE}",
    )


def config_record(task, cfg, seeds) -> dict[str, Any]:
    """What config.json holds: the task's name, the config (leaves as short floats) and the seeds."""
    return {"task": task.name, **cfg.to_dict(), "seeds": [int(s) for s in seeds]}


def load_config(path):
    """(task, config, seeds) from a run directory or its config.json (no "task" key: a PPO run)."""
    from ppo_jax.task_registry import get_task

    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_FILE
    values = read_json(path)
    task = get_task(values.pop("task", "ppo"))
    seeds = values.pop("seeds", [])
    return task, task.config_class.from_dict(values), seeds


def metrics_frame(task, cfg, seeds, metrics: Mapping, first_update: int = 0):
    """Tidy DataFrame: one row per seed x update; columns seed, update, env_steps, the task's metric names.

    ``metrics[name]`` is ``[num_seeds, n]``: updates ``first_update .. first_update + n - 1``
    (the whole run, or one segment of it, ``ppo_jax.segments``).
    """
    import pandas as pd

    seeds = np.asarray(seeds, dtype=np.int64)
    arrays = {name: np.asarray(metrics[name]) for name in task.metric_names}
    count = next(iter(arrays.values())).shape[-1]
    for name, array in arrays.items():
        if array.shape != (len(seeds), count):
            raise ValueError(
                f"metric {name!r} has shape {array.shape}, expected (num_seeds, updates) = {(len(seeds), count)}"
            )
    update = np.arange(first_update, first_update + count, dtype=np.int64)
    columns = {
        "seed": np.repeat(seeds, count),
        "update": np.tile(update, len(seeds)),
        "env_steps": np.tile((update + 1) * task.steps_per_update(cfg), len(seeds)),
    }
    columns.update({name: array.reshape(-1) for name, array in arrays.items()})
    return pd.DataFrame(columns)


def evaluation_frame(seeds, evaluation):
    """Tidy DataFrame of an ``ppo_jax.rl.evaluate.Evaluation`` with a leading seed axis: seed, policy, episode, return, length."""
    import pandas as pd

    frames = []
    for policy in ("stochastic", "deterministic"):
        returns = np.asarray(getattr(evaluation, policy), dtype=np.float64)
        lengths = np.asarray(getattr(evaluation, f"{policy}_length"), dtype=np.int64)
        num_seeds, episodes = returns.shape
        frames.append(
            pd.DataFrame(
                {
                    "seed": np.repeat(np.asarray(seeds, dtype=np.int64), episodes),
                    "policy": policy,
                    "episode": np.tile(np.arange(episodes), num_seeds),
                    "return": returns.reshape(-1),
                    "length": lengths.reshape(-1),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def plain_tree(tree):
    """Nested plain dicts of numpy arrays (what flax msgpack restores exactly)."""
    if isinstance(tree, Mapping):
        return {str(k): plain_tree(v) for k, v in tree.items()}
    return np.asarray(tree)


def write_results(path: Path, *, task, seeds, output, shared=None, evaluation=None) -> None:
    """params.msgpack (the task's ``params_tree`` with a leading seed axis, and "seeds") and evaluation.csv, in ``path``."""
    from flax import serialization

    params = {**plain_tree(task.params_tree(output, shared)), "seeds": np.asarray(seeds, dtype=np.int64)}
    if evaluation is not None:
        frame = evaluation_frame(seeds, evaluation)
        write_file(path / EVALUATION_FILE, lambda tmp: frame.to_csv(tmp, index=False))
    data = serialization.msgpack_serialize(params)
    write_file(path / PARAMS_FILE, lambda tmp: tmp.write_bytes(data))


def read_final_window(path, task, seeds, num_updates: int) -> dict[str, np.ndarray]:
    """``{name: [num_seeds, w]}`` of the reported metrics over the last ``w`` updates that define final values, from metrics.csv.

    Read in chunks of rows, so memory does not grow with the length of the run.
    """
    import pandas as pd

    from ppo_jax.final_values import final_window

    window = final_window(num_updates, task.final_fraction)
    first = num_updates - window
    names = list(task.reported)
    out = {name: np.full((len(seeds), window), np.nan) for name in names}
    row = {int(s): i for i, s in enumerate(seeds)}
    try:
        for chunk in pd.read_csv(path, usecols=["seed", "update", *names], chunksize=1_000_000):
            chunk = chunk[chunk["update"] >= first]
            rows, cols = chunk["seed"].map(row).to_numpy(), chunk["update"].to_numpy() - first
            for name in names:
                out[name][rows, cols] = chunk[name].to_numpy()
    except (ValueError, IndexError) as error:  # unparsable, or rows of no seed / update of this run
        raise corrupt(path, error) from None
    return out


def read_divergences(path, seeds) -> dict[int, tuple[int, float]]:
    """``{seed: (update, loss there)}``: each diverged seed's first update with ``non_finite`` > 0, from metrics.csv.

    A metrics.csv written before that column existed: the first update with a non-finite
    loss (``ppo_jax.final_values.divergence_flags``). Read in chunks, keeping only flagged rows.
    """
    import pandas as pd

    from ppo_jax.final_values import NON_FINITE, divergence_flags

    header = list(pd.read_csv(path, nrows=0).columns)
    columns = ["seed", "update", *(c for c in (NON_FINITE, "loss") if c in header)]
    found: dict[int, tuple[int, float]] = {}
    if len(columns) == 2:
        return found
    wanted = {int(s) for s in seeds}
    for chunk in pd.read_csv(path, usecols=columns, chunksize=1_000_000):
        flagged = chunk[divergence_flags(chunk) > 0]
        for seed, update, loss in zip(
            flagged["seed"], flagged["update"], flagged.get("loss", np.nan * flagged["update"]), strict=True
        ):
            if int(seed) in wanted and (int(seed) not in found or update < found[int(seed)][0]):
                found[int(seed)] = (int(update), float(loss))
    return found


def load_params(path) -> dict[str, Any]:
    """Read params.msgpack (or a run directory's) back: the nested dict of numpy arrays ``write_results`` wrote."""
    from flax import serialization

    path = Path(path)
    if path.is_dir():
        path = path / PARAMS_FILE
    try:
        params = serialization.msgpack_restore(path.read_bytes())
    except (ValueError, TypeError) as error:
        raise corrupt(path, error, "it is not a ppo-jax params file, or was damaged: train the run again") from None
    if not isinstance(params, dict):
        raise corrupt(path, TypeError(f"a {type(params).__name__}, not a tree of arrays"), "train the run again")
    return params


def check_run_dir(path) -> None:
    """Read back every file of a run directory (CorruptFileError naming the first that cannot be): for a report.

    config.json and metadata.json as JSON; metrics.csv, every row, and for a finished run one per seed and
    update, the last one whole; evaluation.csv with its columns; params.msgpack. Nothing in a finished run
    can be recomputed but by training it again.
    """
    import pandas as pd

    path = Path(path)
    task, cfg, seeds = load_config(path)
    finished = read_json(path / METADATA_FILE).get("status") not in ("running", "interrupted")
    metrics, rows = path / METRICS_FILE, 0
    try:
        for chunk in pd.read_csv(metrics, chunksize=1_000_000):
            if not {"seed", "update", "env_steps"} <= set(chunk.columns):
                raise ValueError(f"columns {list(chunk.columns)[:5]}, not seed, update, env_steps, ...")
            rows += len(chunk)
        with open(metrics, "rb") as f:
            f.seek(-1, os.SEEK_END)
            whole = f.read(1) == b"\n"
        expected = len(seeds) * task.num_updates(cfg)
        if finished and (not whole or rows != expected):
            raise ValueError(f"{rows} rows, not {expected} (seeds x updates)" + ("" if whole else ", the last cut"))
    except ValueError as error:
        raise corrupt(metrics, error, "it cannot be recomputed: train the run again") from None
    if (path / EVALUATION_FILE).exists():
        read_csv(path / EVALUATION_FILE, ("seed", "policy", "episode", "return", "length"), "train the run again")
    if (path / PARAMS_FILE).exists():
        load_params(path)
