"""Every field a spec may sweep changes what runs, or the spec refuses it (the bug: ``sft_lr`` gave identical runs).

For each task: every traced field, set to a second valid value, runs as one
setting of one vmapped program beside the base setting (same seed); its metrics
must differ from the base's unless a two-value spec over the field is refused —
and a refused, inert field (``inert_fields``) must truly leave the training
unchanged (loss and score equal). RLHF runs here pretrain per setting, as
``pretrain: {per_setting: true}`` does, so that its pretraining fields count;
with shared pretraining the spec refuses them. Every static field, set to a
second valid value, changes the traced program (its jaxpr: training and the
per-run evaluation), or is refused.
"""

from __future__ import annotations

import sys
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import sweep
from ppo_jax.config_fields import short_float
from ppo_jax.errors import ConfigError, SpecError
from ppo_jax.task_registry import TASKS

# Tiny runs with a large learning rate and two epochs, so that clipping and the other thresholds bite.
TINY = {
    "ppo": {
        "total_timesteps": 256,
        "num_envs": 2,
        "num_steps": 32,
        "num_minibatches": 2,
        "update_epochs": 2,
        "lr": 0.01,
    },
    "rlhf": {
        "num_updates": 3,
        "num_prompts": 8,
        "num_minibatches": 2,
        "update_epochs": 2,
        "hidden_dim": 8,
        "embed_dim": 8,
        "sft_steps": 4,
        "rm_steps": 4,
        "pretrain_batch": 8,
        "lr": 0.01,
        "group_size": 2,  # so that dynamic_sampling has a second valid value
        "clip_eps_low": 0.05,  # a narrow clip range, so that a wider one bites in 3 updates
        "clip_eps_high": 0.05,
        "sft_eval_every": 2,  # two SFT checks: the target accuracy decides whether the second half runs
        "sft_target_accuracy": 0.0,
    },
    "lm": {
        "digits": 1,
        "max_response_len": 6,
        "num_updates": 3,
        "num_prompts": 4,
        "group_size": 2,
        "num_minibatches": 2,
        "update_epochs": 2,
        "model_dim": 8,
        "num_heads": 2,
        "num_layers": 1,
        "sft_steps": 4,
        "sft_eval_every": 2,
        "sft_target_accuracy": 0.0,
        "pretrain_batch": 8,
        "eval_prompts": 4,
        "lr": 0.01,
        "clip_eps_low": 0.05,
        "clip_eps_high": 0.05,
        "format_reward": 1.0,  # an untrained model is never right: the format reward gives the groups variance
    },
}
OTHER_ENV = {"ppo": "Acrobot-v1", "lm": "sort"}
# str fields without a list of values: a second one
FREE_FORM = {  # str fields without a table: a second valid value (mesh data=1: one device)
    "lora_targets": ["q,v"],
    "sampler_dtype": ["bfloat16"],
    "mesh": ["data=1"],
    "param_dtype": ["bfloat16"],
    "compute_dtype": ["bfloat16"],
}
READOUTS = ("learning_rate",)  # metrics that only report a coefficient (as do those named like a config field)


def base_config(task):
    return task.validate(task.config_class(**TINY[task.name]))


def switch_tables(task) -> dict:
    """``{field: Registry}`` of the config's switch families (its module's ``SWITCH_TABLES``), if it has them."""
    tables = getattr(sys.modules[task.config_class.__module__], "SWITCH_TABLES", ())
    return {table.field: table for table in tables}


def second_value(task, cfg, name):
    """Another value of field ``name`` that the task accepts with ``cfg``, or None."""
    value = getattr(cfg, name)
    if name in task.traced_fields:
        v = float(value)
        candidates = [v * 0.01, v * 1.5, v + 0.1, 0.5, v + 1.0]  # far from the base: a threshold must bite in 3
        # updates; v + 1: a whole number (top_k)
    elif isinstance(value, bool):
        candidates = [not value]
    elif isinstance(value, int):
        candidates = [value * 2, value + 1, value - 1, value + 8]  # + 8: eval_samples 0 -> 8 (>= group_size)
    elif isinstance(value, tuple):
        candidates = [(32,), (16, 16)]
    elif name == task.env_field:
        candidates = [OTHER_ENV[task.name]]
    elif name in FREE_FORM:
        candidates = FREE_FORM[name]
    elif name in switch_tables(task):  # a str field that also takes other values (model: a name or a checkpoint)
        candidates = list(switch_tables(task)[name].names())
    else:
        candidates = list(typing.get_args(typing.get_type_hints(task.config_class)[name]))
    for candidate in candidates:
        if candidate == value:
            continue
        candidate = short_float(candidate) if name in task.traced_fields else candidate
        try:
            return task.validate(cfg.replace(**{name: candidate})) and candidate
        except ConfigError:
            continue
    return None


