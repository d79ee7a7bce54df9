"""The axes of a sweep spec: field names checked, values coerced and validated, grid / zip / random expanded.

``SpecContext`` carries the task, the base config and where the spec came from,
so that every error names the file, the line and the key path
(``file, line N (grid.clip_eps[1]): ...``).
"""

from __future__ import annotations

import itertools
import math
import zlib

import numpy as np

from ppo_jax.config_fields import MAX_RUNS, field_names
from ppo_jax.errors import ConfigError, RelationError, close_matches
from ppo_jax.sweep.spec_values import PRESET_AXIS, as_number, coerce, column_value, field_kind, short_float, shown
from ppo_jax.sweep.spec_yaml import Locator
from ppo_jax.task_contract import Task

RANDOM_KEYS = ("num_samples", "seed", "axes")
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")
ENV_NOT_AXIS = "env cannot be swept: list environments under `envs:` and give env-specific fields under `env_base:`."


# ----------------------------------------------------------------------------- values


class SpecContext(Locator):
    """A Locator that also holds the spec's task and base config (what single values are validated against)."""

    def __init__(self, filename: str, lines: dict[tuple, int], task: Task):
        super().__init__(filename, lines)
        self.task, self.base = task, task.config_class()
        self.fields = field_names(task.config_class) + ((PRESET_AXIS,) if task.presets else ())
        self.shared_fixed = False  # set once pretrain: is read: shared fields cannot be axes

    def coerce(self, name: str, value, path: tuple):
        if name == PRESET_AXIS:
            names = self.task.preset_names()
            if not isinstance(value, str) or value not in names:
                raise self.error(
                    path,
                    f"unknown preset {shown(value)}.{close_matches(str(value), names)} "
                    f"Presets of task {self.task.name}: {', '.join(names)}.",
                )
            return value
        return coerce(self.task.config_class, name, value, self, path)

    def kind(self, name: str) -> str:
        return field_kind(self.task.config_class, name)


def check_axis_name(name, ctx: SpecContext, path: tuple, taken: dict) -> None:
    if name in ("seed", "seeds"):
        raise ctx.error(path, "seeds are not a config field; list them under the top-level `seeds:` key.")
    if name in ctx.task.config_class.LEGACY_HINTS:
        raise ctx.error(path, f"{ctx.task.config_class.LEGACY_HINTS[name]}.")
    if name not in ctx.fields:
        config = ctx.task.config_class.__name__
        raise ctx.error(
            path, f"unknown {config} field {name!r} (task {ctx.task.name}).{close_matches(name, ctx.fields)}"
        )
    if taken is None:  # base: any field; an axis overrides it
        return
    if name == ctx.task.env_field:
        raise ctx.error(path, ENV_NOT_AXIS)
    if ctx.shared_fixed and name in ctx.task.shared_fields:
        raise ctx.error(
            path,
            f"{name} only affects pretraining, which this sweep shares across settings (one pretrained model per "
            "program); fix it under base:, or set `pretrain: {per_setting: true}` to pretrain every setting's own.",
        )
    if name in taken:
        raise ctx.error(path, f"{name} is already swept in {taken[name]}; sweep each field in one place only.")
    taken[name] = ".".join(map(str, path[:-1]))


def values_list(raw, ctx: SpecContext, path: tuple, name: str | None = None) -> list:
    name = name or path[-1]
    if not isinstance(raw, list):
        raise ctx.error(
            path, f"an axis is a list of values, got {shown(raw)}; to fix {name} for every setting, put it under base."
        )
    if not raw:
        raise ctx.error(path, f"axis {name} is empty; give at least one value.")
    values = [ctx.coerce(name, v, path + (i,)) for i, v in enumerate(raw)]
    for i, value in enumerate(values):  # each value alone, against the base
        validated(ctx, path + (i,), **{name: value})
    return values


