"""Brax tasks (``brax/halfcheetah``, ...) behind the gymnax interface, with our own time limit and auto-reset.

``BraxEnv`` wraps a raw Brax environment (no Brax wrappers) so that it looks
like a gymnax 1.0 env to the rollout and the evaluation::

    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)

Brax's own training wrappers are not used, because they lose what PPO needs
to bootstrap a time limit: ``EpisodeWrapper`` folds the limit into ``done``
(marking it only in ``info["truncation"]``) and ``AutoResetWrapper``
overwrites the final observation with the reset one, and resets every episode
to the *same* cached initial state. Here:

* ``terminated`` is the task's own ``done`` (Hopper fell, the pendulum tipped
  over); ``truncated`` is the time limit (``episode_length`` steps, 1000 as in
  Brax's and Gym's MuJoCo tasks) reached without termination;
* ``info["final_observation"]`` is the observation the step produced, so
  V(final observation) bootstraps a truncated episode exactly as for gymnax;
* an ended episode restarts from ``reset(key)`` with the step's fresh key: each
  episode a new initial state, as in gymnax and Gym.

Brax is an optional extra (``pip install "ppo-jax[brax]"``); this module
imports it on first use.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

PREFIX = "brax/"
TASKS = (
    "ant",
    "halfcheetah",
    "hopper",
    "humanoid",
    "humanoidstandup",
    "inverted_double_pendulum",
    "inverted_pendulum",
    "pusher",
    "reacher",
    "swimmer",
    "walker2d",
)
"""The Brax locomotion and control tasks offered as ``brax/<task>`` (Brax 0.14's registry minus its test env ``fast``)."""
BACKENDS = ("spring", "positional", "generalized", "mjx")
DEFAULT_BACKEND = "spring"
"""The fastest physics pipeline measured on a 2-core CPU (docs/benchmarks/brax.md)."""
SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
"""Seen needed for mjx with 1024 envs on a 2-core CPU (jax 0.10.2): without it the program hung, using no CPU."""
EPISODE_LENGTH = 1000


def brax_env_names() -> list[str]:
    return [PREFIX + task for task in TASKS]


def import_brax_envs():
    """``brax.envs``, imported without the line MuJoCo prints when its optional Warp backend is absent."""
    with contextlib.redirect_stdout(io.StringIO()):
        from brax import envs
    return envs


def available() -> bool:
    """Whether the ``[brax]`` extra is installed."""
    try:
        import_brax_envs()
    except ImportError:
        return False
    return True


def scheduler_warning(cfg) -> str | None:
    """The warning for mjx on the CPU without ``SCHEDULER_FLAG`` (the suite's ``warning``), else None."""
    if cfg.brax_backend != "mjx" or jax.default_backend() != "cpu" or SCHEDULER_FLAG in os.environ.get("XLA_FLAGS", ""):
        return None
    return (
        f"{cfg.env} on backend mjx on the CPU: XLA's CPU scheduler was seen to hang with 1024 envs "
        f"(2 cores, jax 0.10.2); if it does, rerun with XLA_FLAGS={SCHEDULER_FLAG}"
    )


@struct.dataclass
class BraxParams:
    """The env's parameters, all static (the gymnax ``params`` argument): its time limit."""

    max_steps_in_episode: int = struct.field(pytree_node=False, default=EPISODE_LENGTH)


class BraxState(NamedTuple):
    """A Brax ``State`` and the steps taken in the current episode (int32)."""

    brax: Any
    steps: jax.Array


class BraxEnv:
    """A raw Brax env as a gymnax-style env: explicit keys, six-value ``step``, truncation apart from termination."""

    def __init__(self, env, name: str):
        self.env = env
        self.name = name
        self.default_params = BraxParams()

    @functools.cached_property
    def obs_dim(self) -> int:
        """The observation's length, from the shape of a traced reset (Brax's ``observation_size`` runs one
        eagerly, compiling every op of it: seconds per task, paid by every spec that names the task)."""
        reset = jax.eval_shape(self.env.reset, jax.ShapeDtypeStruct((2,), jnp.uint32))
        return int(reset.obs.shape[-1])

    @property
    def action_dim(self) -> int:
        return int(self.env.action_size)

    def reset(self, key: jax.Array, params: BraxParams) -> tuple[jax.Array, BraxState]:
        state = self.env.reset(key)
        return state.obs, BraxState(state, jnp.int32(0))

    def step(self, key: jax.Array, state: BraxState, action: jax.Array, params: BraxParams):
        """One step; where the episode ended, the returned obs and state are a fresh reset from ``key``."""
        stepped = self.env.step(state.brax, action)
        steps = state.steps + 1
        terminated = stepped.done > 0.5
        truncated = jnp.logical_and(steps >= params.max_steps_in_episode, ~terminated)
        done = jnp.logical_or(terminated, truncated)
        reset_obs, reset_state = self.reset(key, params)
        next_state = jax.tree.map(
            lambda fresh, cont: jnp.where(done, fresh, cont), reset_state, BraxState(stepped, steps)
        )
        obs = jnp.where(done, reset_obs, stepped.obs)
        return obs, next_state, stepped.reward, terminated, truncated, {"final_observation": stepped.obs}


@functools.cache
def make_brax_env(name: str, backend: str = DEFAULT_BACKEND) -> BraxEnv:
    """``BraxEnv`` of ``brax/<task>`` on physics ``backend`` (cached). Raises ImportError without the extra
    (``ppo_jax.rl.envs.check_env`` says how to install it first)."""
    envs = import_brax_envs()
    import mujoco

    task = name[len(PREFIX) :]
    previous = mujoco.get_mju_user_warning()
    # MuJoCo's default warning handler appends to MUJOCO_LOG.TXT in the working directory; Brax's own model
    # files trigger deprecation warnings that are none of the user's business: keep them in Python's log.
    mujoco.set_mju_user_warning(lambda message: logging.getLogger(__name__).debug("MuJoCo: %s", message))
    try:
        # Cached: its arrays must be concrete even when the first call is inside a trace (jit(init)), or they
        # would leak as tracers into every later use.
        with warnings.catch_warnings(), jax.ensure_compile_time_eval():
            warnings.filterwarnings("ignore", message="Brax System, piplines and environments are not actively")
            env = envs.get_environment(task, backend=backend)
    except ValueError as error:  # e.g. swimmer: only the generalized pipeline
        raise NotImplementedError(f"{error} Choose another --brax-backend among {', '.join(BACKENDS)}.") from None
    finally:
        mujoco.set_mju_user_warning(previous)
    return BraxEnv(env, name)
