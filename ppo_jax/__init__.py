"""ppo_jax: PPO to the letter, in pure JAX, vmappable over seeds and hyperparameters.

    from ppo_jax import PPOConfig
    from ppo_jax.train import train            # imports gymnax (and starts a JAX backend)

``train`` lives in ``ppo_jax.train`` and is not imported here: importing gymnax
starts a JAX backend, and ``ppo-jax sweep --distributed`` must call
``jax.distributed.initialize()`` before that.
"""

from ppo_jax.config import PPOConfig, validate
from ppo_jax.errors import ConfigError, ReportError, SpecError
from ppo_jax.task import Task
from ppo_jax.tasks import TASKS, get_task

__version__ = "0.1.0"

__all__ = ["PPOConfig", "validate", "ConfigError", "SpecError", "ReportError", "Task", "TASKS", "get_task", "__version__"]
