"""PPO on an environment: the ``ppo`` task (``ppo_jax.rl.task.PPO``).

Modules, one idea each:

    config.py        PPOConfig: static fields and float32 traced leaves; validation
    presets.py       named base configs (mujoco, brax, xminigrid) and the one each env gets by default
    envs.py          SUITES, one table of environment suites (gymnax, Brax, XLand-MiniGrid, probes); make_env(name)
    brax_envs.py     Brax tasks as gymnax-style envs (truncation kept apart from termination)
    xminigrid_envs.py  XLand-MiniGrid's grid worlds as gymnax-style envs
    probe_envs.py    tiny envs with analytic values, for learning tests
    observation_masks.py  partially observed control: velocities hidden from the observation
    networks.py      ActorCritic: one parameter tree, discrete and continuous heads
    recurrent.py     RecurrentActorCritic: MLP torso, a GRU or LSTM reset at episode starts, the same heads
    build_network.py make_network(cfg): the feed-forward or the recurrent actor-critic of a config
    sequences.py     a recurrent policy's update on whole env sequences (minibatches of envs)
    normalization.py running observation statistics and reward scaling
    rollout.py       rollout(runner, ...) -> (runner, Transition[T, B])
    adaptation.py    the adaptive KL penalty and the adaptive clip range
    ppo_loss.py      the total PPO loss on a minibatch, vmapped per sample
    ppo_update.py    one PPO update of a rollout batch: minibatch epochs, then the exact KL
    train.py         train(cfg, key): the engine (jittable, vmappable)
    evaluate.py      fresh episodes with the final parameters
    task.py          PPO as a ``ppo_jax.task_contract.Task``: metric names, score, engine

It imports the shared root (``ppo_jax.*``), never ``ppo_jax.lm``.
``ppo_jax.rl.train.train`` is imported from its module (gymnax starts a JAX backend).
"""
