"""ppo_jax: PPO to the letter, in pure JAX, vmappable over seeds and hyperparameters."""

from ppo_jax.config import PPOConfig
from ppo_jax.train import TrainOutput, train
from ppo_jax.validation import ConfigError, validate

__version__ = "0.1.0"

__all__ = ["PPOConfig", "train", "TrainOutput", "ConfigError", "validate", "__version__"]
