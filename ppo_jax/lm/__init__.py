"""RL for language models at a scale where seeds are cheap: SFT, then PPO, GRPO and their relatives, every choice a switch.

A small causal decoder (a tiny Llama-family member, the GPT-2-style transformer or a GRU) is fine-tuned on demonstrations of a task
(SFT; the frozen copy is the reference), then trained by RL on its own samples:
``group_size`` responses to each prompt, scored by the task's verifier (n-digit
addition, sorting, the copy task) or by a learned Bradley-Terry reward model,
turned into per-token advantages by a critic (PPO-RLHF: Ziegler et al. 2019;
Ouyang et al. 2022) or by group statistics (GRPO and the DeepSeek-R1 line), and
minimised with the chosen ratio, clip, aggregation and KL. Two tasks share the
engine: ``lm`` (LmConfig, ``ppo-jax lm``) and ``rlhf`` (RlhfConfig: PPO-RLHF on
the copy task with a GRU, as before 0.3.0, ``ppo-jax rlhf``). docs/guide/lm.md gives
the formula of every switch and its name in verl and TRL.

Modules, one idea each:

    config.py          LmConfig (and RlhfConfig, its RLHF defaults): static fields and float32 leaves
    validation.py      validate(cfg): every bad input as a ConfigError with its fix
    presets.py         the published recipes by name (grpo, dapo, gspo, cispo, rloo, ...)
    vocabulary.py      the tokens of the arithmetic tasks
    addition_task.py   n-digit addition (reversed digits), optional carry scratchpad
    sort_task.py       sorting a digit list, optional counting scratchpad
    countdown_vocabulary.py the tokens of Countdown (digits, + - * /, step, attempt and answer markers)
    countdown_task.py  Countdown (TinyZero): solvable prompts, every step sequence, search-trace demonstrations
    countdown_verifier.py Countdown's in-graph checker: the steps parsed, their arithmetic and number use checked
    tokens.py          PAD, EOS and the masks of EOS-terminated responses, shared by every problem
    token_math.py      masked means, whitening, token log-probs, explained variance
    copy_task.py       the RLHF toy: copy the prompt, then stop
    problems.py        PROBLEMS: the table of tasks (sizes, prompts, demonstrations, verify, checks)
    verifier.py        answer extraction, correctness, format reward, DAPO's overlong punishment
    decoder_config.py  DecoderConfig and FAMILIES (llama, qwen2, qwen3): config.json in both transformers formats
    rope.py            ROPE_TYPES: rotary embeddings (default, linear, Llama 3 scaling)
    decoder.py         the Llama / Qwen decoder over a parameter pytree, KV-cache decoding of left-padded batches
    sampling.py        temperature, top-k, top-p; the log-probs of the distribution tokens were drawn from
    hf_tensors.py      Hugging Face tensor names and safetensors files (sharded or not)
    text_tokenizer.py  tokenizer.json, special tokens and the chat template, without transformers
    checkpoints.py     load_checkpoint(path) and save_checkpoint(path, ck): Hugging Face checkpoint directories
    transformer.py     the GPT-2-style causal decoder of the published lab results
    gru.py             the GRU model
    models.py          MODELS: the architectures; the run's models (policy, scalar) and their interface
    sft.py             supervised warm start, stopped at a target sampled accuracy
    pass_rates.py      sampled pass@1 and unbiased pass@k
    reward_model.py    REWARD_MODELS: programmatic or the Bradley-Terry reward model on synthetic preferences
    rewards.py         per-token KL reward and score placement
    advantages.py      ESTIMATORS: GRPO, Dr. GRPO, RLOO, REINFORCE++ (and its group baseline), critic GAE, broadcast
    kl_estimators.py   KL_MODES (loss, reward, none) and KL_ESTIMATORS (k1, k2, k3; Schulman 2020)
    policy_objectives.py POLICY_LOSSES (clip with eps_low / eps_high and dual clip, CISPO, REINFORCE) and RATIOS
    loss_aggregation.py LOSS_AGGREGATIONS: token-mean, seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm
    covariance_regularizers.py COVARIANCE_REGULARIZERS: Clip-Cov and KL-Cov (Cui et al. 2025)
    token_loss.py      the minibatch loss from those pieces
    train.py           pretrain(cfg, key) and train(cfg, key, pretrained): jittable, vmappable; the engine
    task.py            the lm and rlhf ``Task`` records: metric names, score, shared pretraining

Sweep with ``ppo-jax sweep`` (``task: lm`` or ``task: rlhf``) and report with
``ppo-jax report``: the same machinery as PPO. ``ppo_jax.lm.train.train`` is
imported from its module (this package exports no names).
"""
