"""Sweep specs: a YAML file (or dict) -> a validated list of settings, before anything compiles.

A spec names a base config, the environments, the seeds and the axes::

    name: clip_eps                  # optional; description: is free text
    base: {total_timesteps: 500000} # PPOConfig fields fixed for every setting
    envs: [CartPole-v1, Acrobot-v1] # default: [base.env]
    env_base:                       # optional per-env fields, over base, under the axes
      Acrobot-v1: {num_envs: 8}
    seeds: 8                        # 8 -> seeds 0..7, or a list [0, 1, 5]
    grid:                           # Cartesian product (last axis varies fastest)
      clip_eps: [0.1, 0.2, 0.3]
    zip:                            # paired lists of equal length
      lr: [1e-3, 3e-4]
      ent_coef: [0.0, 0.01]
    random:                         # samples with a fixed sampling seed
      num_samples: 16
      seed: 0
      axes:
        vf_coef: {uniform: [0.25, 1.0]}
        max_grad_norm: {log_uniform: [0.1, 10]}
        num_minibatches: {choice: [2, 4, 8]}   # also int_uniform: [lo, hi] (inclusive)
    log_every: 1                    # one table row per this many updates (window means)

Settings are ``grid x zip x random`` (in that order, the last varying fastest);
each has a ``setting_id``, and runs on every env (outer) with every seed (inner).
Random axis ``f`` draws its ``num_samples`` values from
``np.random.default_rng([seed, zlib.crc32(f.encode())])``, so adding an axis does
not change the samples of the others.

A task with named presets (``Task.presets``: ``ppo``'s mujoco, ppo1, brax; ``lm``'s and ``rlhf``'s grpo,
dapo, gspo, ppo_rlhf, ...) takes ``preset`` as a field of ``base:`` (its fields set first, the other base
fields over them) and as an axis (``grid: {preset: [grpo, dapo, ppo_rlhf]}``: each value's fields over base,
the other axes over them); the table has a ``preset`` column, and presets that differ in a static field are
programs of their own.

A spec trains one task (``task: ppo``, the default, ``task: lm`` or ``task: rlhf``; see
``ppo_jax.task_registry``); ``base:`` and the axes take that task's config fields. Every
field may be an axis, except ``env`` (list environments under ``envs:``, which
only tasks with an environment field take; give env-specific fields under
``env_base:``). Traced leaves (lr, clip_eps, ...) vary inside one compiled
program; static fields (env, num_envs, hidden_sizes, ...) split the sweep into
one program per value.

A sweep never runs two settings that are the same run under different labels:
a grid whose settings differ only in fields the other fields switch off (say
``kl_beta`` with ``objective: clip``; see each config's ``inert_fields``) is
refused, naming the field and why; so is a grid axis that lists a value twice
(or two values that are one float32: 0.1 and 0.10000000001), a zip row given
twice, or a random block that draws the same setting twice, where it is written.
A sweep has at most ``MAX_RUNS`` runs (envs x settings x pretraining seeds x seeds).

What settings share (``Task.shared_fields``: RLHF's pretrained SFT and reward
models) is computed once per program from ``pretrain: {seed: 0}``, so the
fields that only shape it (sft_lr, rm_lr, demo_noise, ...) cannot be axes; with
``pretrain: {per_setting: true}`` every setting pretrains its own models (same
seed) and they can::

    task: rlhf
    pretrain: {seed: 0, per_setting: false}

``pretrain: {seeds: [0, 1, 2]}`` pretrains one SFT model (and reward model) per
pretraining seed and runs every setting x seed from each of them: the pretraining
seed is one more axis of the runs (the table's ``pretrain_seed`` column), so that
an interval over the runs can count the variance between SFT models
(``ppo_jax.final_values.hierarchical_ci``). ``seeds: [N]`` is ``seed: N``.

Floats follow YAML 1.2 (``1e-3`` is a number, not the string PyYAML makes of it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from ppo_jax.config_fields import MAX_RUNS, MAX_SEED, brief_int, ignored_because
from ppo_jax.errors import ConfigError, SpecError, close_matches
from ppo_jax.sweep.spec_axes import (
    ENV_NOT_AXIS,
    SpecContext,
    check_axis_name,
    configured,
    expand_grid,
    expand_random,
    expand_zip,
    mapping,
    validated,
)
from ppo_jax.sweep.spec_pretrain import pretrain_seeds
from ppo_jax.sweep.spec_values import column_value, short_float, shown
from ppo_jax.sweep.spec_yaml import Locator, key_text, parse_yaml
from ppo_jax.task_contract import Task
from ppo_jax.task_registry import DEFAULT_TASK, TASKS, get_task

TOP_KEYS = (
    "name",
    "description",
    "task",
    "base",
    "envs",
    "env_base",
    "seeds",
    "grid",
    "zip",
    "random",
    "pretrain",
    "log_every",
)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One (env, hyperparameter setting): ``values`` are the swept values, ``cfg`` the validated config."""

    setting_id: int
    env: str
    values: dict[str, Any]
    cfg: Any  # the task's config class


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A loaded spec. ``settings`` is env-major: ``len(envs) * num_combos`` entries."""

    name: str
    task: Task
    base: Any  # the task's config class
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    axes: tuple[str, ...]  # swept field names (table columns), env excluded
    settings: tuple[Setting, ...]
    log_every: int
    canonical: dict  # JSON-able normal form; two specs run the same sweep iff equal
    text: str | None = None  # the YAML source, if loaded from text
    pretrain_seed: int = 0  # key of Task.prepare_shared (tasks with shared_fields); the first of pretrain_seeds
    pretrain_per_setting: bool = False  # each setting prepares its own shared part
    pretrain_seeds: tuple[int, ...] = (0,)  # one pretrained model per entry, each running every setting x seed

    @property
    def num_runs(self) -> int:
        """envs x settings x pretraining seeds x seeds."""
        return len(self.settings) * len(self.pretrain_seeds) * len(self.seeds)

    @property
    def num_combos(self) -> int:
        return len(self.settings) // len(self.envs)


# ----------------------------------------------------------------------------- spec


def _seeds(raw, ctx: SpecContext) -> tuple[int, ...]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise ctx.error(("seeds",), f"seeds must be a positive count or a list of seeds, got {brief_int(raw)}.")
        if raw > MAX_RUNS:  # before listing them
            raise ctx.error(
                ("seeds",),
                f"seeds: {brief_int(raw)} is more seeds than a sweep runs ({MAX_RUNS:,} runs at most); give fewer.",
            )
        seeds = list(range(raw))
    elif isinstance(raw, list) and raw and all(isinstance(s, int) and not isinstance(s, bool) for s in raw):
        seeds = raw
    else:
        raise ctx.error(("seeds",), f"seeds must be a count (8) or a non-empty list of integers, got {shown(raw)}.")
    if len(set(seeds)) != len(seeds) or min(seeds) < 0 or max(seeds) > MAX_SEED:
        raise ctx.error(("seeds",), f"seeds must be distinct integers in [0, {MAX_SEED}], got {shown(seeds)}.")
    return tuple(seeds)


def _envs(raw, base, ctx: SpecContext, taken: dict, env_base=None) -> tuple[str, ...]:
    field = ctx.task.env_field
    if field is None:
        if raw is not None:
            raise ctx.error(
                ("envs",),
                f"task {ctx.task.name} has no environment to choose (it is its own: {ctx.task.env_id}); remove envs:.",
            )
        return (ctx.task.env_of(base),)
    if raw is None:
        return (ctx.task.env_of(base),)
    if field in taken:
        raise ctx.error(("envs",), f"{field} is already swept in {taken[field]}; list environments under envs: only.")
    if not isinstance(raw, list) or not raw or not all(isinstance(e, str) for e in raw) or len(set(raw)) != len(raw):
        raise ctx.error(("envs",), f"envs must be a non-empty list of distinct environment ids, got {shown(raw)}.")
    for i, env in enumerate(raw):
        if env not in (env_base or {}):  # those are validated with their env_base fields, setting by setting
            validated(ctx, ("envs", i), **{field: env})
    return tuple(raw)


def _env_base(raw, envs: tuple[str, ...], base, ctx: SpecContext, taken: dict) -> dict[str, dict]:
    """``env_base:`` -> {env: {field: value}}: fields applied over base for that env only, before the axes."""
    out = {}
    if raw is not None and ctx.task.env_field is None:
        raise ctx.error(("env_base",), f"task {ctx.task.name} has one environment; put its fields under base:.")
    for env, fields in mapping(raw, ctx, ("env_base",)).items():
        if env not in envs:
            raise ctx.error(("env_base", env), f"env_base names {env!r}, which is not under envs: {list(envs)}.")
        values = {}
        for name, value in mapping(fields, ctx, ("env_base", env)).items():
            check_axis_name(name, ctx, ("env_base", env, name), None)
            if name == ctx.task.env_field:
                raise ctx.error(("env_base", env, name), ENV_NOT_AXIS)
            if name in taken:
                raise ctx.error(
                    ("env_base", env, name), f"{name} is swept in {taken[name]}; it cannot also be fixed per env."
                )
            values[name] = ctx.coerce(name, value, ("env_base", env, name))
        try:
            ctx.task.validate(configured(ctx.task, base.replace(**{ctx.task.env_field: env}), values))
        except ConfigError as error:
            raise ctx.error(("env_base", env), f"{key_text(env)}: {error}") from None
        out[env] = values
    return out


def _base(raw, ctx: SpecContext):
    values = {}
    for name, value in mapping(raw, ctx, ("base",)).items():
        check_axis_name(name, ctx, ("base", name), None)
        values[name] = ctx.coerce(name, value, ("base", name))
    try:
        ctx.base = ctx.task.validate(configured(ctx.task, ctx.base, values))
    except ConfigError as error:  # point at the field the message starts with, if any
        name = next((k for k in values if str(error).startswith(k)), None)
        raise ctx.error(("base", name) if name else ("base",), str(error)) from None
    return ctx.base


def _task(raw, ctx: Locator) -> Task:
    if raw is None:
        return get_task(DEFAULT_TASK)
    if not isinstance(raw, str):
        raise ctx.error(("task",), f"task must be the name of a task ({', '.join(TASKS)}), got {shown(raw)}.")
    try:
        return get_task(raw)
    except ConfigError as error:
        raise ctx.error(("task",), str(error)) from None


def _describe(values: dict) -> str:
    return ", ".join(f"{k}={column_value(v)}" for k, v in values.items()) or "base"


def _check_distinct(
    settings: list[Setting], task: Task, ctx: SpecContext, path: tuple, where: dict | None = None
) -> None:
    """SpecError if two settings of one env would be the same run: equal in every field their switches use.

    The message names each swept field that differs between the two and why it changes nothing (or, should
    the two be identical, says so); it points at the first such field's axis (``where``: field -> key path).
    """
    seen: dict[tuple, Setting] = {}
    for setting in settings:
        inert = setting.cfg.inert_fields()
        values = setting.cfg.to_dict()
        key = (setting.env, tuple((k, json.dumps(v)) for k, v in values.items() if k not in inert))
        first = seen.setdefault(key, setting)
        if first is setting:
            continue
        differ = [k for k in setting.values if setting.values[k] != first.values.get(k)]
        reasons = (
            "; ".join(
                ignored_because(k, inert[k])
                if k in inert
                else f"{k} ({column_value(first.values[k])} and {column_value(setting.values[k])}) ends up the same in both configs"
                for k in differ
            )
            or "their swept values are identical (an axis value repeated, or two that are the same float32)"
        )
        raise ctx.error(
            (where or {}).get(differ[0], path) if differ else path,
            f"settings {first.setting_id} ({_describe(first.values)}) and {setting.setting_id} "
            f"({_describe(setting.values)}) on {setting.env} would train the same run under two labels: {reasons}. "
            "Drop the axis values that change nothing, or turn on the switch that uses them.",
        )


def from_dict(raw, *, filename: str = "<spec>", lines: dict | None = None, text: str | None = None) -> SweepSpec:
    """Validate and expand a spec given as a dict (see the module docstring); SpecError on any problem."""
    locator = Locator(filename, lines or {})
    if raw is None:
        raise locator.error(
            (), f"the spec is empty; give a mapping with keys among {TOP_KEYS} (see experiments/*.yaml)."
        )
    if not isinstance(raw, dict):
        raise locator.error((), f"a spec is a mapping with keys among {TOP_KEYS}, got {type(raw).__name__}.")
    task = _task(raw.get("task"), locator)
    ctx = SpecContext(filename, lines or {}, task)
    for key in raw:
        if key not in TOP_KEYS:
            hint = close_matches(key, TOP_KEYS) or (
                " Config fields go under base: or an axis." if key in ctx.fields else ""
            )
            raise ctx.error((key,), f"unknown spec key {key!r}.{hint} Expected one of {TOP_KEYS}.")
    model_seeds, per_setting = pretrain_seeds(raw.get("pretrain"), ctx)
    ctx.shared_fixed = bool(task.shared_fields) and not per_setting
    taken: dict[str, str] = {}
    base = _base(raw.get("base"), ctx)
    grid, grid_rows = expand_grid(raw.get("grid"), ctx, taken)
    zipped, zip_rows = expand_zip(raw.get("zip"), ctx, taken)
    random, random_rows = expand_random(raw.get("random"), ctx, taken)
    raw_env_base = raw.get("env_base")
    envs = _envs(raw.get("envs"), base, ctx, taken, raw_env_base if isinstance(raw_env_base, dict) else None)
    env_base = _env_base(raw.get("env_base"), envs, base, ctx, taken)
    seeds = _seeds(raw.get("seeds", 1), ctx)
    log_every = raw.get("log_every", 1)
    if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
        raise ctx.error(("log_every",), f"log_every must be a positive integer, got {shown(log_every)}.")
    if isinstance(raw.get("name"), (dict, list)):
        raise ctx.error(("name",), f"name is a label: give a string, got {shown(raw['name'])}.")
    name = str(raw.get("name") or (Path(filename).stem if text is not None else "sweep"))

    runs = len(envs) * len(grid_rows) * len(zip_rows) * len(random_rows) * len(seeds) * len(model_seeds)
    if runs > MAX_RUNS:
        models = f" x {len(model_seeds)} pretraining seed(s)" if len(model_seeds) > 1 else ""
        raise ctx.error(
            (),
            f"this sweep has {runs:,} runs ({len(envs)} env(s) x "
            f"{runs // len(envs) // len(seeds) // len(model_seeds):,} setting(s){models} x {len(seeds)} seed(s)), "
            f"more than {MAX_RUNS:,}: split it into several specs.",
        )
    combos = [{**g, **z, **r} for g in grid_rows for z in zip_rows for r in random_rows]
    path = ("grid",) if grid else ("zip",) if zipped else ("random",) if random else ()
    settings = []
    for env in envs:
        env_values = {task.env_field: env} if task.env_field else {}
        for setting_id, values in enumerate(combos):
            try:
                cfg = task.validate(configured(task, base.replace(**env_values), {**env_base.get(env, {}), **values}))
            except ConfigError as error:
                raise ctx.error(path, f"setting {setting_id} ({_describe(values)}) on {env}: {error}") from None
            settings.append(Setting(setting_id, env, values, cfg))
    if any(getattr(s.cfg, "mesh", "") for s in settings):  # LmConfig.mesh: one run over devices
        raise ctx.error(
            (),
            "mesh splits one run over devices (ppo-jax lm --mesh); a sweep already shards its (setting, seed) pairs "
            "over every device: drop mesh from the spec.",
        )
    where = {
        **{k: ("grid", k) for k in grid},
        **{k: ("zip", k) for k in zipped},
        **{k: ("random", "axes", k) for k in random.get("axes", {})},
    }
    _check_distinct(settings, task, ctx, path, where)
    most = max(task.num_updates(s.cfg) for s in settings)
    if log_every > most:
        raise ctx.error(
            ("log_every",),
            f"log_every={brief_int(log_every)} is more than the updates of any run "
            f"({most}); give at most {most} (one table row per run).",
        )

    axes = tuple(k for k in (*grid, *zipped, *random.get("axes", {})) if k != task.env_field)
    canonical = {  # name and description are labels: renaming a spec does not change the sweep
        "base": _plain(base.to_dict()),
        "envs": list(envs),
        "seeds": list(seeds),
        "grid": _plain(grid),
        "zip": _plain(zipped),
        "random": _plain(random),
        "log_every": log_every,
    }
    if task.name != DEFAULT_TASK:  # only when not the default, so that PPO specs keep their canonical form (--resume)
        canonical = {"task": task.name, **canonical}
    if task.shared_fields:  # one pretraining seed: the form of `seed: N`, so that such sweeps keep theirs (--resume)
        one = len(model_seeds) == 1
        canonical["pretrain"] = {"seed" if one else "seeds": model_seeds[0] if one else list(model_seeds)}
        canonical["pretrain"]["per_setting"] = per_setting
    if env_base:  # only when given, so that specs without it keep their canonical form (and --resume)
        canonical["env_base"] = _plain(env_base)
    return SweepSpec(
        name,
        task,
        base,
        envs,
        seeds,
        axes,
        tuple(settings),
        log_every,
        canonical,
        text,
        model_seeds[0],
        per_setting,
        model_seeds,
    )


def _plain(value):
    """Tuples -> lists and float32 leaves -> short floats, recursively (for JSON and comparison)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return short_float(value)
    return value


