"""ppo_jax: PPO to the letter, in pure JAX, vmappable over seeds and hyperparameters.

    from ppo_jax import PPOConfig
    from ppo_jax.rl.train import train            # imports gymnax (and starts a JAX backend)

Layout: one package per task, ``rl/`` (PPO on an environment, task ``ppo``) and
``lm/`` (RL for language models on sequences: tasks ``lm`` and ``rlhf``), which never import each
other; the modules at the root are shared by every task; ``sweep/``, ``storage/``,
``report/`` and ``cli/`` serve every task through ``ppo_jax.task_contract.Task``.

``train`` lives in ``ppo_jax.rl.train`` and is not imported here: importing gymnax
starts a JAX backend, and ``ppo-jax sweep --distributed`` must call
``jax.distributed.initialize()`` before that.
"""

from ppo_jax import moved_modules
from ppo_jax.errors import ConfigError, ReportError, SpecError
from ppo_jax.rl.config import PPOConfig, validate
from ppo_jax.task_contract import Task
from ppo_jax.task_registry import TASKS, get_task

moved_modules.install()

__version__ = "0.2.0"

__all__ = [
    "PPOConfig",
    "validate",
    "ConfigError",
    "SpecError",
    "ReportError",
    "Task",
    "TASKS",
    "get_task",
    "__version__",
]
