"""Environments behind one small interface, one ``Suite`` per environment suite in the ``SUITES`` table.

Built in: gymnax (>= 1.0) ids, Brax tasks (``brax/<task>``) and the ppo_jax probe envs; code outside the package
adds a suite with ``SUITES.register(name, Suite(...))`` (tests/rl/test_outside_suite.py). Everything that
depends on the suite of an env (how to build it, its default preset, which config fields it reads, what it
needs installed) is asked of the table, never of the id's spelling. gymnax, a requirement, is imported with this
module (which starts a JAX backend: config and presets import it on first use, see ``ppo_jax.task_contract``);
every other suite's module on first use (Brax is an optional extra).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from ppo_jax.errors import ConfigError, close_matches
from ppo_jax.registry import Registry


class EnvSpec(NamedTuple):
    """A built environment and what the agent needs to know about it.

    ``obs_dim`` is the size of the flattened observation; ``action_dim`` is the
    number of discrete actions or the size of the continuous action vector.
    """

    env: Any
    params: Any
    obs_dim: int
    discrete: bool
    action_dim: int
    action_low: np.ndarray | None
    action_high: np.ndarray | None


def _installed() -> bool:
    return True


def _no_warning(cfg) -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class Suite:
    """One environment suite: the ids it owns, how to build one of its envs, and what it needs."""

    names: Callable[[], Sequence[str]]
    """Every id it offers, in order (``ppo-jax envs``, close matches of a misspelt id)."""
    make: Callable[[str, str | None, bool], EnvSpec]
    """``make(name, backend, mask_velocity)``: env ``name`` built (``backend`` is None unless it ``reads`` brax_backend)."""
    discrete: Callable[[str], bool]
    """Whether env ``name`` has discrete actions, answered without compiling (a preset asks while flags are parsed)."""
    prefix: str = ""
    """Ids ``prefix + task`` are its own, installed or not (so a missing extra gives its install hint); "": ``names()``."""
    available: Callable[[], bool] = _installed
    """Whether what it needs is installed (checked before anything compiles)."""
    install_hint: str = ""
    """What to install when ``available()`` is False."""
    default_preset: str = "none"
    """The preset ``ppo-jax train --env <id>`` starts from without ``--preset`` (``ppo_jax.rl.presets``)."""
    reads: tuple[str, ...] = ()
    """PPOConfig fields only some suites read: inert for the envs of every suite that does not read them."""
    warning: Callable[[Any], str | None] = _no_warning
    """A warning about config ``cfg`` on this suite before it compiles, or None."""
    doc: str = ""
    reference: str = ""

    def owns(self, name) -> bool:
        """Whether env id ``name`` is this suite's (by prefix where it has one, else by ``names()``)."""
        if not isinstance(name, str):
            return False
        return name.startswith(self.prefix) if self.prefix else name in self.names()


SUITES: Registry[Suite] = Registry("suite", "environment suite")


def suite_of(name) -> Suite | None:
    """The suite that owns env id ``name`` (prefixed suites asked first: no import), or None."""
    suites = [suite for _, suite in SUITES.items()]
    return next((s for s in sorted(suites, key=lambda s: not s.prefix) if s.owns(name)), None)


def known_env_names() -> list[str]:
    """Every id ``--env`` accepts, suite by suite (a suite's ids are listed whether or not it is installed)."""
    return [name for _, suite in SUITES.items() for name in suite.names()]


def check_env(name) -> Suite:
    """The suite of env id ``name``; ConfigError if no suite offers it or its suite is not installed."""
    suite = suite_of(name)
    if suite is not None and not suite.available():
        raise ConfigError(f"{name}: {suite.install_hint}.")
    if suite is None or name not in suite.names():
        raise ConfigError(
            f"unknown environment {name!r}.{close_matches(str(name), known_env_names())} "
            "Run `ppo-jax envs` to list all environment ids."
        )
    return suite


def inert_env_fields(name: str) -> dict[str, str]:
    """``{field: why}``: the config fields some suite reads and the suite of env ``name`` does not."""
    inert = {}
    for field in SUITES.read_by_any():
        readers = [(suite_name, s) for suite_name, s in SUITES.items() if field in s.reads]
        if not any(s.owns(name) for _, s in readers):
            inert[field] = f"{name} is not a {' or '.join(suite_name for suite_name, _ in readers)} env"
    return inert


def env_spec(cfg) -> EnvSpec:
    """The environment of a PPOConfig: ``cfg.env`` (on ``cfg.brax_backend`` where its suite reads it; velocities
    hidden with ``cfg.mask_velocity``)."""
    suite = suite_of(cfg.env)
    backend = cfg.brax_backend if suite is not None and "brax_backend" in suite.reads else None
    return make_env(cfg.env, backend, cfg.mask_velocity)


@functools.cache
def has_discrete_actions(name: str) -> bool:
    """Whether env ``name`` has discrete actions, read off its action space alone: unlike ``make_env`` (whose
    observation space builds JAX arrays, a compile), this runs no JAX program, so a preset can check it while
    the command line is still being validated."""
    return check_env(name).discrete(name)


