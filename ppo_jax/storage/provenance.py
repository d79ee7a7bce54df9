"""Provenance of a result (metadata.json): the software, the machine, the command and the code it came from."""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

VERSIONED = ("jax", "jaxlib", "flax", "optax", "gymnax", "ppo-jax")
VERSIONED_IF_INSTALLED = ("brax", "mujoco")  # the [brax] extra


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


@functools.cache
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding the ppo_jax sources, or (None, None).

    Only a checkout that tracks ``ppo_jax/__init__.py`` counts (an installed copy
    in a virtual environment that happens to sit inside some repository does
    not). ``dirty``: tracked files differ from the commit (untracked files such as
    run directories are ignored). Read once per process: what a process runs is what it imported at its start.
    """
    package_dir = Path(__file__).resolve().parent.parent
    root = package_dir.parent
    if _git(["ls-files", "--error-unmatch", f"{package_dir.name}/__init__.py"], root) is None:
        return None, None
    commit = _git(["rev-parse", "HEAD"], root)
    if commit is None:
        return None, None
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return commit, (None if status is None else bool(status))


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).astimezone().isoformat(timespec="seconds")


def collect_metadata(command: list[str], task: str = "ppo") -> dict[str, Any]:
    """Everything about the software and machine a result may depend on.

    Keys: task, start_time, command (list), command_line (shell-quoted), versions
    (python, jax, jaxlib, flax, optax, gymnax, ppo_jax; brax and mujoco where installed), backend, devices,
    platform, machine, processor, cpu_count, python_executable, git_commit,
    git_dirty, environment (``speed_environment``). Writers add times, throughput and final values.
    """
    import jax

    commit, dirty = git_state()
    versions = {"python": platform.python_version()}
    versions.update({name.replace("-", "_"): _version(name) for name in VERSIONED})
    versions.update({name: v for name in VERSIONED_IF_INSTALLED if (v := _version(name)) is not None})
    return {
        "task": task,
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
        "environment": speed_environment(),
    }


def speed_environment() -> dict[str, str]:
    """The environment variables that change what XLA compiles or how ppo_jax lowers it: ``XLA_FLAGS``,
    ``PPO_JAX_THREEFRY`` (``ppo_jax.threefry_cpu``) and every ``JAX_*``; the ones set, sorted by name."""
    names = sorted(k for k in os.environ if k in ("XLA_FLAGS", "PPO_JAX_THREEFRY") or k.startswith("JAX_"))
    return {name: os.environ[name] for name in names}
