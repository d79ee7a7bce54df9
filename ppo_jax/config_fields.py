"""The numeric config base shared by every task's config (``PPOConfig``, ``RlhfConfig``).

A config is a frozen ``flax.struct`` dataclass. A field declared with ``static``
sets a shape or a Python branch (``pytree_node=False``: changing it compiles a new
program); a field declared with ``leaf`` is a traced float32 leaf, so
``jax.vmap(train)(stacked_cfgs, keys)`` sweeps it in one program and two values
share one compilation. Which fields are which is read off the dataclass itself
(``traced_fields``, ``static_fields``), never from a second hand-kept list.

One float rule everywhere (configs, spec values, run directories, tables): a
float32 leaf is written as the shortest decimal that maps back to it
(``short_float``: 0.2, not 0.20000000298).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from flax import struct

from ppo_jax.errors import ConfigError, close_matches

MAX_SEED = 2**32 - 1
"""The largest run seed: ``jax.random.key`` keeps only the low 32 bits of a seed without jax_enable_x64."""


def leaf(default: float):
    """A traced float32 hyperparameter (vmappable; changing it never recompiles)."""
    return struct.field(pytree_node=True, default=default)


def static(default):
    """A static field: it sets a shape or a branch, and changing it compiles a new program."""
    return struct.field(pytree_node=False, default=default)


def field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def traced_fields(cls) -> tuple[str, ...]:
    """Names of the traced float32 leaves of config class ``cls``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("pytree_node", True))


def static_fields(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get("pytree_node", True))


def short_float(value) -> float:
    """The float32 ``value`` holds, as its shortest decimal (2.5e-4, not 0.0002500000118743628)."""
    return float(str(np.float32(value)))


class ConfigBase:
    """Methods every config dataclass shares; subclasses are ``@struct.dataclass`` with ``leaf``/``static`` fields.

    ``LEGACY_FIELDS`` maps a field name that older run and sweep directories hold
    to a function ``value -> {new_field: new_value}`` (or ``{}`` to drop it), so
    that ``from_dict`` still reads them; ``LEGACY_HINTS`` says what to write instead.
    """

    LEGACY_FIELDS: dict = {}
    LEGACY_HINTS: dict = {}
    """Old field name -> what to write instead (for errors where a legacy name is not translated: spec axes)."""

    def __post_init__(self):
        # Python numbers in leaves become float32 (weakly typed floats would retrace).
        for name in traced_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
                object.__setattr__(self, name, np.float32(value))
        for name in static_fields(type(self)):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def to_dict(self) -> dict:
        """Plain-Python view for JSON: leaves as short floats (lists when stacked), tuples as lists."""
        traced = traced_fields(type(self))
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in traced:
                array = np.asarray(value, np.float32)
                value = short_float(array) if array.ndim == 0 else [short_float(v) for v in array.ravel()]
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, values: dict):
        """Inverse of ``to_dict``; unknown keys raise a ConfigError naming close matches."""
        values = dict(values)
        for old, translate in cls.LEGACY_FIELDS.items():
            if old in values:
                values.update({k: v for k, v in translate(values.pop(old)).items() if k not in values})
        known = field_names(cls)
        for name in values:
            if name not in known:
                raise ConfigError(f"unknown {cls.__name__} field {name!r}.{close_matches(name, known)}")
        return cls(**values)

    def inert_fields(self) -> dict[str, str]:
        """Fields whose value cannot change this config's run, with why: ``{field: reason}``.

        A sweep refuses an axis that would give two settings the same run under
        different labels (``ppo_jax.sweep.spec``). Subclasses override this.
        """
        return {}


def _is_concrete(value) -> bool:
    import jax

    return not isinstance(value, jax.core.Tracer)


def check_range(name: str, value, *, low=None, high=None, low_open=False, allow_inf=False, hint="") -> None:
    """ConfigError unless every entry of ``value`` lies in the range (tracers are skipped: checked before jit)."""
    if not _is_concrete(value):
        return
    array = np.asarray(value, dtype=np.float64)
    if np.any(np.isnan(array)):
        raise ConfigError(f"{name} is NaN; give a number.{hint}")
    if not allow_inf and np.any(np.isinf(array)):
        raise ConfigError(f"{name} must be finite, got {array.tolist()}.{hint}")
    if low is not None:
        bad = array <= low if low_open else array < low
        if np.any(bad):
            relation = ">" if low_open else ">="
            raise ConfigError(f"{name} must be {relation} {low}, got {array.tolist()}.{hint}")
    if high is not None and np.any(array > high):
        raise ConfigError(f"{name} must be <= {high}, got {array.tolist()}.{hint}")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ConfigError(
            f"unknown {name} {value!r}.{close_matches(str(value), choices)} Choose one of: {', '.join(choices)}."
        )


def check_positive_ints(cfg, names, *, allow_zero=()) -> None:
    """ConfigError unless each field in ``names`` is a positive integer (or >= 0 for those in ``allow_zero``)."""
    for name in names:
        value, minimum = getattr(cfg, name), 0 if name in allow_zero else 1
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
            kind = "a non-negative" if minimum == 0 else "a positive"
            raise ConfigError(f"{name} must be {kind} integer, got {value!r}.")


def check_leaf_shapes(cfg) -> None:
    """Leaves are scalars, or stacked along one leading axis of equal length for vmap."""
    shapes = {name: np.shape(getattr(cfg, name)) for name in traced_fields(type(cfg))}
    if {len(s) for s in shapes.values()} - {0, 1}:
        raise ConfigError(f"config leaves must be scalars or 1-D stacks, got shapes {shapes}.")
    lengths = {s[0] for s in shapes.values() if s}
    if len(lengths) > 1:
        raise ConfigError(
            f"stacked config leaves have different lengths {sorted(lengths)}; stack every leaf to the same length."
        )