@functools.cache
def make_env(name: str, backend: str | None = None, mask_velocity: bool = False) -> EnvSpec:
    """Build environment ``name`` with its default parameters (cached: static per name, backend and mask).

    ``backend``: the physics pipeline of a Brax task (default ``brax_envs.DEFAULT_BACKEND``); None otherwise.
    ``mask_velocity``: observations without velocities (``ppo_jax.rl.observation_masks``).
    """
    return check_env(name).make(name, backend, mask_velocity)


def discrete_action_space(env, params) -> bool:
    """Whether a gymnax-style env has a ``Discrete`` action space (no JAX program run)."""
    return isinstance(env.action_space(params if params is not None else env.default_params), spaces.Discrete)


def gymnax_style_spec(name: str, env, params, mask_velocity: bool = False) -> EnvSpec:
    """``EnvSpec`` of a gymnax-style env (``reset(key, params)``, six-value ``step``, gymnax action spaces)."""
    from ppo_jax.rl.observation_masks import VELOCITY_FREE, VelocityMasked

    # The shape alone, traced: gymnax builds a space's bounds from jnp arrays, a compile each (not while a command
    # line is validated).
    obs_shape = jax.eval_shape(lambda: jnp.zeros(env.observation_space(params).shape)).shape
    if mask_velocity:
        env = VelocityMasked(env, name)
        obs_shape = (*obs_shape[:-1], len(VELOCITY_FREE[name]))
    action_space = env.action_space(params)
    if isinstance(action_space, spaces.Discrete):
        return EnvSpec(env, params, int(np.prod(obs_shape)), True, int(action_space.n), None, None)
    if isinstance(action_space, spaces.Box):
        shape = action_space.shape or (1,)
        low = np.broadcast_to(np.asarray(action_space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(action_space.high, np.float32), shape).copy()
        return EnvSpec(env, params, int(np.prod(obs_shape)), False, int(np.prod(shape)), low, high)
    raise NotImplementedError(f"{name}: action space {type(action_space).__name__} is not supported")


# ----- the built-in suites: each module imported on first use -----


def _brax():
    from ppo_jax.rl import brax_envs

    return brax_envs


def _probes():
    from ppo_jax.rl.probe_envs import PROBE_ENVS

    return PROBE_ENVS


def _xminigrid():
    from ppo_jax.rl import xminigrid_envs

    return xminigrid_envs


def _make_brax(name: str, backend: str | None, mask_velocity: bool) -> EnvSpec:
    env = _brax().make_brax_env(name, backend or _brax().DEFAULT_BACKEND)
    bound = np.ones((env.action_dim,), np.float32)  # Brax actions lie in [-1, 1]^A
    return EnvSpec(env, env.default_params, env.obs_dim, False, env.action_dim, -bound, bound)


def _make_xminigrid(name: str, backend: str | None, mask_velocity: bool) -> EnvSpec:
    env = _xminigrid().make(name)
    return gymnax_style_spec(name, env, env.default_params, mask_velocity)


def _make_probe(name: str, backend: str | None, mask_velocity: bool) -> EnvSpec:
    env = _probes()[name]()
    return gymnax_style_spec(name, env, env.default_params, mask_velocity)


SUITES.register(
    "gymnax",
    Suite(
        names=lambda: list(gymnax.registered_envs),
        make=lambda name, backend, mask: gymnax_style_spec(name, *gymnax.make(name), mask),
        discrete=lambda name: discrete_action_space(*gymnax.make(name)),
        doc="classic control, bsuite, MinAtar and misc envs in JAX",
        reference="Lange 2022, gymnax",
    ),
)
SUITES.register(
    "brax",
    Suite(
        names=lambda: _brax().brax_env_names(),
        make=_make_brax,
        discrete=lambda name: False,
        prefix="brax/",
        available=lambda: _brax().available(),
        install_hint='Brax tasks need the optional extra: pip install "ppo-jax[brax]"',
        default_preset="mujoco",
        reads=("brax_backend",),
        warning=lambda cfg: _brax().scheduler_warning(cfg),
        doc="MuJoCo-style locomotion and control tasks on Brax's physics pipelines",
        reference="Freeman et al. 2021, Brax",
    ),
)
SUITES.register(
    "probe",
    Suite(
        names=lambda: list(_probes()),
        make=_make_probe,
        discrete=lambda name: discrete_action_space(_probes()[name](), None),
        doc="one-question envs with analytic answers (ppo_jax.rl.probe_envs)",
        reference='Jones 2021, "Debugging RL, Without the Agonizing Pain"',
    ),
)
SUITES.register(
    "xminigrid",
    Suite(
        names=lambda: _xminigrid().names(),
        make=_make_xminigrid,
        discrete=lambda name: True,
        prefix="xminigrid/",
        available=lambda: _xminigrid().available(),
        install_hint='XLand-MiniGrid tasks need the optional extra: pip install "ppo-jax[xminigrid]"',
        doc="MiniGrid's grid-world tasks in JAX (egocentric 7x7 symbolic view, 6 discrete actions)",
        reference="Nikulin et al. 2024, XLand-MiniGrid",
    ),
)
