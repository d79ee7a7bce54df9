"""The registry of tasks a sweep spec, a run directory and a report may name (``task: ppo``, ``task: lm``, ``task: rlhf``)."""

from __future__ import annotations

from ppo_jax.errors import ConfigError, close_matches
from ppo_jax.lm.task import LM, RLHF
from ppo_jax.rl.task import PPO
from ppo_jax.task_contract import Task

TASKS: dict[str, Task] = {PPO.name: PPO, LM.name: LM, RLHF.name: RLHF}
DEFAULT_TASK = PPO.name


def get_task(name: str) -> Task:
    """The task called ``name``; ConfigError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in TASKS:
        raise ConfigError(f"unknown task {name!r}.{close_matches(str(name), TASKS)} Known tasks: {', '.join(TASKS)}.")
    return TASKS[name]
