"""Live logs of a run for the tools people watch runs with: ``--log tensorboard`` and ``--log wandb``.

Written from the segment loop on the host (``ppo_jax.segments``), never from inside
the program: after each segment, one scalar per metric per update of every
seed, named as in metrics.csv, at step = the update index. Each seed is its own
run (TensorBoard: ``DIR/tensorboard/seed_<s>/``; W&B: a run named ``<DIR>/seed_<s>``
in group ``<DIR>``), with the config as its hyperparameters. Nothing is imported
unless asked for: ``pip install "ppo-jax[tensorboard]"`` / ``"ppo-jax[wandb]"``.

A resumed run rewrites the updates after its checkpoint: TensorBoard is told to
purge the steps from there on (``purge_step``), so a reader sees each update once.
W&B runs offline unless ``WANDB_MODE`` says otherwise (nothing goes over the network
at run time; ``wandb sync DIR/wandb/offline-run-*`` uploads later).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

from ppo_jax.errors import ConfigError

LOGGERS = ("tensorboard", "wandb")
_PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb"}


def check_loggers(names, out) -> tuple[str, ...]:
    """The requested loggers, checked before anything compiles: known, installed, and with a run directory."""
    names = tuple(dict.fromkeys(names))
    for name in names:
        if name not in LOGGERS:
            raise ConfigError(
                f"--log {name}: unknown logger; choose from {', '.join(LOGGERS)} "
                "(metrics.csv is always written with --out)."
            )
        if importlib.util.find_spec(_PACKAGES[name]) is None:
            raise ConfigError(f'--log {name} needs the {_PACKAGES[name]} package: pip install "ppo-jax[{name}]".')
    if names and out is None:
        raise ConfigError(f"--log {' '.join(names)} writes into the run directory: add --out DIR.")
    return names


class TensorBoardLogger:
    def __init__(self, path: Path, seeds, config: dict, first_update: int):
        from tensorboardX import SummaryWriter
        from tensorboardX.summary import hparams

        self.writers = {}
        hyper = {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool))}
        for seed in seeds:
            writer = SummaryWriter(str(path / "tensorboard" / f"seed_{seed}"), purge_step=first_update or None)
            if not first_update:
                for summary in hparams({**hyper, "seed": int(seed)}, {}):
                    writer.file_writer.add_summary(summary)
            self.writers[int(seed)] = writer

    def write(self, first_update: int, metrics: dict[str, np.ndarray]) -> None:
        for i, writer in enumerate(self.writers.values()):
            for name, values in metrics.items():
                for j, value in enumerate(values[i]):
                    writer.add_scalar(name, float(value), first_update + j)
            writer.flush()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


class WandbLogger:
    def __init__(self, path: Path, seeds, config: dict, first_update: int):
        import wandb

        self.wandb = wandb
        mode = os.environ.get("WANDB_MODE", "offline")
        self.runs = [
            wandb.init(
                project=os.environ.get("WANDB_PROJECT", "ppo_jax"),
                dir=str(path),
                mode=mode,
                config={**config, "seed": int(s)},
                name=f"{path.name}/seed_{s}",
                group=path.name,
                reinit="create_new",
            )
            for s in seeds
        ]

    def write(self, first_update: int, metrics: dict[str, np.ndarray]) -> None:
        for i, run in enumerate(self.runs):
            for j in range(next(iter(metrics.values())).shape[1]):
                run.log({name: float(values[i, j]) for name, values in metrics.items()}, step=first_update + j)

    def close(self) -> None:
        for run in self.runs:
            run.finish()


def make_loggers(names, path: Path, seeds, config: dict, first_update: int = 0) -> list:
    """One logger per name (``check_loggers`` first), writing under the run directory ``path``."""
    classes = {"tensorboard": TensorBoardLogger, "wandb": WandbLogger}
    return [classes[name](Path(path), seeds, config, first_update) for name in names]
