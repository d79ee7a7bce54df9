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

Every PPOConfig field may be an axis except ``progress``, and ``env`` (list
environments under ``envs:``; give env-specific fields under ``env_base:``) (a host-side display
switch, not a hyperparameter: a sweep shows one bar over chunks instead).
Traced leaves (lr, clip_eps, ...) vary inside one compiled program; static fields
(env, num_envs, hidden_sizes, ...) split the sweep into one program per value.
Floats follow YAML 1.2 (``1e-3`` is a number, not the string PyYAML makes of it).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ppo_jax.config import PPOConfig, field_names
from ppo_jax.sweep_values import as_number, coerce, column_value, field_kind, short_float
from ppo_jax.sweep_yaml import Locator, SpecError, parse_yaml
from ppo_jax.validation import ConfigError, close_matches, validate

TOP_KEYS = ("name", "description", "base", "envs", "env_base", "seeds", "grid", "zip", "random", "log_every")
RANDOM_KEYS = ("num_samples", "seed", "axes")
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")
FIXED_FIELDS = {"progress": "progress is a display switch, not a hyperparameter: a sweep shows one bar over chunks"}
ENV_NOT_AXIS = "env cannot be swept: list environments under `envs:` and give env-specific fields under `env_base:`."
MAX_SEED = 2**32 - 1  # jax.random.key keeps 32 bits of a seed


@dataclasses.dataclass(frozen=True)
class Setting:
    """One (env, hyperparameter setting): ``values`` are the swept values, ``cfg`` the validated config."""

    setting_id: int
    env: str
    values: dict[str, Any]
    cfg: PPOConfig


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A loaded spec. ``settings`` is env-major: ``len(envs) * num_combos`` entries."""

    name: str
    base: PPOConfig
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    axes: tuple[str, ...]  # swept field names (table columns), env excluded
    settings: tuple[Setting, ...]
    log_every: int
    canonical: dict  # JSON-able normal form; two specs run the same sweep iff equal
    text: str | None = None  # the YAML source, if loaded from text

    @property
    def num_combos(self) -> int:
        return len(self.settings) // len(self.envs)


# ----------------------------------------------------------------------------- values


class _Context(Locator):
    """A Locator that also holds the spec's base config (what single values are validated against)."""

    def __init__(self, filename: str, lines: dict[tuple, int]):
        super().__init__(filename, lines)
        self.base = PPOConfig(progress=False)


def _check_axis_name(name, ctx: _Context, path: tuple, taken: dict) -> None:
    if name in ("seed", "seeds"):
        raise ctx.error(path, "seeds are not a config field; list them under the top-level `seeds:` key.")
    if name not in field_names():
        raise ctx.error(path, f"unknown config field {name!r}.{close_matches(name, field_names())}")
    if name in FIXED_FIELDS:
        raise ctx.error(path, f"{name} cannot be swept: {FIXED_FIELDS[name]}.")
    if taken is None:  # base: any field but the fixed ones; an axis overrides it
        return
    if name == "env":
        raise ctx.error(path, ENV_NOT_AXIS)
    if name in taken:
        raise ctx.error(path, f"{name} is already swept in {taken[name]}; sweep each field in one place only.")
    taken[name] = ".".join(map(str, path[:-1]))


def _values_list(raw, ctx: _Context, path: tuple, name: str | None = None) -> list:
    name = name or path[-1]
    if not isinstance(raw, list):
        raise ctx.error(
            path, f"an axis is a list of values, got {raw!r}; to fix {name} for every setting, put it under base."
        )
    if not raw:
        raise ctx.error(path, f"axis {name} is empty; give at least one value.")
    values = [coerce(name, v, ctx, path + (i,)) for i, v in enumerate(raw)]
    for i, value in enumerate(values):  # each value alone, against the base
        _validated(ctx, path + (i,), **{name: value})
    return values


def _validated(ctx: _Context, path: tuple, **values) -> PPOConfig:
    """The base config with ``values`` replaced, validated; errors point at ``path``."""
    try:
        return validate(ctx.base.replace(**values))
    except ConfigError as error:
        raise ctx.error(path, str(error)) from None


def _mapping(raw, ctx: _Context, path: tuple) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ctx.error(path, f"expected a mapping of field: values, got {raw!r}.")
    return raw


# ----------------------------------------------------------------------------- axes


def _list_axes(raw, ctx: _Context, taken: dict, block: str) -> dict[str, list]:
    axes = {}
    for name, values in _mapping(raw, ctx, (block,)).items():
        _check_axis_name(name, ctx, (block, name), taken)
        axes[name] = _values_list(values, ctx, (block, name))
    return axes


def expand_grid(raw, ctx: _Context, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): the Cartesian product of the axes, the last varying fastest."""
    axes = _list_axes(raw, ctx, taken, "grid")
    rows = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    return axes, rows


def expand_zip(raw, ctx: _Context, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): row i takes the i-th value of every axis; lengths must agree."""
    axes = _list_axes(raw, ctx, taken, "zip")
    lengths = {k: len(v) for k, v in axes.items()}
    if len(set(lengths.values())) > 1:
        raise ctx.error(("zip",), f"zip axes must have equal lengths, got {lengths}.")
    rows = [dict(zip(axes, combo)) for combo in zip(*axes.values())] if axes else [{}]
    return axes, rows


