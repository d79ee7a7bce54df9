"""PPOConfig: every setting of a PPO run, as one frozen pytree, and its validation.

Fields that set a shape or a Python branch are static (``pytree_node=False``):
changing them compiles a new program. Every numeric hyperparameter a sweep may
vary is a float32 leaf: ``jax.vmap(train)(stacked_cfgs, keys)`` trains many
settings in one program, and two values of a leaf share one compilation. Which
fields are which is read off the dataclass (``ppo_jax.config_fields``).
"""

from __future__ import annotations

from typing import Literal

from flax import struct

from ppo_jax.config_fields import (
    MAX_INT32,
    ConfigBase,
    brief_int,
    check_choice,
    check_leaf_shapes,
    check_positive_ints,
    check_range,
    leaf,
    static,
)
from ppo_jax.errors import ConfigError
from ppo_jax.losses import OBJECTIVES
from ppo_jax.rl import brax_envs
from ppo_jax.rl.advantages import ADVANTAGES
from ppo_jax.schedules import SCHEDULES, Schedule

Activation = Literal["tanh", "relu", "gelu", "silu"]
ActionDist = Literal["gaussian", "tanh_gaussian"]
PolicyStd = Literal["parameter", "state"]
KernelInit = Literal["orthogonal", "lecun_uniform"]
Network = Literal["mlp", "gru", "lstm"]
NETWORKS = ("mlp", "gru", "lstm")
BraxBackend = Literal["spring", "positional", "generalized", "mjx"]
Objective = OBJECTIVES.literal()
Advantage = ADVANTAGES.literal()
ACTIVATIONS = ("tanh", "relu", "gelu", "silu")
ACTION_DISTS = ("gaussian", "tanh_gaussian")
POLICY_STDS = ("parameter", "state")
KERNEL_INITS = ("orthogonal", "lecun_uniform")


