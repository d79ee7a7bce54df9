"""LmConfig: every setting of an RL run on a sequence task, as one frozen pytree; RlhfConfig, its RLHF defaults.

As ``ppo_jax.rl.config.PPOConfig`` (both build on ``ppo_jax.config_fields.ConfigBase``):
fields that set a shape or a Python branch are static (changing one compiles a new
program); every numeric hyperparameter is a float32 leaf, so ``jax.vmap(train)``
over stacked configs sweeps beta, clip_eps_low, ent_coef, lr, ... in one program.
The pretraining fields (``PRETRAIN_FIELDS``) only shape the SFT model and the
reward model, which a sweep shares between settings unless told otherwise.

``LmConfig``'s defaults are GRPO (Shao et al. 2024) on 3-digit addition with a
small transformer (task ``lm``); ``RlhfConfig`` is the same class with the
defaults of token-level PPO-RLHF on the copy task with a GRU (task ``rlhf``, as
before 0.3.0, so old run directories load into the run they were). The formula
behind every switch is in docs/guide/lm.md and in the module each switch selects.
"""

from __future__ import annotations

from flax import struct

from ppo_jax.config_fields import (
    ConfigBase,
    leaf,
    static,
)
from ppo_jax.lm.advantages import ESTIMATORS
from ppo_jax.lm.covariance_regularizers import COVARIANCE_REGULARIZERS
from ppo_jax.lm.kl_estimators import KL_ESTIMATORS, KL_MODES
from ppo_jax.lm.loss_aggregation import LOSS_AGGREGATIONS
from ppo_jax.lm.models import MODELS
from ppo_jax.lm.policy_objectives import POLICY_LOSSES, RATIOS
from ppo_jax.lm.problems import PROBLEMS
from ppo_jax.lm.reward_model import REWARD_MODELS
from ppo_jax.lm.rollout_correction import ROLLOUT_CORRECTIONS
from ppo_jax.lm.sampling import SamplingParams, sampling_params
from ppo_jax.lm.text_problems import TextProblem  # noqa: F401 - registers the text problems before PROBLEMS.literal()
from ppo_jax.schedules import Schedule

SWITCH_TABLES = (
    PROBLEMS,
    MODELS,
    REWARD_MODELS,
    ESTIMATORS,
    RATIOS,
    POLICY_LOSSES,
    LOSS_AGGREGATIONS,
    KL_MODES,
    KL_ESTIMATORS,
    COVARIANCE_REGULARIZERS,
    ROLLOUT_CORRECTIONS,
)
"""Every switch family of an LmConfig, each a ``ppo_jax.registry.Registry`` beside its formulas: the field's
allowed values, what each variant reads (the rest is inert), the validation messages and docs/switches.md
are derived from them."""

# The fields' annotations: the names registered when the package is imported (the CLI's choices).
Problem = PROBLEMS.literal()
RewardModel = REWARD_MODELS.literal()
Advantage = ESTIMATORS.literal()
Ratio = RATIOS.literal()
PolicyLoss = POLICY_LOSSES.literal()
LossAgg = LOSS_AGGREGATIONS.literal()
KlMode = KL_MODES.literal()
KlEstimator = KL_ESTIMATORS.literal()
CovReg = COVARIANCE_REGULARIZERS.literal()
RolloutIs = ROLLOUT_CORRECTIONS.literal()

PRETRAIN_FIELDS = (
    "sft_steps",
    "rm_steps",
    "pretrain_batch",
    "demo_noise",
    "sft_lr",
    "rm_lr",
    "bt_temperature",
    "sft_target_accuracy",
    "sft_eval_every",
)
"""Fields read only by pretraining (``ppo_jax.lm.train.pretrain``): SFT and the reward model."""

EVAL_SAMPLING_FIELDS = ("eval_samples", "eval_temperature", "eval_top_k", "eval_top_p")
"""How the final evaluation samples (``LmConfig.eval_sampling`` and the samples per prompt)."""


