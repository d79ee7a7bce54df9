"""Per-token advantages of sampled responses, and ``ESTIMATORS``, the table of every estimator (``cfg.advantage``).

The batch holds ``num_prompts`` prompts x ``G`` samples, contiguous: rows
``[i*G:(i+1)*G]`` answer prompt i. ``rewards [M, L]`` are per-token (the score on
the last response token, a KL-in-reward term, if any, on every token:
``ppo_jax.lm.rewards``); a response's return is ``R_i = sum_t r_{i,t}``. With the
group's mean ``mean_g`` and sample std ``std_g`` (ddof = 1, as ``torch.std`` in TRL and verl):

| estimator               | advantage of token t of response i                | reference                              |
|-------------------------|---------------------------------------------------|----------------------------------------|
| ``grpo``                  | (R_i - mean_g) / (std_g + eps)                    | Shao et al. 2024, sec. 4.1.2           |
| ``drgrpo``                | R_i - mean_g                                      | Liu et al. 2025 (Dr. GRPO)             |
| ``rloo``                  | R_i - mean of the other G - 1 returns             | Ahmadian et al. 2024; Kool et al. 2019 |
| ``grpo_passk``            | (R_max - R_2nd) / (std_g + eps) on the group's best response, else 0 | Tang et al. 2025, arXiv:2503.19595 |
| ``reinforce_pp``          | whiten(sum_{s >= t} r_{i,s})                      | Hu et al. 2025, arXiv:2501.03262       |
| ``reinforce_pp_baseline`` | whiten(R_i - mean_g)                              | Hu et al. 2025, arXiv:2501.03262       |
| ``gae``                   | GAE over the response tokens, critic V            | Schulman et al. 2016; Ziegler et al. 2019 |
| ``broadcast``             | sum_t gamma^t r_t - V(s_0) on every token         | critic baseline of the whole response  |

``whiten`` subtracts the mean and divides by (std + eps) over all response tokens
of the batch (population std; verl's ``masked_whiten`` uses the Bessel-corrected
variance and ``rsqrt(var + 1e-8)``). ``reinforce_pp`` needs no groups.

A group whose returns are all equal carries no signal (DAPO's dynamic sampling,
Yu et al. 2025, sec. 3.2, drops it): its ``R_i - mean_g`` is set to exactly 0, so
``grpo``, ``drgrpo`` and ``rloo`` give it advantage 0 (in floating point the mean
of equal numbers may differ from them by an ulp, which ``/ (0 + eps)`` would blow up).

The critic estimators end a response with a termination (scored, nothing
bootstrapped past it); their value targets are GAE returns with ``critic_lambda``
(VC-PPO, Yuan et al. 2025: 1.0 for the critic, 0.95 for the actor).

Every estimator has one signature, ``fn(rewards, mask, values, cfg) -> (advantages,
targets)``: ``values [M, L]`` is the critic's V(s_t) (None without a critic),
``targets`` the value targets (None without a critic), ``cfg`` supplies
``group_size`` (static) and the float leaves the entry ``reads``. A new estimator
is one ``ESTIMATORS.register(name, Estimator(...))``: the config's allowed values,
``uses_critic``, the inert fields, the CLI's choices and docs/switches.md follow.

Shapes: ``M = num_prompts * G`` rows, ``L`` response positions; ``mask [M, L]`` bool
marks response tokens, which alone enter every sum (``jnp.where``, so padding may
hold inf or NaN).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.gae import compute_gae
from ppo_jax.lm.rewards import last_index
from ppo_jax.lm.token_math import whiten
from ppo_jax.registry import Registry

CRITIC_FIELDS = ("vf_coef", "clip_vloss", "vf_clip_eps")
"""Fields the critic's value loss reads: part of every critic estimator's ``reads``."""


class Estimator(NamedTuple):
    fn: Callable
    """``fn(rewards [M, L], mask [M, L], values [M, L] | None, cfg) -> (advantages [M, L], targets [M, L] | None)``."""
    doc: str
    reference: str = ""
    needs_critic: bool = False
    """A critic is trained beside the actor (its values are passed in, its targets returned)."""
    needs_groups: bool = False
    """Compares the samples of one prompt: needs ``group_size >= 2``."""
    reads: tuple[str, ...] = ()
    """The config fields it reads (the other estimators' fields are inert under it)."""


def _by_group(returns: jax.Array, group_size: int) -> jax.Array:
    """``returns [M]`` -> ``[M // G, G]``, one prompt's samples per row."""
    if group_size < 2 or returns.shape[0] % group_size:
        raise ValueError(f"group_size {group_size} must be >= 2 and divide the batch of {returns.shape[0]} rows")
    return returns.reshape(-1, group_size)


def group_stats(returns: jax.Array, group_size: int) -> tuple[jax.Array, jax.Array]:
    """``(mean [M], std [M])`` of each row's group, broadcast back to its rows; std is the sample std (ddof = 1)."""
    grouped = _by_group(returns, group_size)
    mean, std = grouped.mean(-1), grouped.std(-1, ddof=1)
    return jnp.repeat(mean, group_size), jnp.repeat(std, group_size)


def zero_variance_groups(returns: jax.Array, group_size: int) -> jax.Array:
    """``bool [M]``: True on the rows of groups whose returns ``[M]`` are all equal."""
    grouped = _by_group(returns, group_size)
    return jnp.repeat(grouped.max(-1) == grouped.min(-1), group_size)


def sequence_returns(token_rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """``R [M]``: the sum of ``token_rewards [M, L]`` over each row's response tokens."""
    return jnp.where(mask, token_rewards, 0.0).sum(-1)


def returns_to_go(token_rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """``[M, L]``: ``sum_{s >= t} r_s`` over response tokens (gamma = 1), 0 on padding."""
    rewards = jnp.where(mask, token_rewards, 0.0)
    return jnp.where(mask, jnp.flip(jnp.cumsum(jnp.flip(rewards, -1), -1), -1), 0.0)


def centred_returns(token_rewards: jax.Array, mask: jax.Array, group_size: int) -> tuple[jax.Array, jax.Array]:
    """``(R_i - mean_g [M], std_g [M])``, the centred return exactly 0 in groups of equal returns."""
    returns = sequence_returns(token_rewards, mask)
    mean, std = group_stats(returns, group_size)
    return jnp.where(zero_variance_groups(returns, group_size), 0.0, returns - mean), std


def _on_tokens(sequence_advantage: jax.Array, mask: jax.Array) -> jax.Array:
    """``[M]`` -> ``[M, L]``: each row's advantage on its response tokens, 0 on padding."""
    return jnp.where(mask, sequence_advantage[:, None], 0.0)


def _grpo(rewards, mask, values, cfg):
    centred, std = centred_returns(rewards, mask, cfg.group_size)
    return _on_tokens(centred / (std + cfg.adv_eps), mask), None


def _drgrpo(rewards, mask, values, cfg):
    return _on_tokens(centred_returns(rewards, mask, cfg.group_size)[0], mask), None


def _rloo(rewards, mask, values, cfg):  # R_i - (G mean - R_i) / (G - 1) = G / (G - 1) (R_i - mean)
    centred = centred_returns(rewards, mask, cfg.group_size)[0]
    return _on_tokens(centred * cfg.group_size / (cfg.group_size - 1), mask), None


def _reinforce_pp(rewards, mask, values, cfg):
    return whiten(returns_to_go(rewards, mask), mask, cfg.adv_eps), None


def _reinforce_pp_baseline(rewards, mask, values, cfg):
    centred = centred_returns(rewards, mask, cfg.group_size)[0]
    return whiten(_on_tokens(centred, mask), mask, cfg.adv_eps), None


def _grpo_passk(rewards, mask, values, cfg):
    """Only each group's best response moves: (R_max - R_second) / (std_g + eps); the others get 0 (the first
    best among ties, where R_max - R_second is 0 anyway)."""
    grouped = _by_group(sequence_returns(rewards, mask), cfg.group_size)
    descending = -jnp.sort(-grouped, axis=-1)
    gap = (descending[:, 0] - descending[:, 1]) / (grouped.std(-1, ddof=1) + cfg.adv_eps)
    best = jnp.arange(cfg.group_size) == jnp.argmax(grouped, axis=-1)[:, None]
    return _on_tokens(jnp.where(best, gap[:, None], 0.0).reshape(-1), mask), None


def gae_targets(
    rewards: jax.Array, values: jax.Array, mask: jax.Array, *, gamma, gae_lambda
) -> tuple[jax.Array, jax.Array]:
    """``(advantages, value targets)`` ``[M, L]`` of GAE over response tokens (Schulman et al. 2016), 0 on padding.

    ``values [M, L]`` is V(s_t) before response token t; the last token and the
    padding after it end the episode (a termination). ``gamma``, ``gae_lambda`` may be traced.
    """
    values = jnp.where(mask, values, 0.0)
    next_values = jnp.concatenate([values[:, 1:], jnp.zeros_like(values[:, :1])], axis=1)
    ended = jnp.arange(mask.shape[-1]) >= last_index(mask)[:, None]  # the last token and the padding after it
    adv, targets = compute_gae(
        rewards.T, values.T, next_values.T, ended.T, ended.T, gamma=gamma, gae_lambda=gae_lambda
    )  # time-major [L, M] inside
    return jnp.where(mask, adv.T, 0.0), jnp.where(mask, targets.T, 0.0)


def _gae(rewards, mask, values, cfg):
    adv = gae_targets(rewards, values, mask, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda)[0]
    return adv, gae_targets(rewards, values, mask, gamma=cfg.gamma, gae_lambda=cfg.critic_lambda)[1]


def _broadcast(rewards, mask, values, cfg):
    discount = cfg.gamma ** jnp.arange(mask.shape[-1], dtype=jnp.float32)
    sequence_adv = (rewards * discount).sum(-1) - jnp.where(mask, values, 0.0)[:, 0]
    adv = jnp.where(mask, jnp.broadcast_to(sequence_adv[:, None], mask.shape), 0.0)
    return adv, gae_targets(rewards, values, mask, gamma=cfg.gamma, gae_lambda=cfg.critic_lambda)[1]


ESTIMATORS: Registry[Estimator] = Registry("advantage", "advantage estimator")
for _name, _estimator in {
    "grpo": Estimator(_grpo, "group z-score of the return", "Shao et al. 2024, sec. 4.1.2", False, True, ("adv_eps",)),
    "drgrpo": Estimator(_drgrpo, "return minus the group mean", "Liu et al. 2025 (Dr. GRPO)", False, True),
    "rloo": Estimator(_rloo, "return minus the mean of the group's others", "Ahmadian et al. 2024", False, True),
    "reinforce_pp": Estimator(
        _reinforce_pp, "batch-whitened return-to-go", "Hu et al. 2025, arXiv:2501.03262", reads=("adv_eps",)
    ),
    "reinforce_pp_baseline": Estimator(
        _reinforce_pp_baseline,
        "group-centred return, batch-whitened",
        "Hu et al. 2025, arXiv:2501.03262",
        False,
        True,
        ("adv_eps",),
    ),
    "grpo_passk": Estimator(
        _grpo_passk,
        "pass@k: the group's best response gets (R_max - R_second) / (std + eps), the rest 0",
        "Tang et al. 2025, arXiv:2503.19595 (verl grpo_passk)",
        False,
        True,
        ("adv_eps",),
    ),
    "gae": Estimator(
        _gae,
        "GAE with a critic (actor lambda gae_lambda, targets critic_lambda)",
        "Schulman et al. 2016; Ziegler et al. 2019",
        True,
        reads=("gamma", "gae_lambda", "critic_lambda", *CRITIC_FIELDS),
    ),
    "broadcast": Estimator(
        _broadcast,
        "discounted return minus the critic's V(prompt), on every token",
        "Ziegler et al. 2019 (sequence-level baseline)",
        True,
        reads=("gamma", "critic_lambda", *CRITIC_FIELDS),
    ),
}.items():
    ESTIMATORS.register(_name, _estimator)


def estimate(name: str, rewards: jax.Array, mask: jax.Array, values: jax.Array | None, cfg):
    """``(advantages [M, L], targets [M, L] | None)`` of estimator ``name`` (static): ``ESTIMATORS[name].fn``."""
    return ESTIMATORS[name].fn(rewards, mask, values, cfg)