@struct.dataclass
class PPOConfig(ConfigBase):
    """Configuration of one PPO training run (defaults: CleanRL's ppo.py / Huang et al. 2022)."""

    # ----- static: changing one compiles a new program -----
    env: str = static("CartPole-v1")
    """Environment id, of any suite in ppo_jax.rl.envs.SUITES (`ppo-jax envs` lists them): a gymnax id (e.g. CartPole-v1, Pendulum-v1, Breakout-MinAtar), a Brax task (brax/halfcheetah; needs the [brax] extra) or a ppo_jax probe env."""
    brax_backend: BraxBackend = static("spring")
    """Physics pipeline of a Brax task (spring is the fastest on CPU, docs/benchmarks/brax.md; mjx on a CPU may need XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=false); ignored by other envs."""
    total_timesteps: int = static(500_000)
    """Environment steps per training run (summed over the parallel envs)."""
    num_envs: int = static(4)
    """Parallel environments per training run."""
    num_steps: int = static(128)
    """Steps per environment in each rollout; one update consumes num_envs*num_steps transitions."""
    num_minibatches: int = static(4)
    """Minibatches per epoch; must divide num_envs*num_steps."""
    update_epochs: int = static(4)
    """Passes over each rollout batch."""
    hidden_sizes: tuple[int, ...] = static((64, 64))
    """Widths of the hidden layers of the actor and of the critic MLP."""
    activation: Activation = static("tanh")
    """Hidden-layer activation."""
    shared_torso: bool = static(False)
    """Actor and critic share their hidden layers (default: two separate MLPs)."""
    critic_hidden_sizes: tuple[int, ...] = static(())
    """Widths of the critic's hidden layers when they differ from the actor's (empty: hidden_sizes)."""
    head_hidden_sizes: tuple[int, ...] = static(())
    """Widths of hidden layers each head (policy, value) has of its own after the torso, and after the recurrent layer with network gru/lstm (empty: linear heads; PureJaxRL's ppo_rnn.py: (128,) after a shared torso)."""
    action_dist: ActionDist = static("gaussian")
    """Continuous actions: gaussian (PPO paper; clipped at the env, stored unclipped) or tanh_gaussian (Brax PPO; tanh-squashed onto the bounds)."""
    policy_std: PolicyStd = static("parameter")
    """Continuous actions: the Gaussian's std is a state-independent parameter (PPO paper) or an actor output, softplus + 0.001 (state; Brax PPO)."""
    kernel_init: KernelInit = static("orthogonal")
    """Weight init: orthogonal with gains sqrt 2 / 0.01 policy / 1 value (Huang et al. 2022) or lecun_uniform on every layer (Brax)."""
    network: Network = static("mlp")
    """Policy and value networks: mlp (feed-forward), gru or lstm (an MLP torso, then a GRU or an LSTM whose state is reset at every episode start; minibatches are whole env sequences, so num_minibatches must divide num_envs)."""
    rnn_hidden_size: int = static(128)
    """Width of the recurrent layer's state (network: gru or lstm)."""
    mask_velocity: bool = static(False)
    """Hide the velocities from the observation (CartPole-v1: x and theta only; Pendulum-v1: cos and sin; Acrobot-v1: the four angle terms; MountainCar: position): the partially observed benchmarks of recurrent policies."""
    lr_schedule: Schedule = static("linear")
    """Schedule of the learning rate over the run: linear decay to 0 (CleanRL's anneal_lr), or constant."""
    norm_adv: bool = static(True)
    """Normalize advantages to zero mean, unit std in each minibatch."""
    clip_vloss: bool = static(True)
    """Clip the value update to vf_clip_eps around the old value (pessimistic max of the two losses)."""
    normalize_obs: bool = static(False)
    """Normalize observations by a running mean/var (one set per run), clipped to +-obs_clip."""
    normalize_reward: bool = static(False)
    """Scale rewards by the running std of the discounted return, clipped to +-reward_clip."""
    advantage: Advantage = static("gae")
    """Advantage estimator: a name in ``ppo_jax.rl.advantages.ADVANTAGES`` (docs/switches.md)."""
    objective: Objective = static("clip")
    """Policy objective: a name in ``ppo_jax.losses.OBJECTIVES`` (PPO's clip and what the PPO paper compares it with)."""
    clip_schedule: Schedule = static("constant")
    """Schedule of clip_eps over the run: constant, or linear decay to 0."""
    ent_schedule: Schedule = static("constant")
    """Schedule of ent_coef over the run: constant, or linear decay to 0."""
    adaptive_clip: bool = static(False)
    """Adapt clip_eps after each update to keep the KL near clip_kl_target (x/÷ 1.5, within [0.01, 0.5])."""
    early_stop_kl: bool = static(False)
    """Skip the rest of an update's minibatch steps once a minibatch's approx KL exceeds target_kl."""

    # ----- traced float32 leaves: vmappable, no recompilation -----
    lr: float = leaf(2.5e-4)
    """Adam learning rate (its initial value under lr_schedule linear)."""
    clip_eps: float = leaf(0.2)
    """Clip range epsilon of the surrogate objective: r is clipped to [1-eps, 1+eps]."""
    vf_clip_eps: float = leaf(0.2)
    """Clip range of the value update when clip_vloss."""
    ent_coef: float = leaf(0.01)
    """Entropy bonus coefficient c2."""
    vf_coef: float = leaf(0.5)
    """Value loss coefficient c1."""
    gamma: float = leaf(0.99)
    """Discount factor, in [0, 1]."""
    gae_lambda: float = leaf(0.95)
    """GAE lambda, in [0, 1]: 0 is one-step TD, 1 is Monte Carlo."""
    max_grad_norm: float = leaf(0.5)
    """Global gradient-norm clip; inf turns clipping off."""
    adam_eps: float = leaf(1e-5)
    """Adam epsilon."""
    obs_clip: float = leaf(10.0)
    """Clip of normalized observations (with normalize_obs)."""
    reward_clip: float = leaf(10.0)
    """Clip of scaled rewards (with normalize_reward)."""
    reward_scale: float = leaf(1.0)
    """Constant factor on the rewards PPO learns from (Brax PPO's reward_scaling), applied before normalize_reward; returns are reported unscaled."""
    kl_beta: float = leaf(1.0)
    """KL penalty coefficient beta (kl_fixed), or its initial value (kl_adaptive)."""
    kl_target: float = leaf(0.01)
    """d_targ of kl_adaptive: beta halves when KL < d_targ/1.5 and doubles when KL > 1.5 d_targ."""
    dual_clip_c: float = leaf(3.0)
    """Lower bound c*A of the dual-clip objective for A < 0 (c > 1)."""
    target_kl: float = leaf(0.02)
    """KL threshold of early_stop_kl."""
    clip_kl_target: float = leaf(0.01)
    """KL target of adaptive_clip."""

    BRANCH_FIELDS = (
        "activation",
        "kernel_init",
        "lr_schedule",
        "norm_adv",
        "clip_vloss",
        "normalize_obs",
        "normalize_reward",
        "advantage",
        "objective",
        "clip_schedule",
        "ent_schedule",
        "adaptive_clip",
        "early_stop_kl",
    )
    """Static fields that choose a branch of the program, not the shapes of its arrays: groups of a sweep that
    differ only in these share one memory estimate (``ppo_jax.sweep.plan.shape_key``)."""

    LEGACY_FIELDS = {  # older run and sweep directories
        "progress": lambda value: {},  # a display switch, now the on_update callback
        "anneal_lr": lambda value: {"lr_schedule": "linear" if value else "constant"},
    }
    LEGACY_HINTS = {
        "progress": "progress is not a config field any more: it is the --progress/--no-progress flag of ppo-jax "
        "train (a sweep shows one bar over its chunks)",
        "anneal_lr": "anneal_lr became lr_schedule: write lr_schedule: linear (anneal_lr true) or constant (false)",
    }

    # ----- derived sizes -----
    @property
    def batch_size(self) -> int:
        """Transitions per update: num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def recurrent(self) -> bool:
        """A GRU or LSTM policy (``network``), trained on whole env sequences."""
        return self.network in ("gru", "lstm")

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        """Number of rollout+update iterations: total_timesteps // batch_size."""
        return self.total_timesteps // self.batch_size

    def inert_fields(self) -> dict[str, str]:
        """Fields whose value this config's switches ignore, with why (a sweep refuses them as axes)."""
        from ppo_jax.rl.envs import inert_env_fields  # gymnax: imported on first use (see ppo_jax.task_contract)

        inert = inert_env_fields(self.env)  # what the env's suite does not read (brax_backend off Brax)
        if not self.clip_vloss:
            inert["vf_clip_eps"] = "value clipping is off (clip_vloss: false)"
        if not self.normalize_obs:
            inert["obs_clip"] = "observation normalization is off (normalize_obs: false)"
        if not self.normalize_reward:
            inert["reward_clip"] = "reward scaling is off (normalize_reward: false)"
        inert.update(ADVANTAGES.inert(self.advantage))
        inert.update(OBJECTIVES.inert(self.objective))
        if not self.early_stop_kl:
            inert["target_kl"] = "early stopping is off (early_stop_kl: false)"
        if not self.adaptive_clip:
            inert["clip_kl_target"] = "adaptive clipping is off (adaptive_clip: false)"
        if not self.recurrent:
            inert["rnn_hidden_size"] = f"network {self.network} is feed-forward (use network: gru or lstm)"
        return inert


