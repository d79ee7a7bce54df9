"""Load PureJaxRL's PPO scripts from a local checkout, unchanged, so ``bench.py --against purejaxrl`` can run them.

PureJaxRL (github.com/luchris429/purejaxrl) is not vendored: ``load(path, script)``
imports ``<path>/purejaxrl/<script>`` as it is, and changes only what it needs to
run beside gymnax >= 1.0 and without its optional simulators:

- gymnax 1.0's ``step`` returns six values (terminated and truncated apart);
  PureJaxRL's wrappers unpack five. ``gymnax.make`` is replaced, in the loaded
  module only, by one whose env returns ``done = terminated or truncated``: what
  gymnax < 1.0 returned and what PureJaxRL was written for.
- ``wrappers.py`` imports brax and navix at the top; when they are not installed,
  empty stand-ins are put in ``sys.modules`` (``ppo.py`` uses neither).
- ``ppo_continuous_action.py`` builds its env with ``BraxGymnaxWrapper(name)``;
  for a gymnax task that class is replaced by one over the gymnax env with the
  Brax convention the script assumes: actions in [-1, 1] (``ClipAction``), scaled
  to the env's bounds.

- ``ppo_rnn.py`` was written for flax < 0.8: ``nn.GRUCell()`` without ``features`` and a static
  ``nn.GRUCell.initialize_carry(rng, batch_dims, size)``. Its ``nn`` is replaced, in the loaded module
  only, by flax.linen with a ``GRUCell`` of those two calls (``old_flax_linen``): the same cell, the same
  default initializers, 128 units as the script's carry.

Needs ``pip install distrax`` (PureJaxRL's distributions). Nothing in the hot
path (network, loss, optimizer, GAE, minibatch loop) is touched.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from pathlib import Path

import gymnax
import jax.numpy as jnp
from gymnax.environments import spaces


class FiveValueStep:
    """A gymnax >= 1.0 env whose ``step`` returns ``(obs, state, reward, done, info)``, done = terminated | truncated."""

    def __init__(self, env, params):
        self._env, self.default_params = env, params

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self, key, params=None):
        return self._env.reset(key, self.default_params if params is None else params)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(
            key, state, action, self.default_params if params is None else params
        )
        return obs, state, reward, jnp.logical_or(terminated, truncated), info

    def observation_space(self, params=None):
        return self._env.observation_space(self.default_params if params is None else params)

    def action_space(self, params=None):
        return self._env.action_space(self.default_params if params is None else params)


def five_value_make(name: str, **kwargs):
    env, params = gymnax.make(name, **kwargs)
    return FiveValueStep(env, params), params


class GymnaxAsBrax(FiveValueStep):
    """Stands in for PureJaxRL's ``BraxGymnaxWrapper(name)``: a continuous gymnax task, actions in [-1, 1]."""

    def __init__(self, env_name: str, backend: str | None = None):
        env, params = gymnax.make(env_name)
        super().__init__(env, params)
        space = env.action_space(params)
        self._low, self._high = jnp.asarray(space.low, jnp.float32), jnp.asarray(space.high, jnp.float32)

    def step(self, key, state, action, params=None):
        scaled = self._low + (action + 1.0) * 0.5 * (self._high - self._low)
        return super().step(key, state, scaled, params)

    def observation_space(self, params=None):
        space = self._env.observation_space(self.default_params)
        return spaces.Box(low=-jnp.inf, high=jnp.inf, shape=(math.prod(space.shape),))

    def action_space(self, params=None):
        space = self._env.action_space(self.default_params)
        return spaces.Box(low=-1.0, high=1.0, shape=space.shape or (1,))


def old_flax_linen(hidden_size: int = 128) -> types.SimpleNamespace:
    """flax.linen as ``ppo_rnn.py`` calls it: ``GRUCell()`` (``hidden_size`` features) and the static
    ``GRUCell.initialize_carry(rng, batch_dims, size)`` (zeros, as flax's always were)."""
    import flax.linen as linen

    class GRUCell:
        def __new__(cls, **kwargs):
            return linen.GRUCell(features=hidden_size, **kwargs)

        @staticmethod
        def initialize_carry(rng, batch_dims, size):
            return jnp.zeros((*batch_dims, size))

    shim = types.SimpleNamespace(**{name: getattr(linen, name) for name in dir(linen) if not name.startswith("_")})
    shim.GRUCell = GRUCell
    return shim


def _stub_missing(name: str, attributes: dict[str, object] | None = None) -> None:
    """An empty module ``name`` (and its parents) in ``sys.modules`` if ``name`` cannot be imported."""
    try:
        importlib.import_module(name)
        return
    except ImportError:
        pass
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        if prefix not in sys.modules:
            sys.modules[prefix] = types.ModuleType(prefix)
        if depth > 1:
            setattr(sys.modules[".".join(parts[: depth - 1])], parts[depth - 1], sys.modules[prefix])
    for key, value in (attributes or {}).items():
        setattr(sys.modules[name], key, value)


def load(path: Path, script: str) -> types.ModuleType:
    """PureJaxRL's ``<path>/purejaxrl/<script>`` as a module (its ``make_train(config)`` is what we call)."""
    source = Path(path) / "purejaxrl" / script
    if not source.is_file():
        raise SystemExit(
            f"error: {source} not found; --peer-path must be a checkout of github.com/luchris429/purejaxrl"
        )
    try:
        import distrax  # noqa: F401
    except ImportError:
        raise SystemExit("error: PureJaxRL needs distrax: pip install distrax") from None
    _stub_missing("brax.envs.wrappers.training", {"EpisodeWrapper": None, "AutoResetWrapper": None})
    _stub_missing("brax.envs")
    _stub_missing("navix")
    sys.path.insert(0, str(source.parent))  # its own ``wrappers`` module
    try:
        spec = importlib.util.spec_from_file_location(f"purejaxrl_{source.stem}", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(source.parent))
    module.gymnax = types.SimpleNamespace(make=five_value_make)
    if script == "ppo_rnn.py":
        module.nn = old_flax_linen()
    if hasattr(module, "BraxGymnaxWrapper"):
        module.BraxGymnaxWrapper = GymnaxAsBrax
    return module