def configured(task: Task, base, values: dict):
    """``base`` with ``values`` set: a ``preset`` value's fields first (over base, for the env ``values`` names, if
    any: a preset may fit some envs only), then the other values (over it)."""
    values = dict(values)
    preset = values.pop(PRESET_AXIS, None)
    if preset is not None:
        env = {task.env_field: values[task.env_field]} if task.env_field in values else {}
        base = task.apply_preset(preset, base.replace(**env))
    return base.replace(**values)


def validated(ctx: SpecContext, path: tuple, **values):
    """The base config with ``values`` replaced, validated; errors point at ``path``.

    A RelationError (a value that contradicts another field of the base) is left to the check of whole
    settings: a zip row may change both fields together. None then.
    """
    try:
        return ctx.task.validate(configured(ctx.task, ctx.base, values))
    except RelationError:
        return None
    except ConfigError as error:
        raise ctx.error(path, str(error)) from None


def mapping(raw, ctx: SpecContext, path: tuple) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ctx.error(path, f"expected a mapping of field: values, got {shown(raw)}.")
    return raw


# ----------------------------------------------------------------------------- axes


def _list_axes(raw, ctx: SpecContext, taken: dict, block: str) -> dict[str, list]:
    axes = {}
    for name, values in mapping(raw, ctx, (block,)).items():
        check_axis_name(name, ctx, (block, name), taken)
        axes[name] = values_list(values, ctx, (block, name))
        if block == "grid":
            _check_no_repeats(name, values, axes[name], ctx)
    return axes


def _check_no_repeats(name: str, raw: list, values: list, ctx: SpecContext) -> None:
    """SpecError if a grid axis holds one value twice (as the config holds it: 0.1 and 0.10000000001 are one float32)."""
    first: dict = {}
    for j, value in enumerate(values):
        i = first.setdefault(value, j)
        if i != j:
            if shown(raw[i]) == shown(raw[j]):
                repeat = f"lists {shown(raw[j])} twice ([{i}] and [{j}])"
            else:  # written differently, held the same: 0.1 and 0.10000000001 (one float32), 64 and [64]
                held = " as float32" if ctx.kind(name) == "float" else f" as {name} holds them"
                repeat = f"repeats a value: [{i}] {shown(raw[i])} and [{j}] {shown(raw[j])} are both {column_value(value)}{held}"
            raise ctx.error(
                ("grid", name, j),
                f"grid axis {name} {repeat}, so two settings would be the same run under two labels. Drop one.",
            )


def _check_distinct_rows(rows: list[dict], ctx: SpecContext, path, what: str, hint: str) -> None:
    """SpecError if two rows of a zip or random block hold the same values (two labels for one run).

    ``path``: where the error points, a key path or a function of the repeated row's index.
    """
    first: dict = {}
    for j, row in enumerate(rows):
        i = first.setdefault(tuple(row.items()), j)
        if i != j:
            values = ", ".join(f"{k}={column_value(v)}" for k, v in row.items())
            raise ctx.error(
                path(j) if callable(path) else path,
                f"{what} {i} and {j} are the same ({values}), so two settings would be the same run under two labels. {hint}",
            )


def _check_size(count: int, ctx: SpecContext, path: tuple, what: str) -> None:
    if count > MAX_RUNS:
        raise ctx.error(
            path,
            f"{what} {count:,} settings, more than a sweep runs ({MAX_RUNS:,} runs at most); "
            "split the sweep into several specs or use fewer values.",
        )


def expand_grid(raw, ctx: SpecContext, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): the Cartesian product of the axes, the last varying fastest."""
    axes = _list_axes(raw, ctx, taken, "grid")
    _check_size(math.prod(len(v) for v in axes.values()), ctx, ("grid",), "the grid's axes make")
    rows = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
    return axes, rows


def expand_zip(raw, ctx: SpecContext, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): row i takes the i-th value of every axis; lengths must agree."""
    axes = _list_axes(raw, ctx, taken, "zip")
    lengths = {k: len(v) for k, v in axes.items()}
    if len(set(lengths.values())) > 1:
        raise ctx.error(("zip",), f"zip axes must have equal lengths, got {lengths}.")
    rows = [dict(zip(axes, combo, strict=True)) for combo in zip(*axes.values(), strict=True)] if axes else [{}]
    _check_distinct_rows(
        rows, ctx, lambda j: ("zip", next(iter(axes)), j), "zip rows", "Drop one of them (its value on every zip axis)."
    )
    return axes, rows