@struct.dataclass
class LmConfig(ConfigBase):
    """Configuration of one run: SFT warm start, (optionally) a reward model, then RL on sampled responses."""

    # ----- static: changing one compiles a new program -----
    problem: Problem = static("addition")
    """The task: a name in ``problems.PROBLEMS`` (docs/switches.md)."""
    digits: int = static(3)
    """addition: digits per operand; sort: digits in the list."""
    chain_len: int = static(4)
    """chain_sum: how many numbers of ``digits`` digits are summed (at least 2)."""
    scratchpad: bool = static(False)
    """addition/sort: a free scratchpad before an answer marker; only the answer after the marker is checked."""
    scratchpad_filler: int = static(0)
    """addition/sort with a scratchpad: demonstrations open it with 0..F random digits (uniform), so the SFT
    model's responses vary in length and RL may lengthen or shorten them (Dr. GRPO's length bias)."""
    countdown_numbers: int = static(3)
    """countdown: how many given numbers (digits 1..9) the prompt holds: 3 or 4 (much harder for small models)."""
    countdown_attempts: int = static(2)
    """countdown: demonstrations' scratchpads hold 0..this many failed attempts (uniform) before the answer."""
    chat_template: bool = static(False)
    """text problems: render each question through the checkpoint's chat template (else the question and a newline)."""
    vocab_size: int = static(10)
    """copy: tokens (PAD, EOS and vocab_size - 2 content tokens); the arithmetic tasks have their own vocabulary."""
    prompt_len: int = static(4)
    """copy: content tokens per prompt."""
    max_response_len: int = static(0)
    """Longest response, EOS included; 0: the longest demonstration + 2 (with scratchpad: twice the longest)."""
    model: str = static("transformer")
    """Policy (and critic, reward model): an architecture in ``models.MODELS`` (decoder, transformer, gru), or a
    Llama / Qwen checkpoint directory (config.json, safetensors) whose weights start SFT and RL."""
    model_dim: int = static(64)
    """transformer, decoder: width of the residual stream."""
    num_layers: int = static(2)
    """transformer, decoder: decoder blocks."""
    num_heads: int = static(4)
    """transformer, decoder: attention heads (divides model_dim)."""
    embed_dim: int = static(16)
    """gru: token embedding width."""
    hidden_dim: int = static(64)
    """gru: GRU width."""
    num_prompts: int = static(64)
    """Prompts per update."""
    group_size: int = static(8)
    """Responses sampled per prompt (G): an update trains on num_prompts x group_size sequences."""
    num_minibatches: int = static(4)
    """Minibatches per epoch; must divide num_prompts x group_size. Sequences are kept whole."""
    update_epochs: int = static(1)
    """Passes over each batch of sequences."""
    num_updates: int = static(200)
    """Updates (sample, score, advantages, epochs of minibatch steps)."""
    reward_model: RewardModel = static("programmatic")
    """Sequence score: a name in ``reward_model.REWARD_MODELS`` (the task's verifier, or a learned Bradley-Terry model)."""
    advantage: Advantage = static("grpo")
    """Advantage estimator: a name in ``advantages.ESTIMATORS`` (group statistics of the rewards, or a critic)."""
    norm_adv: bool = static(False)
    """Whiten advantages over the response tokens of each minibatch (PPO-RLHF)."""
    ratio: Ratio = static("token")
    """Importance ratio level: a name in ``policy_objectives.RATIOS`` (per token, or per sequence as GSPO)."""
    policy_loss: PolicyLoss = static("clip")
    """Policy loss: a name in ``policy_objectives.POLICY_LOSSES`` (PPO's clip, CISPO, REINFORCE, ...)."""
    dual_clip: bool = static(False)
    """Bound the objective of negative advantages below by dual_clip_c * A (Ye et al. 2020), where the loss clips."""
    loss_agg: LossAgg = static("seq-mean-token-mean")
    """How per-token losses become one number: a name in ``loss_aggregation.LOSS_AGGREGATIONS``."""
    kl_mode: KlMode = static("loss")
    """Where the KL to the reference goes: a name in ``kl_estimators.KL_MODES`` (the loss, the reward, nowhere)."""
    kl_estimator: KlEstimator = static("k3")
    """Sample estimator of KL(pi || pi_ref) (Schulman 2020): a name in ``kl_estimators.KL_ESTIMATORS``."""
    kl_adaptive: bool = static(False)
    """Adapt beta towards kl_target after every update (Ziegler et al. 2019); off: beta is fixed."""
    cov_reg: CovReg = static("none")
    """Entropy control of Cui et al. (2025): a name in ``covariance_regularizers.COVARIANCE_REGULARIZERS``."""
    cov_expected_count: bool = static(False)
    """clip_cov / kl_cov: pick floor(share x N + u) tokens, u ~ U[0, 1), so the mean count is share x N at any batch
    size (0 in most minibatches when it is below 1); off: floor(share x N) and at least 1, as the authors' code."""
    rollout_is: RolloutIs = static("none")
    """Correction of the sampler-trainer mismatch (sampler_dtype): a name in ``rollout_correction.ROLLOUT_CORRECTIONS``
    (none, token-level truncated importance sampling, sequence-level masking)."""
    dynamic_sampling: bool = static(False)
    """DAPO's dynamic sampling with fixed shapes: groups whose rewards are all equal are masked out of the loss."""
    overlong_buffer: int = static(0)
    """DAPO's soft overlong punishment over the last this many tokens of max_response_len; 0: off."""
    clip_vloss: bool = static(True)
    """Clip the value update to vf_clip_eps around the old value (critic advantages)."""
    lr_schedule: Schedule = static("constant")
    """Schedule of the RL learning rate: constant, or linear decay to 0."""
    sft_steps: int = static(3000)
    """Adam steps of supervised fine-tuning on demonstrations (the warm start and the reference)."""
    sft_eval_every: int = static(25)
    """SFT stops at the first check (every this many steps) whose sampled pass@1 reaches sft_target_accuracy."""
    rm_steps: int = static(2000)
    """Adam steps of reward-model training on preference pairs (a trained reward model)."""
    pretrain_batch: int = static(64)
    """Demonstrations or preference pairs per SFT / reward-model step."""
    eval_prompts: int = static(256)
    """Fresh prompts of the final evaluation (group_size samples each: pass@1 and pass@group_size)."""
    eval_samples: int = static(0)
    """Samples per evaluation prompt for the pass@k curve (k = 1, 2, 4, ... up to it; Yue et al. 2025 use 256);
    0: group_size. At least group_size."""
    mesh: str = static("")
    """Devices of one run: ``data=D,fsdp=F[,tensor=T]`` (their product the devices used): the batch split over data
    and fsdp, parameters, optimizer state and the reference split over fsdp (tensor: heads and MLP width), by the
    logical-axis rules of ``ppo_jax.lm.sharding``; "": one device. Metrics equal one device's to float tolerance."""
    remat: bool = static(False)
    """decoder / checkpoint models: recompute each layer's activations in the backward pass (``jax.checkpoint``)
    instead of storing them: less memory, the same gradients, more compute."""
    param_dtype: str = static("")
    """decoder / checkpoint models: dtype of the stored (master) weights, the ones the optimizer updates, float32 or
    bfloat16; "": float32 (also for a bfloat16 checkpoint: Adam on bfloat16 weights loses small updates)."""
    compute_dtype: str = static("")
    """decoder / checkpoint models: dtype of the matmuls and activations (float32 or bfloat16; logits and softmax
    stay float32); "": param_dtype. bfloat16 with float32 master weights is mixed-precision training."""
    sampler_dtype: str = static("")
    """decoder / checkpoint models: compute dtype of the rollout sampler (its log-probs are recorded beside the
    trainer's recomputed ones: the sampler-trainer mismatch); "": compute_dtype."""
    micro_batches: int = static(1)
    """Gradient accumulation: each minibatch's gradient is accumulated over this many micro-batches computed one
    after another (the same step to float rounding: the loss's denominators are the whole minibatch's; less
    activation memory); divides the minibatch's sequences; not with cov_reg or top_entropy_quantile < 1."""
    lora_rank: int = static(0)
    """decoder / checkpoint models: train low-rank adapters of this rank on lora_targets, the base frozen (Hu et al.
    2022); the reference is the base with the adapters off. 0: full fine-tuning. SFT always trains every weight (it
    builds the base); the critic is always a full model (``lora.py``)."""
    lora_targets: str = static("q,k,v,o,gate,up,down")
    """With lora_rank > 0: the projections given adapters, comma-separated among q, k, v, o, gate, up, down."""

    # ----- traced float32 leaves: vmappable, no recompilation -----
    lr: float = leaf(3e-4)
    """RL Adam learning rate (actor and critic)."""
    clip_eps_low: float = leaf(0.2)
    """Lower clip range: the ratio is clipped at 1 - clip_eps_low."""
    clip_eps_high: float = leaf(0.2)
    """Upper clip range: the ratio is clipped at 1 + clip_eps_high (DAPO's clip-higher: > clip_eps_low)."""
    dual_clip_c: float = leaf(3.0)
    """Dual-clip bound c > 1 (with dual_clip)."""
    beta: float = leaf(0.04)
    """KL coefficient (kl_mode loss or reward); the initial one with kl_adaptive."""
    kl_target: float = leaf(0.1)
    """kl_adaptive: the KL to the reference per sequence (nats) that beta is steered to."""
    kl_horizon: float = leaf(10000.0)
    """kl_adaptive: beta moves by at most a factor 1 +- 0.2 x (sequences per update) / kl_horizon per update."""
    ent_coef: float = leaf(0.0)
    """Entropy bonus coefficient (entropy per response token, aggregated as the policy loss)."""
    top_entropy_quantile: float = leaf(1.0)
    """Share of each minibatch's response tokens, those of highest entropy, that the policy term trains on (Wang
    et al. 2025 keep 0.2; TRL's top_entropy_quantile); 1: every token."""
    temperature: float = leaf(1.0)
    """Rollout sampling temperature (> 0). The loss's log-probabilities, the KL to the reference and the entropy
    are of the same tempered, truncated distribution the tokens were drawn from (``sampling.py``)."""
    top_k: float = leaf(0.0)
    """Rollout top-k: sample among the k most probable tokens (a whole number; 0: off)."""
    top_p: float = leaf(1.0)
    """Rollout nucleus sampling: the smallest set of most probable tokens whose probability reaches top_p (1: off)."""
    eval_temperature: float = leaf(1.0)
    """Final evaluation's sampling temperature; 0 is greedy (pass@k is then pass@1)."""
    eval_top_k: float = leaf(0.0)
    """Final evaluation's top-k (0: off)."""
    eval_top_p: float = leaf(1.0)
    """Final evaluation's top-p (1: off)."""
    lora_alpha: float = leaf(16.0)
    """With lora_rank > 0: the adapters' output is scaled by lora_alpha / lora_rank (Hu et al. 2022)."""
    clip_cov_fraction: float = leaf(2e-4)
    """clip_cov: share of response tokens whose gradient is detached."""
    clip_cov_low: float = leaf(1.0)
    """clip_cov: lower bound of the covariance of the tokens it may pick."""
    clip_cov_high: float = leaf(5.0)
    """clip_cov: upper bound of the covariance of the tokens it may pick."""
    kl_cov_fraction: float = leaf(2e-3)
    """kl_cov: share of response tokens (largest covariance) that get the penalty."""
    kl_cov_coef: float = leaf(1.0)
    """kl_cov: coefficient of |log pi - log pi_old| on the picked tokens."""
    rollout_is_threshold: float = leaf(2.0)
    """rollout_is token: the importance weight pi_old / pi_sampler is truncated at it; sequence: the upper bound of
    a kept response's prod_t pi_old / pi_sampler (verl's default 2)."""
    rollout_is_threshold_low: float = leaf(0.5)
    """rollout_is sequence: the lower bound of a kept response's prod_t pi_old / pi_sampler (verl: 1 / threshold)."""
    adv_eps: float = leaf(1e-6)
    """Added to the standard deviation that grpo and the reinforce_pp family divide by."""
    format_reward: float = leaf(0.0)
    """Reward for a well-formed response (ends with EOS; with scratchpad one answer marker), added to correctness."""
    overlong_coef: float = leaf(1.0)
    """Weight of the overlong punishment (with overlong_buffer > 0)."""
    vf_clip_eps: float = leaf(0.2)
    """Clip range of the value update (with clip_vloss)."""
    vf_coef: float = leaf(0.5)
    """Value loss coefficient (critic advantages)."""
    gamma: float = leaf(1.0)
    """Discount over response tokens (1: the usual choice for language models)."""
    gae_lambda: float = leaf(0.95)
    """GAE lambda of the actor's advantages (gae)."""
    critic_lambda: float = leaf(1.0)
    """GAE lambda of the critic's value targets (VC-PPO, Yuan et al. 2025: 1.0 while the actor's is 0.95)."""
    max_grad_norm: float = leaf(1.0)
    """Global gradient-norm clip; inf turns it off."""
    adam_eps: float = leaf(1e-8)
    """Adam epsilon of the RL optimizer."""
    demo_noise: float = leaf(0.0)
    """Probability that the demonstrator replaces a token of the intended response (SFT data)."""
    sft_lr: float = leaf(1e-3)
    """Adam learning rate of SFT."""
    sft_target_accuracy: float = leaf(0.3)
    """SFT stops at the first check whose sampled pass@1 reaches this (> 1: all sft_steps): the RL start."""
    rm_lr: float = leaf(3e-3)
    """Adam learning rate of the reward model."""
    bt_temperature: float = leaf(0.1)
    """Label noise of the synthetic preferences: P(a preferred to b) = sigmoid((score_a - score_b) / temperature)."""

    BRANCH_FIELDS = (
        "norm_adv",
        "ratio",
        "policy_loss",
        "dual_clip",
        "loss_agg",
        "kl_estimator",
        "kl_adaptive",
        "cov_reg",
        "cov_expected_count",
        "rollout_is",
        "dynamic_sampling",
        "clip_vloss",
        "lr_schedule",
    )
    """Static fields that choose a branch of the program, not the shapes of its arrays (``advantage`` and
    ``kl_mode`` may add a critic or a reference model's forward pass, so they are not here): groups of a sweep
    that differ only in these share one memory estimate (``ppo_jax.sweep.plan.shape_key``)."""

    LEGACY_FIELDS = {
        "anneal_lr": lambda value: {"lr_schedule": "linear" if value else "constant"},
        "clip_eps": lambda value: {"clip_eps_low": value, "clip_eps_high": value},
    }
    LEGACY_HINTS = {
        "anneal_lr": "anneal_lr became lr_schedule: write lr_schedule: linear (anneal_lr true) or constant (false)",
        "clip_eps": "clip_eps became clip_eps_low and clip_eps_high: give both the same value for a symmetric range",
    }

    @property
    def rollout_sampling(self) -> SamplingParams:
        """The knobs rollouts draw with, and whose distribution the loss scores."""
        return sampling_params(self.temperature, self.top_k, self.top_p)

    @property
    def eval_sampling(self) -> SamplingParams:
        """The knobs of the final evaluation's samples."""
        return sampling_params(self.eval_temperature, self.eval_top_k, self.eval_top_p)

    @property
    def num_sequences(self) -> int:
        """Sequences per update: num_prompts x group_size."""
        return self.num_prompts * self.group_size

    @property
    def minibatch_size(self) -> int:
        return self.num_sequences // self.num_minibatches

    @property
    def uses_critic(self) -> bool:
        estimator = ESTIMATORS.get(self.advantage)
        return estimator is not None and estimator.needs_critic

    def inert_fields(self) -> dict[str, str]:
        """Fields whose value this config's switches ignore, with why (a sweep and the CLI refuse them).

        Derived from the switch tables: a field some variant of a family reads is inert
        under the others; then the rules inside one variant (value clipping off, a fixed beta, ...).
        """
        inert = {}
        for table in SWITCH_TABLES:
            inert.update(table.inert(getattr(self, table.field)))
        problem = PROBLEMS.get(self.problem)
        if problem is not None:
            inert.update(problem.inert(self))
        if self.uses_critic and not self.clip_vloss:
            inert["vf_clip_eps"] = "value clipping is off (clip_vloss: false)"
        if not (self.dual_clip and "dual_clip" in getattr(POLICY_LOSSES.get(self.policy_loss), "reads", ())):
            inert["dual_clip_c"] = "dual clipping is off (dual_clip: false, or a policy_loss without a dual clip)"
        if not (self.kl_adaptive and "kl_adaptive" in getattr(KL_MODES.get(self.kl_mode), "reads", ())):
            inert.update(dict.fromkeys(("kl_target", "kl_horizon"), "beta is fixed (kl_adaptive: false)"))
        if self.overlong_buffer == 0:
            inert["overlong_coef"] = "the overlong punishment is off (overlong_buffer: 0)"
        if self.eval_prompts == 0:
            inert.update(dict.fromkeys(EVAL_SAMPLING_FIELDS, "there is no final evaluation (eval_prompts: 0)"))
        if self.lora_rank == 0:
            inert.update(dict.fromkeys(("lora_alpha", "lora_targets"), "LoRA is off (lora_rank: 0)"))
        if self.sft_steps == 0:
            reason = "there is no SFT (sft_steps: 0)"
            inert.update(dict.fromkeys(("sft_lr", "demo_noise", "sft_target_accuracy", "sft_eval_every"), reason))
            if not getattr(REWARD_MODELS.get(self.reward_model), "trained", False):
                inert["pretrain_batch"] = f"nothing is pretrained (sft_steps: 0, reward_model: {self.reward_model})"
        return inert