def _distribution(name: str, raw, ctx: _Context, path: tuple) -> tuple[str, list]:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ctx.error(path, f"give one distribution, e.g. {{log_uniform: [1e-5, 1e-2]}}; one of {DISTRIBUTIONS}.")
    (dist, args), kind = next(iter(raw.items())), field_kind(name)
    if dist not in DISTRIBUTIONS:
        raise ctx.error(path + (dist,), f"unknown distribution {dist!r}.{close_matches(dist, DISTRIBUTIONS)}")
    if dist == "choice":
        return dist, _values_list(args, ctx, path + (dist,), name)
    wanted = "int" if dist == "int_uniform" else "float"
    if kind != wanted:
        raise ctx.error(path, f"{dist} needs a {wanted} field; {name} is {kind}: use choice: [...].")
    bounds = [as_number(a) for a in args] if isinstance(args, list) and len(args) == 2 else [None]
    if None in bounds or not bounds[0] < bounds[1] or not all(map(math.isfinite, bounds)):
        raise ctx.error(path + (dist,), f"{dist} takes [low, high] with finite low < high, got {args!r}.")
    if dist == "log_uniform" and bounds[0] <= 0:
        raise ctx.error(path + (dist,), f"log_uniform needs low > 0, got {args!r}.")
    for i, bound in enumerate(bounds):
        _validated(ctx, path + (dist, i), **{name: coerce(name, bound, ctx, path + (dist, i))})
    return dist, [coerce(name, b, ctx, path + (dist, i)) for i, b in enumerate(bounds)]


