"""The run directory written by ``ppo-jax train --out DIR``.

Layout::

    DIR/
      config.json     PPOConfig.to_dict() plus "seeds" (the integer seed of each run)
      metadata.json   versions, backend, devices, host, command line, git commit,
                      start/end time, compile/run seconds, env steps/s, final return
      metrics.csv     tidy table, one row per seed x update:
                      seed, update, env_steps, <every name in ppo_jax.train.METRIC_NAMES>
      evaluation.csv  (if evaluated) one row per seed x policy x episode: seed, policy
                      (stochastic | deterministic), episode, return, length — fresh
                      episodes played by the final parameters (ppo_jax.evaluate)
      params.msgpack  final parameters and observation statistics of every seed,
                      flax.serialization msgpack (no pickle), leading seed axis:
                      {"params": <network variables>, "obs_stats": {"mean", "var", "count"},
                       "seeds": int64[num_seeds]}

Read it back with ``load_config``, ``pd.read_csv(DIR / "metrics.csv")`` and
``load_params``. Seed ``i``'s parameters are ``jax.tree.map(lambda x: x[i], p["params"])``,
usable directly as ``make_network(cfg).apply(params_i, obs)``.

Writing is atomic at the directory level: everything goes into a temporary
sibling directory, which is renamed into place only when complete; an old run
replaced with ``force`` is deleted only after the new one is in place.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ppo_jax.config import TRACED_FIELDS, PPOConfig
from ppo_jax.validation import ConfigError

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
METRICS_FILE = "metrics.csv"
EVALUATION_FILE = "evaluation.csv"
PARAMS_FILE = "params.msgpack"
RUN_FILES = (CONFIG_FILE, METADATA_FILE, METRICS_FILE, PARAMS_FILE)

_VERSIONED = ("jax", "jaxlib", "flax", "optax", "gymnax", "ppo-jax")


def _abs(path) -> Path:
    # abspath normalizes "." and ".." without resolving symlinks.
    return Path(os.path.abspath(os.fspath(path)))


def _looks_like_run_dir(path: Path) -> bool:
    """A ``ppo-jax train`` run directory, or a ``ppo-jax sweep`` directory (spec.json, see ppo_jax.sweep_dir)."""
    has_config = (path / CONFIG_FILE).is_file() or (path / "spec.json").is_file()
    return has_config and (path / METADATA_FILE).is_file()


def prepare_out_dir(path, force: bool) -> None:
    """Check, before anything compiles, that a run can be written to ``path``.

    Raises ConfigError if ``path`` is a file; if it is a non-empty directory and
    ``force`` is False; if ``force`` would replace a non-empty directory that is
    not a ppo-jax run directory (no config.json and metadata.json: a guard against
    ``--out ~ --force``); or if the nearest existing parent is not a writable
    directory. Creates nothing.
    """
    path = _abs(path)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ConfigError(f"--out {path} exists and is not a directory; choose another --out.")
        if any(path.iterdir()):
            if not force:
                raise ConfigError(
                    f"--out {path} exists and is not empty; pass --force to replace it, or choose another --out."
                )
            if not _looks_like_run_dir(path):
                raise ConfigError(
                    f"--out {path} is not empty and is not a ppo-jax run directory (no {CONFIG_FILE} or spec.json "
                    f"with {METADATA_FILE}); refusing to replace it even with --force. Choose another --out."
                )
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"cannot create --out {path}: {parent} is not a directory.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot create --out {path}: {parent} is not writable.")


# ----------------------------------------------------------------------------- metadata


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding the ppo_jax sources, or (None, None).

    Only a checkout that tracks ``ppo_jax/__init__.py`` counts (an installed copy
    in a virtual environment that happens to sit inside some repository does
    not). ``dirty``: tracked files differ from the commit (untracked files such as
    run directories are ignored).
    """
    package_dir = Path(__file__).resolve().parent
    root = package_dir.parent
    if _git(["ls-files", "--error-unmatch", f"{package_dir.name}/__init__.py"], root) is None:
        return None, None
    commit = _git(["rev-parse", "HEAD"], root)
    if commit is None:
        return None, None
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return commit, (None if status is None else bool(status))


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")


def collect_metadata(command: list[str]) -> dict[str, Any]:
    """Everything about the software and machine a result may depend on.

    Keys: start_time, command (list), command_line (shell-quoted), versions
    (python, jax, jaxlib, flax, optax, gymnax, ppo_jax), backend, devices,
    platform, machine, processor, cpu_count, python_executable, git_commit,
    git_dirty. The CLI adds end_time, compile_seconds, run_seconds,
    env_steps_per_second and final_return.
    """
    import jax

    commit, dirty = git_state()
    versions = {"python": platform.python_version()}
    versions.update({name.replace("-", "_"): _version(name) for name in _VERSIONED})
    return {
        "start_time": now_iso(),
        "command": list(command),
        "command_line": shlex.join(command),
        "versions": versions,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python_executable": sys.executable,
        "git_commit": commit,
        "git_dirty": dirty,
    }


# ----------------------------------------------------------------------------- contents


def _short_float(value: float) -> float:
    """The shortest decimal that maps back to the same float32 (2.5e-4, not 0.0002500000118743628)."""
    return float(str(np.float32(value)))


def config_dict(cfg: PPOConfig, seeds) -> dict[str, Any]:
    out = cfg.to_dict()
    for name in TRACED_FIELDS:
        value = out[name]
        out[name] = [_short_float(v) for v in value] if isinstance(value, list) else _short_float(value)
    out["seeds"] = [int(s) for s in seeds]
    return out


