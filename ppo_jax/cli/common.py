"""What every ``ppo-jax`` subcommand shares: printing that survives a closed pipe, the flags as typed, seeds and keys, number format."""

from __future__ import annotations

import os
import sys

from ppo_jax.config_fields import MAX_RUNS
from ppo_jax.errors import ConfigError

MAX_SEED = 2**32 - 1  # jax.random.key keeps only the low 32 bits without jax_enable_x64


def stdout_to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def say(*parts) -> None:
    """print to stdout; if stdout was closed (``ppo-jax train ... | head``), keep going silently."""
    try:
        print(*parts, flush=True)
    except BrokenPipeError:
        stdout_to_devnull()


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``args`` (``--flag V`` or ``--flag=V``; the last one wins), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def typed_flags(argv: list[str], names) -> dict[str, str]:
    """``{field: the flag as typed}`` for each of ``names`` that ``argv`` sets (``--name-with-dashes``, ``--no-...``)."""
    tokens = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    typed = {}
    for name in names:
        flag = "--" + name.replace("_", "-")
        for written in (flag, "--no-" + flag[2:]):
            if written in tokens:
                typed[name] = written
    return typed


def refuse_empty_out(argv: list[str]) -> None:
    """ConfigError if ``--out`` is given an empty string (a path of '' would mean the current directory)."""
    if flag_value(argv, "--out") == "":
        raise ConfigError(
            "--out is empty; give the directory to write, e.g. --out runs/first (--out . for the current directory)."
        )


def seed_list(seed: int, num_seeds: int, flag: str = "--seed") -> list[int]:
    """The integer seed of each run: seed, seed+1, ..., seed+num_seeds-1 (checked to fit in 32 bits)."""
    if isinstance(num_seeds, bool) or num_seeds < 1:
        raise ConfigError(f"--seeds must be a positive integer, got {num_seeds}.")
    if seed < 0 or seed + num_seeds - 1 > MAX_SEED:
        raise ConfigError(
            f"seeds must lie in [0, {MAX_SEED}] (JAX keeps 32 bits of a seed), got {flag} {seed} with "
            f"--seeds {num_seeds} (last seed {seed + num_seeds - 1})."
        )
    if num_seeds > MAX_RUNS:  # before listing them (4 billion seeds fit in 32 bits, not in memory)
        raise ConfigError(f"--seeds {num_seeds} is more runs than one command trains ({MAX_RUNS:,} at most).")
    return list(range(seed, seed + num_seeds))


def fmt(x: float, digits: int = 2) -> str:
    return "nan" if x != x else f"{x:.{digits}f}"


def initialize_distributed() -> None:
    """``--distributed``: ``jax.distributed.initialize()``, which finds the cluster itself (SLURM, Open MPI, TPU pods);
    ConfigError where it cannot. Call it before anything starts a JAX backend (importing gymnax does)."""
    import jax

    try:
        jax.distributed.initialize()
    except (ValueError, RuntimeError) as error:  # no cluster found: "coordinator_address should be defined."
        raise ConfigError(
            f"--distributed: jax.distributed.initialize() failed ({' '.join(str(error).split())}); "
            "run under SLURM, Open MPI or on a TPU pod, or drop --distributed."
        ) from None
