"""Presets: the published recipes of RL for language models, by name (``ppo-jax lm --preset dapo``).

A preset sets the objective's switches and the numbers its paper gives; flags
given with it override them, and config.json holds every resulting value
(metadata.json's ``run`` records the preset's name). A preset leaves alone what
is about scale, not the method: the model, the task, the learning rate (the
papers' 1e-6 is for billions of parameters), the batch shape (GRPO sampled 64
responses per prompt, DAPO 16: set ``group_size``) and the number of updates.

| preset                | advantage            | ratio    | loss  | eps low/high | aggregation             | KL to the reference   | other |
|-----------------------|----------------------|----------|-------|--------------|-------------------------|-----------------------|-------|
| ppo_rlhf              | gae (critic)         | token    | clip  | 0.2 / 0.2    | token-mean              | k1 in the reward, 0.02 | whitened advantages, value clip 0.2, vf_coef 0.1, 4 epochs |
| grpo                  | grpo (z-score)       | token    | clip  | 0.2 / 0.2    | seq-mean-token-mean     | k3 in the loss, 0.04  | one epoch |
| drgrpo                | drgrpo (mean only)   | token    | clip  | 0.2 / 0.2    | seq-mean-token-sum-norm | none                  |       |
| dapo                  | grpo                 | token    | clip  | 0.2 / 0.28   | token-mean              | none                  | dynamic sampling, overlong buffer of a fifth of the length |
| gspo                  | grpo                 | sequence | clip  | 3e-4 / 4e-4  | seq-mean-token-mean     | none                  |       |
| cispo                 | grpo                 | token    | cispo | 1.0 / 0.28   | token-mean              | none                  | no lower bound on the weight |
| rloo                  | rloo                 | token    | pg    | -            | seq-mean-token-sum      | k1 in the reward, 0.05 |      |
| reinforce_pp          | reinforce_pp         | token    | clip  | 0.2 / 0.2    | token-mean              | k1 in the reward, 0.01 |      |
| reinforce_pp_baseline | reinforce_pp_baseline | token   | clip  | 0.2 / 0.2    | token-mean              | k2 in the loss, 0.01  |       |

Sources: ppo_rlhf: Ziegler et al. (2019) and their code (lm-human-preferences
``PpoHParams``: 4 epochs, clip 0.2, value clip 0.2, vf_coef 0.1, gamma 1, lambda
0.95, whitened advantages; the adaptive KL controller is ``kl_adaptive``),
Ouyang et al. (2022, InstructGPT; KL coefficient 0.02). grpo: Shao et al.
(2024, DeepSeekMath, sec. 4: beta 0.04, the k3 estimator in the loss, eq. 3's
per-sequence mean; the paper states no eps, 0.2 is PPO's default, Schulman et
al. 2017). DeepSeekMath makes "a single update following each exploration
stage"; the preset makes one epoch of ``num_minibatches`` steps (4 by default),
so set ``num_minibatches: 1`` for the paper's one step. drgrpo: Liu et al.
(2025, "Understanding R1-Zero-like training": no std division, a constant
normaliser, no KL). dapo: Yu et al. (2025: eps 0.2/0.28, token-mean, no KL,
dynamic sampling, a 4,096-token overlong buffer in 20,480; here a fifth of
max_response_len). gspo: Zheng et al. (2025: a sequence-level ratio, clip
3e-4/4e-4). cispo: MiniMax (2025, MiniMax-M1: "we did not impose a lower bound
on the IS weight" and tuned the upper one without publishing it; 0.28 is
Trinity-RFT's default for it). rloo: Ahmadian et al. (2024: REINFORCE of the
whole sequence with a leave-one-out baseline, the KL in the reward; 0.05 is
TRL's RLOOTrainer default, the paper does not fix one value). Its loss has no
ratio, so with ``num_minibatches`` > 1 every step after the first trains on
samples of an older policy without correction (3 of 4 by default): set
``num_minibatches: 1`` for the on-policy REINFORCE the paper describes. reinforce_pp and
reinforce_pp_baseline: Hu (2025, REINFORCE++; the coefficients are OpenRLHF's
defaults, ``init_kl_coef`` 0.01; the baseline variant uses its k2 KL loss).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ppo_jax.errors import ConfigError, close_matches
from ppo_jax.lm.config import LmConfig

_CRITIC_FREE = dict(norm_adv=False, update_epochs=1, dual_clip=False, cov_reg="none", ent_coef=0.0)

PRESETS: dict[str, dict | Callable[[LmConfig], dict]] = {
    "ppo_rlhf": dict(
        advantage="gae",
        norm_adv=True,
        ratio="token",
        policy_loss="clip",
        loss_agg="token-mean",
        kl_mode="reward",
        kl_estimator="k1",
        beta=0.02,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        clip_vloss=True,
        vf_clip_eps=0.2,
        vf_coef=0.1,
        gamma=1.0,
        gae_lambda=0.95,
        critic_lambda=0.95,
        update_epochs=4,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "grpo": dict(
        _CRITIC_FREE,
        advantage="grpo",
        ratio="token",
        policy_loss="clip",
        loss_agg="seq-mean-token-mean",
        kl_mode="loss",
        kl_estimator="k3",
        beta=0.04,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "drgrpo": dict(
        _CRITIC_FREE,
        advantage="drgrpo",
        ratio="token",
        policy_loss="clip",
        loss_agg="seq-mean-token-sum-norm",
        kl_mode="none",
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "dapo": lambda cfg: dict(
        _CRITIC_FREE,
        advantage="grpo",
        ratio="token",
        policy_loss="clip",
        loss_agg="token-mean",
        kl_mode="none",
        clip_eps_low=0.2,
        clip_eps_high=0.28,
        dynamic_sampling=True,
        overlong_buffer=max(1, response_len(cfg) // 5),
        overlong_coef=1.0,
    ),
    "gspo": dict(
        _CRITIC_FREE,
        advantage="grpo",
        ratio="sequence",
        policy_loss="clip",
        loss_agg="seq-mean-token-mean",
        kl_mode="none",
        clip_eps_low=3e-4,
        clip_eps_high=4e-4,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "cispo": dict(
        _CRITIC_FREE,
        advantage="grpo",
        ratio="token",
        policy_loss="cispo",
        loss_agg="token-mean",
        kl_mode="none",
        clip_eps_low=1.0,
        clip_eps_high=0.28,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "rloo": dict(
        _CRITIC_FREE,
        advantage="rloo",
        ratio="token",
        policy_loss="pg",
        loss_agg="seq-mean-token-sum",
        kl_mode="reward",
        kl_estimator="k1",
        beta=0.05,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "reinforce_pp": dict(
        _CRITIC_FREE,
        advantage="reinforce_pp",
        ratio="token",
        policy_loss="clip",
        loss_agg="token-mean",
        kl_mode="reward",
        kl_estimator="k1",
        beta=0.01,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
    "reinforce_pp_baseline": dict(
        _CRITIC_FREE,
        advantage="reinforce_pp_baseline",
        ratio="token",
        policy_loss="clip",
        loss_agg="token-mean",
        kl_mode="loss",
        kl_estimator="k2",
        beta=0.01,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        dynamic_sampling=False,
        overlong_buffer=0,
    ),
}
NONE = "none"
"""No preset: the config's own defaults (LmConfig's are grpo's, RlhfConfig's ppo_rlhf's on the copy task)."""
CHOICES = (*PRESETS, NONE)


def response_len(cfg: LmConfig) -> int:
    from ppo_jax.lm.problems import response_len as length

    return length(cfg)


def preset_values(name: str, cfg: LmConfig) -> dict:
    """The fields preset ``name`` sets, for base config ``cfg``; ConfigError naming the presets otherwise."""
    if name not in PRESETS:
        raise ConfigError(
            f"unknown preset {name!r}.{close_matches(name, CHOICES)} Known presets: {', '.join(CHOICES)}."
        )
    values = PRESETS[name]
    return dict(values(cfg) if callable(values) else values)


def apply_preset(name: str, cfg: LmConfig) -> LmConfig:
    """``cfg`` with preset ``name``'s fields set (``none``: unchanged)."""
    if name == NONE:
        return cfg
    return dataclasses.replace(cfg, **preset_values(name, cfg))