def load_config(path) -> tuple[PPOConfig, list[int]]:
    """(PPOConfig, seeds) from a run directory or its config.json."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_FILE
    values = json.loads(path.read_text())
    seeds = values.pop("seeds", [])
    return PPOConfig.from_dict(values), seeds


def metrics_frame(cfg: PPOConfig, seeds, metrics: dict):
    """Tidy DataFrame: one row per seed x update; columns seed, update, env_steps, METRIC_NAMES."""
    import pandas as pd

    from ppo_jax.train import METRIC_NAMES

    seeds = np.asarray(seeds, dtype=np.int64)
    arrays = {name: np.asarray(metrics[name]) for name in METRIC_NAMES}
    num_seeds, num_updates = len(seeds), cfg.num_updates
    for name, array in arrays.items():
        if array.shape != (num_seeds, num_updates):
            raise ValueError(
                f"metric {name!r} has shape {array.shape}, expected (num_seeds, num_updates) = "
                f"{(num_seeds, num_updates)}"
            )
    update = np.arange(num_updates, dtype=np.int64)
    columns = {
        "seed": np.repeat(seeds, num_updates),
        "update": np.tile(update, num_seeds),
        "env_steps": np.tile((update + 1) * cfg.batch_size, num_seeds),
    }
    columns.update({name: array.reshape(-1) for name, array in arrays.items()})
    return pd.DataFrame(columns)


def params_tree(output, seeds) -> dict[str, Any]:
    """Nested dict of numpy arrays (leading seed axis) for params.msgpack."""
    import jax

    stats = output.obs_stats
    return {
        # Plain dicts all the way down: msgpack_restore gives back exactly this structure.
        "params": jax.tree.map(np.asarray, _plain(output.train_state.params)),
        "obs_stats": {"mean": np.asarray(stats.mean), "var": np.asarray(stats.var), "count": np.asarray(stats.count)},
        "seeds": np.asarray(seeds, dtype=np.int64),
    }


def _plain(tree):
    from collections.abc import Mapping

    if isinstance(tree, Mapping):
        return {str(k): _plain(v) for k, v in tree.items()}
    return tree


def load_params(path) -> dict[str, Any]:
    """Read params.msgpack (or a run directory's) back: the nested dict of numpy arrays written by write_run_dir."""
    from flax import serialization

    path = Path(path)
    if path.is_dir():
        path = path / PARAMS_FILE
    return serialization.msgpack_restore(path.read_bytes())


def json_safe(value):
    """NaN -> null (strict JSON); +-inf stays (Python's json writes Infinity)."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(json_safe(value), indent=2) + "\n")


# ----------------------------------------------------------------------------- writing


def evaluation_frame(seeds, evaluation):
    """Tidy DataFrame of an ``Evaluation`` with a leading seed axis: seed, policy, episode, return, length."""
    import pandas as pd

    frames = []
    for policy in ("stochastic", "deterministic"):
        returns = np.asarray(getattr(evaluation, policy), dtype=np.float64)
        lengths = np.asarray(getattr(evaluation, f"{policy}_length"), dtype=np.int64)
        num_seeds, episodes = returns.shape
        frames.append(pd.DataFrame({
            "seed": np.repeat(np.asarray(seeds, dtype=np.int64), episodes), "policy": policy,
            "episode": np.tile(np.arange(episodes), num_seeds), "return": returns.reshape(-1), "length": lengths.reshape(-1),
        }))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def write_run_dir(path, *, cfg: PPOConfig, seeds, output, metadata: dict, force: bool, evaluation=None) -> Path:
    """Write a complete run directory at ``path`` (see the module docstring); return its absolute path.

    ``output`` is the TrainOutput of ``jax.vmap(train, in_axes=(None, 0))``: every
    leaf has a leading axis of ``len(seeds)``; so has ``evaluation`` (an
    ``ppo_jax.evaluate.Evaluation``, optional). Files are written into a
    temporary sibling directory that is renamed to ``path`` once complete. With
    ``force`` an existing run at ``path`` is moved aside first and deleted only
    after the new one is in place. If the final rename fails, the complete
    temporary directory is kept and the error names it.
    """
    from flax import serialization

    path = _abs(path)
    prepare_out_dir(path, force)  # again: the directory may have changed during training
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        _write_json(tmp / CONFIG_FILE, config_dict(cfg, seeds))
        _write_json(tmp / METADATA_FILE, metadata)
        metrics_frame(cfg, seeds, output.metrics).to_csv(tmp / METRICS_FILE, index=False)
        if evaluation is not None:
            evaluation_frame(seeds, evaluation).to_csv(tmp / EVALUATION_FILE, index=False)
        (tmp / PARAMS_FILE).write_bytes(serialization.msgpack_serialize(params_tree(output, seeds)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    old = None
    try:
        if path.exists() or path.is_symlink():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(path, old)
        os.rename(tmp, path)
    except OSError as error:
        if old is not None and not (path.exists() or path.is_symlink()):
            try:
                os.rename(old, path)  # put the previous run back
                old = None
            except OSError:
                pass
        where = f"; the previous run is at {old}" if old is not None else ""
        raise OSError(
            f"could not move the finished run into {path} ({error}); it is complete at {tmp}{where}"
        ) from error
    if old is not None:
        if old.is_symlink() or not old.is_dir():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)
    return path