def _distribution(name: str, raw, ctx: SpecContext, path: tuple) -> tuple[str, list]:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ctx.error(path, f"give one distribution, e.g. {{log_uniform: [1e-5, 1e-2]}}; one of {DISTRIBUTIONS}.")
    (dist, args), kind = next(iter(raw.items())), ctx.kind(name)
    if dist not in DISTRIBUTIONS:
        raise ctx.error(path + (dist,), f"unknown distribution {dist!r}.{close_matches(dist, DISTRIBUTIONS)}")
    if dist == "choice":
        return dist, values_list(args, ctx, path + (dist,), name)
    wanted = "int" if dist == "int_uniform" else "float"
    if kind != wanted:
        raise ctx.error(path, f"{dist} needs a {wanted} field; {name} is {kind}: use choice: [...].")
    bounds = [as_number(a) for a in args] if isinstance(args, list) and len(args) == 2 else [None]
    if None in bounds or not bounds[0] < bounds[1] or not all(map(math.isfinite, bounds)):
        raise ctx.error(path + (dist,), f"{dist} takes [low, high] with finite low < high, got {shown(args)}.")
    if dist == "log_uniform" and bounds[0] <= 0:
        raise ctx.error(path + (dist,), f"log_uniform needs low > 0, got {shown(args)}.")
    held = [ctx.coerce(name, b, path + (dist, i)) for i, b in enumerate(bounds)]
    for i, bound in enumerate(held):
        validated(ctx, path + (dist, i), **{name: bound})
    if not held[0] < held[1] or (dist == "log_uniform" and held[0] <= 0):
        raise ctx.error(
            path + (dist,),
            f"{dist} bounds {shown(args)} are {held} as float32 (the values {name} holds): "
            "give a range wider than float32 resolution, with low > 0 for log_uniform.",
        )
    return dist, held


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


def expand_random(raw, ctx: SpecContext, taken: dict) -> tuple[dict, list[dict]]:
    """(normal form, rows): ``num_samples`` rows drawn with the spec's sampling seed."""
    raw = mapping(raw, ctx, ("random",))
    if not raw:
        return {}, [{}]
    for key in raw:
        if key not in RANDOM_KEYS:
            raise ctx.error(
                ("random", key), f"unknown key {key!r}.{close_matches(key, RANDOM_KEYS)} Expected {RANDOM_KEYS}."
            )
    num, seed = raw.get("num_samples"), raw.get("seed", 0)
    for key, value, low in (("num_samples", num, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ctx.error(("random", key), f"{key} must be an integer >= {low}, got {shown(value)}.")
    _check_size(num, ctx, ("random", "num_samples"), "num_samples asks for")
    axes = {}
    for name, dist in mapping(raw.get("axes"), ctx, ("random", "axes")).items():
        check_axis_name(name, ctx, ("random", "axes", name), taken)
        axes[name] = _distribution(name, dist, ctx, ("random", "axes", name))
    if not axes:
        raise ctx.error(("random", "axes"), "random needs at least one axis under axes:.")
    samples = {name: sample_axis(name, d, args, num, seed) for name, (d, args) in axes.items()}
    rows = [{name: samples[name][i] for name in axes} for i in range(num)]
    _check_distinct_rows(
        rows,
        ctx,
        ("random",),
        "random samples",
        "Draws repeat when an axis has few values (choice, int_uniform) or a range narrower than "
        "float32 steps: lower num_samples, widen the axes, or list the values under grid: instead.",
    )
    normal = {"num_samples": num, "seed": seed, "axes": {n: {d: list(a)} for n, (d, a) in axes.items()}}
    return normal, rows
