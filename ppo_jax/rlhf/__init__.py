"""Token-level PPO for sequence generation: the RLHF setting, small enough to sweep on a laptop.

Four models, as in Ziegler et al. (2019), Stiennon et al. (2020) and Ouyang et al.
(2022): an **actor** (the policy, trained), a **critic** (a value per response
token), a frozen **reward model** (a sequence-level score: a transparent
programmatic scorer, or a small network trained here with the Bradley-Terry loss)
and a frozen **reference** (the policy after supervised fine-tuning on
demonstrations). The reward of response token t is ``-beta * (log pi(a_t) -
log pi_ref(a_t))``, plus the sequence score on the last response token; GAE
assigns the credit; the PPO ratio is per token and only response tokens enter
the loss.

Modules, one idea each:

    copy_task.py     the toy sequence task: prompts, targets, demonstrations, masks
    models.py        a small GRU language model (actor, reference), critic and scorer
    reward_model.py  the programmatic scorer and the Bradley-Terry reward model
    sft.py           supervised warm start (SFT) on demonstrations: the reference
    rewards.py       per-token KL reward, score placement, advantages over response tokens
    token_loss.py    the per-token PPO loss, masked to response tokens
    config.py        RlhfConfig: static fields and float32 traced leaves; validation
    train.py         pretrain(cfg, key) and train(cfg, key, pretrained): jittable, vmappable; the engine
    task.py          RLHF as a ``ppo_jax.task_contract.Task``: metric names, score, shared pretraining

Run it with ``ppo-jax rlhf`` (``ppo_jax.cli.train``), sweep it with ``ppo-jax sweep``
(``task: rlhf``), report it with ``ppo-jax report``: the same code as PPO.
``ppo_jax.rlhf.train.train`` is imported from its module (this package exports no names).
"""
