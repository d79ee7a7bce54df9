"""The ``ppo-jax`` command line.

    ppo-jax train [--env ID] [--preset mujoco|brax|none] [--total-timesteps N] [... every PPOConfig field ...]
                  [--seeds N] [--seed S] [--out DIR] [--force] [--no-progress]
    ppo-jax lm [--preset grpo|drgrpo|dapo|gspo|cispo|rloo|reinforce_pp|reinforce_pp_baseline|ppo_rlhf|none]
               [--problem addition|sort|copy] [--digits N] [... every LmConfig field ...] [--seeds N] [--out DIR]
    ppo-jax rlhf [--beta B] [--clip-eps-low E] [... every RlhfConfig field ...] [--seeds N] [--out DIR]
    ppo-jax sweep SPEC.yaml --out DIR [--resume] [--force] [--dry-run] [--chunk-size N]
                  [--memory-budget SIZE] [--part I/N] [--distributed] [--cache-dir DIR]
    ppo-jax report RUN_DIR [RUN_DIR ...] --out DIR [--last-percent P] [--reps N] [--baseline LABEL] [--force]
    ppo-jax envs

Modules: ``train`` (train, lm and rlhf: one runner for any task), ``sweep``,
``report``, ``common``. Exit status: 0 on success, 2 for input that cannot run
(message on stderr, starting with ``error:``; tyro uses 2 for flags it cannot
parse too), 3 when a seed of ``train`` / ``lm`` / ``rlhf`` diverged (a non-finite loss or
training state; the run directory is complete and says so; ``--allow-divergence``
exits 0), 1 if an output directory could not be written, 128 + the signal when SIGINT
(Ctrl-C: 130) or SIGTERM stopped it: at once, without waiting for XLA (``leave``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys

import tyro

from ppo_jax.cli.common import say, stdout_to_devnull
from ppo_jax.cli.report import Report, run_report
from ppo_jax.cli.sweep import Sweep, run_sweep
from ppo_jax.cli.train import Lm, Rlhf, Train, lm_defaults, run_lm, run_rlhf, run_train, train_defaults
from ppo_jax.errors import ConfigError
from ppo_jax.lm.task import LM, RLHF
from ppo_jax.rl.task import PPO


@dataclasses.dataclass(frozen=True)
class Envs:
    """List the environment ids accepted by --env: gymnax ids, Brax tasks (with the [brax] extra), then ppo_jax probe envs."""


SUBCOMMANDS = {PPO.command: Train, LM.command: Lm, RLHF.command: Rlhf, "sweep": Sweep, "report": Report, "envs": Envs}
RUNNERS = {Train: run_train, Lm: run_lm, Sweep: run_sweep, Report: run_report, Rlhf: run_rlhf}


def parse(args=None):
    """Parse the command line into a Train, Sweep, Report, Rlhf or Envs instance (tyro exits with 2 on bad flags).

    ``ppo-jax train --preset P`` is parsed against P's defaults (ConfigError if P does not fit --env); without
    --preset, against those of --env's default preset (``ppo_jax.rl.presets.default_preset``: mujoco for a Brax task).
    """
    args = sys.argv[1:] if args is None else list(args)
    if args[:1] == [PPO.command]:
        defaults = train_defaults(args[1:])
        if defaults is not None:
            return tyro.cli(Train, default=defaults, args=args[1:], prog=f"ppo-jax {PPO.command}")
    if args[:1] == [LM.command]:
        return tyro.cli(Lm, default=lm_defaults(args[1:]), args=args[1:], prog=f"ppo-jax {LM.command}")
    return tyro.extras.subcommand_cli_from_dict(
        SUBCOMMANDS,
        prog="ppo-jax",
        description="PPO to the letter in pure JAX: one jittable train function, vmapped over seeds and settings. "
        "Docs: docs/index.md (the site: pip install -e '.[docs]' && mkdocs serve); start with docs/getting-started.md.",
        args=args,
    )


def run_envs() -> int:
    from ppo_jax.rl.envs import SUITES

    lines = []
    for suite_name, suite in SUITES.items():
        missing = "" if suite.available() else f"   ({suite.install_hint})"
        lines += [f"# {suite_name}: {suite.doc}", *(name + missing for name in suite.names())]
    say("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ppo-jax``; returns the exit status.

    Called as the program (``argv`` None: the ``ppo-jax`` script, ``python -m ppo_jax.cli``), a run a signal
    stopped (exit status above 128) ends the process at once: see ``leave``.
    """
    status = _main(argv)
    if argv is None and status > 128:
        leave(status)
    return status


def leave(status: int) -> None:
    """End the process now with ``status``, once its files are written, without waiting for XLA's threads.

    A signal leaves work in XLA's threads (JAX lets KeyboardInterrupt out of a compile or of a wait on a
    running program, which run on: SFT and the reward model are one program of minutes), and
    Python's exit would wait for it to finish (and then crash). By now the run or sweep has written
    what it keeps (the directory says interrupted, checkpoints are complete); a collection frees what
    still holds a directory lock; then ``os._exit``, after flushing stdout and stderr.
    """
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _main(argv: list[str] | None) -> int:
    args_list = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse(args_list)
    except BrokenPipeError:  # ppo-jax train --help | head
        stdout_to_devnull()
        return 1
    except ConfigError as error:  # a preset that does not fit the env
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        if isinstance(args, Envs):
            return run_envs()
        return RUNNERS[type(args)](args, ["ppo-jax", *args_list])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # where nothing is written (a run without --out), or a second Ctrl-C while stopping
        print("interrupted", file=sys.stderr)
        return 130
