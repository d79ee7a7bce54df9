"""Old import paths of modules that moved in 0.2.0 (``ppo_jax.rlhf`` in 0.3.0), kept for one release with a ``DeprecationWarning``.

``import ppo_jax.train`` (and the other names in ``MOVED``) still works: it gives a
module whose names are looked up, in order, in the modules that now hold them, so
``from ppo_jax.ppo_loss import clipped_surrogate_loss`` finds it in
``ppo_jax.losses``. Delete this module (and its ``install()`` call in
``ppo_jax/__init__.py``) in the release after 0.2.0.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

MOVED: dict[str, tuple[str, ...]] = {
    "ppo_jax.adaptation": ("ppo_jax.rl.adaptation",),
    "ppo_jax.brax_envs": ("ppo_jax.rl.brax_envs",),
    "ppo_jax.config": ("ppo_jax.rl.config",),
    "ppo_jax.envs": ("ppo_jax.rl.envs",),
    "ppo_jax.evaluate": ("ppo_jax.rl.evaluate",),
    "ppo_jax.minibatch_sgd": ("ppo_jax.minibatch_epochs",),
    "ppo_jax.networks": ("ppo_jax.rl.networks", "ppo_jax.rl.build_network", "ppo_jax.initializers"),
    "ppo_jax.normalization": ("ppo_jax.rl.normalization",),
    "ppo_jax.policy_objectives": ("ppo_jax.losses",),
    "ppo_jax.ppo_loss": ("ppo_jax.rl.ppo_loss", "ppo_jax.losses"),
    "ppo_jax.ppo_task": ("ppo_jax.rl.task",),
    "ppo_jax.presets": ("ppo_jax.rl.presets",),
    "ppo_jax.probe_envs": ("ppo_jax.rl.probe_envs",),
    "ppo_jax.rollout": ("ppo_jax.rl.rollout",),
    "ppo_jax.task": ("ppo_jax.task_contract",),
    "ppo_jax.tasks": ("ppo_jax.task_registry",),
    "ppo_jax.train": ("ppo_jax.rl.train",),
    "ppo_jax.update": ("ppo_jax.rl.ppo_update",),
    "ppo_jax.update_loop": ("ppo_jax.scan_updates",),
    "ppo_jax.rlhf": ("ppo_jax.lm",),
    "ppo_jax.rlhf.config": ("ppo_jax.lm.config", "ppo_jax.lm.validation"),
    "ppo_jax.rlhf.copy_task": ("ppo_jax.lm.copy_task", "ppo_jax.lm.tokens"),
    "ppo_jax.rlhf.models": ("ppo_jax.lm.gru", "ppo_jax.lm.models"),
    "ppo_jax.rlhf.reward_model": ("ppo_jax.lm.reward_model",),
    "ppo_jax.rlhf.rewards": ("ppo_jax.lm.rewards", "ppo_jax.lm.advantages"),
    "ppo_jax.rlhf.sft": ("ppo_jax.lm.sft", "ppo_jax.lm.token_math"),
    "ppo_jax.rlhf.task": ("ppo_jax.lm.task",),
    "ppo_jax.rlhf.token_loss": ("ppo_jax.lm.token_loss",),
    "ppo_jax.rlhf.train": ("ppo_jax.lm.train",),
    "ppo_jax.sweep.resume": ("ppo_jax.sweep.sweep_dir",),
}
"""Old module name -> the modules that now hold its names, searched in order."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        return importlib.machinery.ModuleSpec(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module):
        homes = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {' and '.join(homes)}; the old path goes in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        if any(name.startswith(module.__name__ + ".") for name in MOVED):
            module.__path__ = []  # an old package: its old submodules are aliases too
        targets = [importlib.import_module(home) for home in homes]

        def __getattr__(name):
            for target in targets:
                if hasattr(target, name):
                    return getattr(target, name)
            raise AttributeError(f"module {module.__name__!r} (moved to {', '.join(homes)}) has no attribute {name!r}")

        module.__getattr__ = __getattr__
        module.__doc__ = f"Moved to {', '.join(homes)} (deprecated alias)."


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