def _widths(sizes) -> str:
    if isinstance(sizes, tuple) and all(isinstance(h, int) for h in sizes):
        return "(" + ", ".join(brief_int(h) for h in sizes) + ")"
    return repr(sizes)


def validate(cfg: PPOConfig) -> PPOConfig:
    """Check every field; return cfg unchanged or raise ConfigError.

    Static fields are always checked. Traced leaves are checked where they are
    concrete (under jit they are tracers, and the caller validated them before).
    """
    from ppo_jax.rl.envs import check_env  # gymnax: imported on first use (see ppo_jax.task_contract)

    check_env(cfg.env)  # unknown (close matches), or its suite not installed (the install hint)
    check_choice("brax_backend", cfg.brax_backend, brax_envs.BACKENDS)
    check_choice("action_dist", cfg.action_dist, ACTION_DISTS)
    check_choice("policy_std", cfg.policy_std, POLICY_STDS)
    check_choice("kernel_init", cfg.kernel_init, KERNEL_INITS)
    check_positive_ints(
        cfg,
        ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"),
        host_only=("total_timesteps",),
    )
    if cfg.batch_size > MAX_INT32:
        raise ConfigError(
            f"the batch (num_envs*num_steps = {cfg.num_envs}*{cfg.num_steps} = {cfg.batch_size}) "
            f"must be at most {MAX_INT32} transitions (32-bit); shrink num_envs or num_steps."
        )
    if cfg.batch_size % cfg.num_minibatches:
        divisors = [d for d in range(1, min(cfg.batch_size, 64) + 1) if cfg.batch_size % d == 0]
        raise ConfigError(
            f"the batch (num_envs*num_steps = {cfg.num_envs}*{cfg.num_steps} = {cfg.batch_size}) "
            f"does not split into num_minibatches={cfg.num_minibatches} equal minibatches. "
            f"Choose num_minibatches among {divisors} or change num_envs/num_steps."
        )
    if cfg.total_timesteps < cfg.batch_size:
        raise ConfigError(
            f"total_timesteps={cfg.total_timesteps} is smaller than one batch "
            f"(num_envs*num_steps = {cfg.batch_size}); raise total_timesteps or shrink the batch."
        )
    if cfg.num_updates > MAX_INT32:
        raise ConfigError(
            f"total_timesteps={cfg.total_timesteps} makes {cfg.num_updates} updates of {cfg.batch_size} "
            f"transitions, more than {MAX_INT32} (the 32-bit update counter); lower total_timesteps."
        )
    if (
        not isinstance(cfg.hidden_sizes, tuple)
        or not cfg.hidden_sizes
        or any(not isinstance(h, int) or isinstance(h, bool) or not 0 < h <= MAX_INT32 for h in cfg.hidden_sizes)
    ):
        raise ConfigError(
            f"hidden_sizes must be one or more positive integers (at most {MAX_INT32}), "
            f"got {_widths(cfg.hidden_sizes)}."
        )
    for name in ("critic_hidden_sizes", "head_hidden_sizes"):  # may be empty
        sizes = getattr(cfg, name)
        if not isinstance(sizes, tuple) or any(
            not isinstance(h, int) or isinstance(h, bool) or not 0 < h <= MAX_INT32 for h in sizes
        ):
            raise ConfigError(f"{name} must be positive integers (at most {MAX_INT32}) or empty, got {_widths(sizes)}.")
    if cfg.shared_torso and cfg.critic_hidden_sizes:
        raise ConfigError(
            "critic_hidden_sizes gives the critic its own torso: it excludes shared_torso. Drop one of them."
        )
    check_choice("activation", cfg.activation, ACTIVATIONS)
    check_choice("network", cfg.network, NETWORKS)
    if cfg.recurrent:
        check_positive_ints(cfg, ("rnn_hidden_size",))
        if cfg.num_envs % cfg.num_minibatches:
            divisors = [d for d in range(1, cfg.num_envs + 1) if cfg.num_envs % d == 0][:16]
            raise ConfigError(
                f"network {cfg.network} trains on whole env sequences, so its minibatches are sets of envs: "
                f"num_minibatches={cfg.num_minibatches} must divide num_envs={cfg.num_envs}. "
                f"Choose num_minibatches among {divisors} or change num_envs."
            )
    if not isinstance(cfg.mask_velocity, bool):
        raise ConfigError(f"mask_velocity must be true or false, got {cfg.mask_velocity!r}.")
    if cfg.mask_velocity:
        from ppo_jax.rl.observation_masks import VELOCITY_FREE

        if cfg.env not in VELOCITY_FREE:
            raise ConfigError(
                f"mask_velocity: {cfg.env} has no velocity mask; it is defined for {', '.join(VELOCITY_FREE)}."
            )
    ADVANTAGES.check(cfg.advantage)
    OBJECTIVES.check(cfg.objective)
    for name in ("lr_schedule", "clip_schedule", "ent_schedule"):
        check_choice(name, getattr(cfg, name), SCHEDULES)

    check_range("lr", cfg.lr, low=0, low_open=True, hint=" A typical value is 2.5e-4.")
    check_range("clip_eps", cfg.clip_eps, low=0, low_open=True, hint=" A typical value is 0.2.")
    check_range(
        "vf_clip_eps", cfg.vf_clip_eps, low=0, low_open=True, hint=" Use --no-clip-vloss to turn value clipping off."
    )
    check_range("ent_coef", cfg.ent_coef, low=0)
    check_range("vf_coef", cfg.vf_coef, low=0)
    check_range("gamma", cfg.gamma, low=0, high=1)
    check_range("gae_lambda", cfg.gae_lambda, low=0, high=1)
    check_range(
        "max_grad_norm", cfg.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" Use inf to turn clipping off."
    )
    check_range("adam_eps", cfg.adam_eps, low=0, low_open=True)
    check_range("obs_clip", cfg.obs_clip, low=0, low_open=True, allow_inf=True)
    check_range("reward_clip", cfg.reward_clip, low=0, low_open=True, allow_inf=True)
    check_range("reward_scale", cfg.reward_scale, low=0, low_open=True, hint=" 1 leaves the rewards as they are.")
    check_range("kl_beta", cfg.kl_beta, low=0)
    check_range("kl_target", cfg.kl_target, low=0, low_open=True)
    check_range(
        "dual_clip_c", cfg.dual_clip_c, low=1, low_open=True, hint=" Dual-clip needs c > 1 (Ye et al. 2020 use 3)."
    )
    check_range("target_kl", cfg.target_kl, low=0, low_open=True)
    check_range("clip_kl_target", cfg.clip_kl_target, low=0, low_open=True)
    check_leaf_shapes(cfg)
    return cfg