@struct.dataclass
class RlhfConfig(LmConfig):
    """Token-level PPO-RLHF on the copy task (Ziegler et al. 2019; Ouyang et al. 2022): LmConfig with these defaults."""

    problem: Problem = static("copy")
    max_response_len: int = static(6)
    model: str = static("gru")
    group_size: int = static(1)
    update_epochs: int = static(4)
    num_updates: int = static(100)
    reward_model: RewardModel = static("learned")
    advantage: Advantage = static("gae")
    norm_adv: bool = static(True)
    loss_agg: LossAgg = static("token-mean")
    kl_mode: KlMode = static("reward")
    kl_estimator: KlEstimator = static("k1")
    sft_steps: int = static(2000)
    lr: float = leaf(1e-3)
    beta: float = leaf(0.05)
    critic_lambda: float = leaf(0.95)
    adam_eps: float = leaf(1e-5)
    demo_noise: float = leaf(0.3)
    sft_lr: float = leaf(3e-3)
    sft_target_accuracy: float = leaf(2.0)

    def inert_fields(self) -> dict[str, str]:
        why = "the rlhf task has no final evaluation (ppo-jax lm has)"
        return {**super().inert_fields(), **dict.fromkeys(("eval_prompts", *EVAL_SAMPLING_FIELDS), why)}

    @classmethod
    def from_dict(cls, values: dict):
        """As ``LmConfig.from_dict``; a directory written before 0.3.0 (no critic_lambda) had one lambda for both."""
        values = dict(values)
        if "critic_lambda" not in values and "gae_lambda" in values:
            values["critic_lambda"] = values["gae_lambda"]
        return super().from_dict(values)
