"""ppo_jax: PPO to the letter, in pure JAX, vmappable over seeds and hyperparameters."""

import sys
import types

from ppo_jax.config import PPOConfig
from ppo_jax.validation import ConfigError, validate

__version__ = "0.1.0"

__all__ = ["PPOConfig", "train", "TrainOutput", "ConfigError", "validate", "__version__"]


class _Package(types.ModuleType):
    """Imports ``train`` and ``TrainOutput`` on first use, not with the package.

    Importing ppo_jax.train imports gymnax, which starts a JAX backend; ``ppo-jax
    sweep --distributed`` must call ``jax.distributed.initialize()`` before that.
    As with ``from ppo_jax.train import train`` here, ``ppo_jax.train`` is the
    function, not the submodule (when Python binds the submodule, it is swapped).
    """

    def __getattr__(self, name: str):
        if name in ("train", "TrainOutput"):
            import importlib

            return getattr(importlib.import_module("ppo_jax.train"), name)
        raise AttributeError(f"module 'ppo_jax' has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name == "train" and isinstance(value, types.ModuleType):
            value = value.train
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
