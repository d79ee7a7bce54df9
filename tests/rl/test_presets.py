"""Presets (``ppo_jax.rl.presets``): what a preset checks before anything compiles."""

from __future__ import annotations


def test_the_preset_checks_discrete_actions_without_compiling():
    # --preset mujoco on a discrete env is refused while the command line is validated: before anything compiles
    from jax import monitoring

    from ppo_jax.rl.envs import has_discrete_actions

    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, secs, **kw: compiles.append(name) if "backend_compile" in name else None
    )
    assert has_discrete_actions("CartPole-v1") and not has_discrete_actions("Pendulum-v1")
    assert has_discrete_actions("Probe-Memory") and not has_discrete_actions("Probe-ContinuousAction")
    assert compiles == []