def sample_axis(name: str, dist: str, args: list, num_samples: int, seed: int) -> list:
    """``num_samples`` draws of one random axis (see the module docstring for the generator)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if dist == "uniform":
        draws = rng.uniform(args[0], args[1], num_samples)
    elif dist == "log_uniform":
        draws = np.exp(rng.uniform(np.log(args[0]), np.log(args[1]), num_samples))
    elif dist == "int_uniform":
        return [int(v) for v in rng.integers(args[0], args[1] + 1, num_samples)]
    else:
        return [args[i] for i in rng.integers(0, len(args), num_samples)]
    return [short_float(v) for v in draws]


def expand_random(raw, ctx: _Context, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): ``num_samples`` rows drawn with the spec's sampling seed."""
    raw = _mapping(raw, ctx, ("random",))
    if not raw:
        return {}, [{}]
    for key in raw:
        if key not in RANDOM_KEYS:
            raise ctx.error(("random", key), f"unknown key {key!r}.{close_matches(key, RANDOM_KEYS)} Expected {RANDOM_KEYS}.")
    num, seed = raw.get("num_samples"), raw.get("seed", 0)
    for key, value, low in (("num_samples", num, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ctx.error(("random", key), f"{key} must be an integer >= {low}, got {value!r}.")
    axes = {}
    for name, dist in _mapping(raw.get("axes"), ctx, ("random", "axes")).items():
        _check_axis_name(name, ctx, ("random", "axes", name), taken)
        axes[name] = _distribution(name, dist, ctx, ("random", "axes", name))
    if not axes:
        raise ctx.error(("random", "axes"), "random needs at least one axis under axes:.")
    samples = {name: sample_axis(name, d, args, num, seed) for name, (d, args) in axes.items()}
    rows = [{name: samples[name][i] for name in axes} for i in range(num)]
    normal = {"num_samples": num, "seed": seed, "axes": {n: {d: list(a)} for n, (d, a) in axes.items()}}
    return normal, rows


# ----------------------------------------------------------------------------- spec


def _seeds(raw, ctx: _Context) -> tuple[int, ...]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise ctx.error(("seeds",), f"seeds must be a positive count or a list of seeds, got {raw}.")
        seeds = list(range(raw))
    elif isinstance(raw, list) and raw and all(isinstance(s, int) and not isinstance(s, bool) for s in raw):
        seeds = raw
    else:
        raise ctx.error(("seeds",), f"seeds must be a count (8) or a non-empty list of integers, got {raw!r}.")
    if len(set(seeds)) != len(seeds) or min(seeds) < 0 or max(seeds) > MAX_SEED:
        raise ctx.error(("seeds",), f"seeds must be distinct integers in [0, {MAX_SEED}], got {seeds}.")
    return tuple(seeds)


def _envs(raw, base: PPOConfig, ctx: _Context, taken: dict) -> tuple[str, ...]:
    if raw is None:
        return (base.env,)
    if "env" in taken:
        raise ctx.error(("envs",), f"env is already swept in {taken['env']}; list environments under envs: only.")
    if not isinstance(raw, list) or not raw or not all(isinstance(e, str) for e in raw) or len(set(raw)) != len(raw):
        raise ctx.error(("envs",), f"envs must be a non-empty list of distinct environment ids, got {raw!r}.")
    for i, env in enumerate(raw):
        _validated(ctx, ("envs", i), env=env)
    return tuple(raw)


def _env_base(raw, envs: tuple[str, ...], base: PPOConfig, ctx: _Context, taken: dict) -> dict[str, dict]:
    """``env_base:`` -> {env: {field: value}}: fields applied over base for that env only, before the axes."""
    out = {}
    for env, fields in _mapping(raw, ctx, ("env_base",)).items():
        if env not in envs:
            raise ctx.error(("env_base", env), f"env_base names {env!r}, which is not under envs: {list(envs)}.")
        values = {}
        for name, value in _mapping(fields, ctx, ("env_base", env)).items():
            _check_axis_name(name, ctx, ("env_base", env, name), None)
            if name == "env":
                raise ctx.error(("env_base", env, name), ENV_NOT_AXIS)
            if name in taken:
                raise ctx.error(("env_base", env, name), f"{name} is swept in {taken[name]}; it cannot also be fixed per env.")
            values[name] = coerce(name, value, ctx, ("env_base", env, name))
        try:
            validate(base.replace(env=env, **values))
        except ConfigError as error:
            raise ctx.error(("env_base", env), f"{env}: {error}") from None
        out[env] = values
    return out


def _base(raw, ctx: _Context) -> PPOConfig:
    values = {}
    for name, value in _mapping(raw, ctx, ("base",)).items():
        if name == "progress" and value is False:
            continue
        _check_axis_name(name, ctx, ("base", name), None)
        values[name] = coerce(name, value, ctx, ("base", name))
    try:
        ctx.base = validate(ctx.base.replace(**values))
    except ConfigError as error:  # point at the field the message starts with, if any
        name = next((k for k in values if str(error).startswith(k)), None)
        raise ctx.error(("base", name) if name else ("base",), str(error)) from None
    return ctx.base


def _check_env(env: str, ctx: _Context) -> None:
    from ppo_jax.envs import make_env

    try:
        make_env(env)
    except NotImplementedError as error:  # e.g. an action space the networks do not support
        raise ctx.error((), f"environment {env}: {error}") from None


def from_dict(raw, *, filename: str = "<spec>", lines: dict | None = None, text: str | None = None) -> SweepSpec:
    """Validate and expand a spec given as a dict (see the module docstring); SpecError on any problem."""
    ctx = _Context(filename, lines or {})
    if not isinstance(raw, dict):
        raise ctx.error((), f"a spec is a mapping with keys among {TOP_KEYS}, got {type(raw).__name__}.")
    for key in raw:
        if key not in TOP_KEYS:
            hint = close_matches(key, TOP_KEYS) or (" Config fields go under base: or an axis." if key in field_names() else "")
            raise ctx.error((key,), f"unknown spec key {key!r}.{hint} Expected one of {TOP_KEYS}.")
    taken: dict[str, str] = {}
    base = _base(raw.get("base"), ctx)
    grid, grid_rows = expand_grid(raw.get("grid"), ctx, taken)
    zipped, zip_rows = expand_zip(raw.get("zip"), ctx, taken)
    random, random_rows = expand_random(raw.get("random"), ctx, taken)
    envs = _envs(raw.get("envs"), base, ctx, taken)
    env_base = _env_base(raw.get("env_base"), envs, base, ctx, taken)
    seeds = _seeds(raw.get("seeds", 1), ctx)
    log_every = raw.get("log_every", 1)
    if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
        raise ctx.error(("log_every",), f"log_every must be a positive integer, got {log_every!r}.")
    name = str(raw.get("name") or (Path(filename).stem if text is not None else "sweep"))

    combos = [{**g, **z, **r} for g in grid_rows for z in zip_rows for r in random_rows]
    settings = []
    for env in envs:
        for setting_id, values in enumerate(combos):
            path = ("grid",) if grid else ("zip",) if zipped else ("random",) if random else ()
            described = ", ".join(f"{k}={column_value(v)}" for k, v in values.items())
            try:
                cfg = validate(base.replace(env=env, **{**env_base.get(env, {}), **values}))
            except ConfigError as error:
                raise ctx.error(path, f"setting {setting_id} ({described or 'base'}) on {env}: {error}") from None
            settings.append(Setting(setting_id, cfg.env, values, cfg))
    for env in sorted({s.env for s in settings}):
        _check_env(env, ctx)

    axes = tuple(k for k in (*grid, *zipped, *random.get("axes", {})) if k != "env")
    canonical = {  # name and description are labels: renaming a spec does not change the sweep
        "base": _plain(base.to_dict()),
        "envs": list(envs),
        "seeds": list(seeds),
        "grid": _plain(grid),
        "zip": _plain(zipped),
        "random": _plain(random),
        "log_every": log_every,
    }
    if env_base:  # only when given, so that specs without it keep their canonical form (and --resume)
        canonical["env_base"] = _plain(env_base)
    return SweepSpec(name, base, envs, seeds, axes, tuple(settings), log_every, canonical, text)


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
        text = path.read_text()
    except OSError as error:
        raise SpecError(f"cannot read spec {path}: {error.strerror or error}") from None
    data, lines = parse_yaml(text, str(path))
    return from_dict(data, filename=str(path), lines=lines, text=text)
