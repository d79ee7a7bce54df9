"""Values of config fields in a sweep spec: checked and normalized per field kind, for any task's config class.

Floats become the float32 the leaf will hold, written as the shortest decimal
(0.2, not 0.20000000298; ``ppo_jax.config_fields.short_float``); integers may
be written 5e5; a tuple field (hidden_sizes) is a list of widths, held as a
tuple and shown in tables as "64x64".
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ppo_jax.config_fields import short_float, to_float32, traced_fields
from ppo_jax.config_fields import short_repr as shown  # values in messages: cut short
from ppo_jax.errors import ConfigError
from ppo_jax.sweep.spec_yaml import Locator


@functools.cache
def _defaults(config_class):
    return config_class()


PRESET_AXIS = "preset"
"""Not a config field: a named preset whose fields a setting takes (``Task.presets``; ``spec_axes.configured``)."""


def field_kind(config_class, name: str) -> str:
    """'float' (traced leaf), 'int', 'bool', 'str' or 'sizes' (a tuple of ints: hidden_sizes); a preset is 'str'."""
    if name == PRESET_AXIS:
        return "str"
    if name in traced_fields(config_class):
        return "float"
    default = getattr(_defaults(config_class), name)
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    return "sizes" if isinstance(default, tuple) else "str"


def as_number(value) -> float | None:
    """A number, or a string that reads as one ("1e-3", "5_000"), as float; else None (bools too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)) and abs(int(value)) > 2**1023:  # beyond any float: +-inf, not OverflowError
        return math.inf if value > 0 else -math.inf
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            return None
    return None


def coerce(config_class, name: str, value, where: Locator, path: tuple):
    """``value`` as field ``name`` holds it (float32-exact floats, ints, tuples), or SpecError."""
    kind = field_kind(config_class, name)
    if kind in ("float", "int"):
        if kind == "int" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)  # exactly, however large (the config's checks bound it)
        number = as_number(value)
        if number is not None and kind == "float":
            exact = value if isinstance(value, (int, np.integer)) else number  # 10**400 quoted as given, not inf
            try:
                return short_float(to_float32(name, exact)) + 0.0  # -0.0 -> 0.0: one run, one label
            except ConfigError as error:  # beyond float32's range: said with the value as written
                raise where.error(path, str(error)) from None
        if number is not None and math.isfinite(number) and number == int(number):
            return int(number)
        raise where.error(
            path, f"{name} must be {'a number' if kind == 'float' else 'an integer'}, got {shown(value)}."
        )
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise where.error(path, f"{name} must be true or false, got {shown(value)}.")
    if kind == "sizes":
        sizes = [value] if isinstance(value, int) else value
        if isinstance(sizes, (list, tuple)) and all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
            return tuple(sizes)
        raise where.error(path, f"{name} must be a list of layer widths like [64, 64], got {shown(value)}.")
    if isinstance(value, str):
        return value
    raise where.error(path, f"{name} must be a string, got {shown(value)}.")


def column_value(value):
    """A swept value as a table cell: hidden_sizes (64, 64) -> '64x64'; everything else unchanged."""
    return "x".join(map(str, value)) if isinstance(value, tuple) else value
