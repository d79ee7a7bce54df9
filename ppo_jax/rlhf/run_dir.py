"""Writing RLHF results: run directories of ``ppo-jax rlhf --out`` and the frontier experiment's tables.

``ppo-jax rlhf --out DIR`` writes::

    DIR/
      config.json     RlhfConfig.to_dict() plus "seeds"
      metadata.json   ppo_jax.run_dir.collect_metadata() (versions, devices, command, git commit)
                      plus times, the pretraining losses and the final metrics
      metrics.csv     one row per seed x update: seed, update, <ppo_jax.rlhf.train.METRIC_NAMES>
      params.msgpack  flax msgpack (no pickle): {"actor", "critic"} with a leading seed axis,
                      "reference" (the SFT model), "reward_model", "seeds"

As ``ppo_jax.run_dir``: everything is written into a temporary sibling directory
renamed into place when complete, and an existing non-empty directory is replaced
only with ``force`` (and only if it looks like a run directory).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ppo_jax.run_dir import json_safe, prepare_out_dir
from ppo_jax.stats import bootstrap_ci, final_return

FINAL_FRACTION = 0.1
"""Final value of a metric: its mean over the last 10% of updates (``ppo_jax.stats.final_return``)."""


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(json_safe(value), indent=2) + "\n")


def write_atomically(path, write: Callable[[Path], None], *, force: bool) -> Path:
    """Call ``write(tmp)`` on a fresh temporary sibling of ``path``, then rename it to ``path``.

    An existing run at ``path`` (allowed by ``prepare_out_dir(path, force)``) is
    moved aside first and deleted once the new one is in place. Returns the absolute path.
    """
    path = Path(os.path.abspath(path))
    prepare_out_dir(path, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(path, old)
    os.rename(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


def plain(tree):
    """Nested plain dicts of numpy arrays (what flax msgpack restores)."""
    if isinstance(tree, Mapping):
        return {str(k): plain(v) for k, v in tree.items()}
    return np.asarray(tree)


def final_summary(metrics: Mapping[str, np.ndarray], names) -> dict:
    """``{name: {"per_seed", "mean", "ci95_low", "ci95_high"}}`` of each metric ``[num_seeds, num_updates]``."""
    out = {}
    for name in names:
        finals = final_return(np.asarray(metrics[name]), FINAL_FRACTION)
        mean, low, high = bootstrap_ci(finals)
        out[name] = {"per_seed": [float(v) for v in finals], "mean": mean, "ci95_low": low, "ci95_high": high}
    return out


def write_run(path, *, cfg, seeds, output, pretrained, metadata: dict, force: bool) -> Path:
    """The run directory of ``ppo-jax rlhf --out`` (see the module docstring)."""
    import pandas as pd
    from flax import serialization

    from ppo_jax.rlhf.train import METRIC_NAMES

    seeds = np.asarray(seeds, np.int64)
    num_updates = cfg.num_updates
    columns = {"seed": np.repeat(seeds, num_updates), "update": np.tile(np.arange(num_updates), len(seeds))}
    columns.update({name: np.asarray(output.metrics[name]).reshape(-1) for name in METRIC_NAMES})
    params = {
        **plain(output.params),
        "reference": plain(pretrained.sft),
        "reward_model": plain(pretrained.reward_model),
        "seeds": seeds,
    }

    def write(tmp: Path) -> None:
        write_json(tmp / "config.json", {**cfg.to_dict(), "seeds": seeds.tolist()})
        write_json(tmp / "metadata.json", metadata)
        pd.DataFrame(columns).to_csv(tmp / "metrics.csv", index=False)
        (tmp / "params.msgpack").write_bytes(serialization.msgpack_serialize(params))

    return write_atomically(path, write, force=force)