def refused(task, name, values, *, per_setting=False) -> bool:
    spec = {"task": task.name, "base": TINY[task.name], "grid": {name: list(values)}}
    if task.shared_fields:
        spec["pretrain"] = {"per_setting": per_setting}
    try:
        sweep.load_spec(spec)
    except SpecError:
        return True
    return False


EVALUATION_KNOBS = ("eval_temperature", "eval_top_k", "eval_top_p")
"""Traced fields that change only the final evaluation's draws, which the tiny runs here (all wrong) cannot show:
tests/lm/test_rollout_sampling.py shows each of them changes the evaluation."""


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_every_traced_field_changes_the_runs_or_is_refused(task_name):
    task = TASKS[task_name]
    base = base_config(task)
    names = [name for name in task.traced_fields if name not in EVALUATION_KNOBS]
    values = {name: second_value(task, base, name) for name in names}
    assert None not in values.values(), values
    cfgs = [base] + [base.replace(**{name: np.float32(values[name])}) for name in names]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *cfgs)

    def run(cfg):
        shared = task.prepare_shared(cfg, jax.random.key(0))  # per setting
        return task.train(cfg, jax.random.key(1), shared).metrics

    metrics = jax.device_get(jax.jit(jax.vmap(run))(stacked))
    inert = base.inert_fields()
    trained = [m for m in task.metric_names if m not in task.field_names and m not in READOUTS]
    for i, name in enumerate(names, start=1):
        changed = any(not np.array_equal(metrics[m][i], metrics[m][0], equal_nan=True) for m in trained)
        two_values = [float(getattr(base, name)), float(values[name])]
        if name in inert:
            assert refused(task, name, two_values, per_setting=True), f"{name} is inert ({inert[name]}) but not refused"
            for m in ("loss", task.score):  # inert means the training is the same
                np.testing.assert_array_equal(
                    metrics[m][i], metrics[m][0], err_msg=f"{name} is listed inert but changes {m}"
                )
        else:
            assert changed, f"{name}: {two_values} gave identical runs and the spec does not refuse it"
            assert not refused(task, name, two_values, per_setting=True)
        if name in task.shared_fields:
            assert refused(task, name, two_values), (
                f"{name} only shapes the shared pretraining: must be refused when shared"
            )


@pytest.mark.parametrize("task_name", ["lm", "ppo"])  # rlhf: the lm task's config class and engine, other defaults
def test_every_static_field_changes_the_program_or_is_refused(task_name):
    task = TASKS[task_name]
    base = base_config(task)
    key = jax.random.key(0)

    base_shared = jax.eval_shape(task.prepare_shared, base, key)

    def program(cfg) -> str:
        def train_and_evaluate(k, s):
            output = task.train(cfg, k, s)
            return output.metrics, task.evaluate(cfg, output, k, s)

        def trace(shared):
            return str(jax.make_jaxpr(train_and_evaluate)(key, shared))

        try:
            return trace(base_shared)  # most static fields leave the shared models' shapes alone
        except Exception:  # a model size changed (flax ScopeParamShapeError, TypeError, ...): other shared shapes
            return trace(jax.eval_shape(task.prepare_shared, cfg, key))

    reference = program(base)
    hints = typing.get_type_hints(task.config_class)
    for name in task.static_fields:
        if typing.get_origin(hints[name]) is typing.Literal and len(typing.get_args(hints[name])) == 1:
            continue  # a switch family of one built-in variant (control's advantage: gae): an extension point, no axis
        value = second_value(task, base, name)
        if value is None:  # a field of continuous actions (action_dist) on CartPole: on Pendulum; of the decoder family
            # (lora_rank) on the transformer: on the decoder
            elsewhere = {task.env_field: "Pendulum-v1"} if task.name == "ppo" else {"model": "decoder"}
            other = task.validate(base.replace(**elsewhere))
            value = second_value(task, other, name)
            assert value is not None, f"no second valid value for {name}"
            assert refused(task, name, [getattr(base, name), value])  # the base's spec cannot vary it
            assert program(other.replace(**{name: value})) != program(other), (
                f"{name}={value!r} does not change the program"
            )
            continue
        assert value is not None, f"no second valid value for {name}"
        if refused(task, name, [getattr(base, name), value]):
            continue
        assert program(base.replace(**{name: value})) != reference, f"{name}={value!r} does not change the program"