def load_spec(source) -> SweepSpec:
    """A SweepSpec from a YAML path, a dict or a SweepSpec (returned as is)."""
    if isinstance(source, SweepSpec):
        return source
    if isinstance(source, dict):
        return from_dict(source)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"cannot read spec {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise SpecError(
            f"{path}, line {line}: not UTF-8 text (byte {error.object[error.start]:#04x}); save the spec as UTF-8."
        ) from None
    data, lines = parse_yaml(text, str(path))
    return from_dict(data, filename=str(path), lines=lines, text=text)


def only_envs(spec: SweepSpec, envs) -> SweepSpec:
    """``spec`` restricted to ``envs``, a subset of its envs (``ppo-jax sweep --envs``): the same settings and seeds on fewer envs."""
    envs = [str(e) for e in envs]
    unknown = [e for e in envs if e not in spec.envs]
    if unknown or not envs:
        raise SpecError(
            f"--envs {','.join(map(key_text, unknown)) or '(none)'}: choose from the spec's envs: {', '.join(spec.envs)}."
        )
    raw = {k: v for k, v in spec.canonical.items() if v or k in ("seeds", "envs")}
    raw.update(name=spec.name, envs=[e for e in spec.envs if e in envs])
    if "env_base" in raw:
        raw["env_base"] = {e: v for e, v in raw["env_base"].items() if e in envs}
    return from_dict(raw, filename=f"{spec.name} (--envs {','.join(envs)})")
