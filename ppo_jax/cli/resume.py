"""``--resume``: the config and run settings of the unfinished run in ``--out``, and flags given again checked against them."""

from __future__ import annotations

import shlex
from pathlib import Path

from ppo_jax.errors import ConfigError
from ppo_jax.task_contract import Task

RUN_FLAGS = ("seed", "seeds", "pretrain_seed", "eval_episodes", "checkpoint_every", "preset", "chunk_size")
"""Run flags fixed at the start; --progress, --log and --keep-checkpoints may change on --resume."""


def shown(field: str, value) -> str:
    """A run setting as its flag is written: ``--preset none`` is a run without a preset (None)."""
    if field == "preset":
        return "none" if value is None else str(value)
    return repr(value)


def given_flags(argv: list[str], names) -> set[str]:
    """Which of ``names`` (field names) appear as ``--name-with-dashes`` (or ``--no-...``) in ``argv``."""
    tokens = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    return {name for name in names if {f"--{name.replace('_', '-')}", f"--no-{name.replace('_', '-')}"} & tokens}


def resumed_run(task: Task, out: Path, cfg, options, argv: list[str]):
    """``(config, RunOptions)`` of the unfinished run at ``out``; ConfigError if a flag given now contradicts it."""
    from ppo_jax.runs import RunOptions
    from ppo_jax.storage.live_run import find_unfinished
    from ppo_jax.storage.run_dir import load_config

    path = find_unfinished(out)
    stored_task, stored_cfg, seeds = load_config(path)
    if stored_task.name != task.name:
        raise ConfigError(
            f"{path} holds a {stored_task.name} run: resume it with "
            f"ppo-jax {stored_task.command} --out {shlex.quote(str(out))} --resume."
        )
    from ppo_jax.storage.atomic import read_json
    from ppo_jax.storage.run_dir import METADATA_FILE

    stored = dict(read_json(path / METADATA_FILE).get("run") or {})
    stored_options = RunOptions(**{**stored, "seeds": [int(s) for s in seeds]})
    diff = []
    now, before = cfg.to_dict(), stored_cfg.to_dict()
    for name in sorted(given_flags(argv, now)):
        if now[name] != before[name]:
            diff.append(f"--{name.replace('_', '-')}: the run has {before[name]!r}, this command gives {now[name]!r}")
    for name in sorted(given_flags(argv, RUN_FLAGS)):
        field = "seeds" if name in ("seed", "seeds") else name
        if getattr(options, field) != getattr(stored_options, field):
            diff.append(
                f"--{name.replace('_', '-')}: the run has {field} {shown(field, getattr(stored_options, field))}, "
                f"this command gives {shown(field, getattr(options, field))}"
            )
    if diff:
        raise ConfigError(
            f"--resume continues the run in {path} with the config it started with; these flags differ:\n  "
            + "\n  ".join(diff)
            + "\nDrop them to resume, or start a new run with another --out."
        )
    return stored_cfg, stored_options
