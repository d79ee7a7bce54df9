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
import math
import numbers
import reprlib

import numpy as np
from flax import struct

from ppo_jax.errors import ConfigError, close_matches

MAX_SEED = 2**32 - 1
"""The largest run seed: ``jax.random.key`` keeps only the low 32 bits of a seed without jax_enable_x64."""
MAX_INT32 = 2**31 - 1
"""The largest size (envs, steps, widths, updates, ...): JAX holds shapes and counters in 32 bits without jax_enable_x64."""
MAX_INT64 = 2**63 - 1
"""The largest count kept on the host only (total_timesteps)."""
MAX_RUNS = 1_000_000
"""The most runs one sweep trains (envs x settings x seeds): beyond it, listing them alone takes minutes and gigabytes."""


def brief_int(value) -> str:
    """An integer for a message: its digits, or its size when it has too many (str() refuses over 4300 digits)."""
    value = int(value)
    return str(value) if value.bit_length() <= 64 else f"a {value.bit_length()}-bit integer"


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


FLOAT32 = np.finfo(np.float32)


def to_float32(name: str, value) -> np.float32:
    """``value`` (a Python or NumPy number) as the float32 leaf ``name`` holds; ConfigError if float32 cannot hold it.

    A finite value beyond float32's range would become inf, and a non-zero one below its smallest normal number
    (1.1754944e-38) 0 or a value with fewer digits: both are refused, quoting the value as given (the user's
    1e-50, not the 0.0 it would become), without NumPy's overflow warning. inf and NaN pass (the config's
    checks say what they need).
    """
    is_int = isinstance(value, (int, np.integer))
    try:
        wide = float(value)
    except OverflowError:  # an int beyond float64
        wide = math.inf
    shown = (str(int(value)) if int(value).bit_length() <= 256 else brief_int(value)) if is_int else repr(wide)
    with np.errstate(over="ignore", under="ignore"):
        narrow = np.float32(wide)
    largest, smallest = short_float(FLOAT32.max), short_float(FLOAT32.tiny)
    if (math.isfinite(wide) or is_int) and not np.isfinite(narrow):
        raise ConfigError(
            f"{name} {shown} overflows float32 (its largest value is {largest}); "
            f"give a value of at most {largest} in magnitude."
        )
    if wide != 0 and abs(wide) < FLOAT32.tiny:
        raise ConfigError(
            f"{name} {shown} underflows float32 (below its smallest normal number {smallest} a float32 is 0 "
            f"or loses digits); give 0 or a value of at least {smallest} in magnitude."
        )
    return narrow


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
                object.__setattr__(self, name, to_float32(name, value))
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
        cfg = cls(**values)
        cfg.check_types()
        return cfg

    def check_types(self) -> None:
        """ConfigError unless every field holds the kind of value its default holds (what ``from_dict`` reads back:
        a leaf is a number or a 1-D list of them, a static field a bool, int, str or tuple of ints as its default)."""
        defaults, traced = type(self)(), traced_fields(type(self))
        for f in dataclasses.fields(self):
            value, default = getattr(self, f.name), getattr(defaults, f.name)
            if f.name in traced:
                ok, kind = _is_leaf_value(value), "a number (or a list of numbers)"
            elif isinstance(default, bool):
                ok, kind = isinstance(value, (bool, np.bool_)), "true or false"
            elif isinstance(default, int):
                ok, kind = (
                    isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)),
                    "an integer",
                )
            elif isinstance(default, tuple):
                ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                kind = "a list of integers"
            else:
                ok, kind = (
                    isinstance(value, type(default)),
                    "a string" if isinstance(default, str) else f"a {type(default).__name__}",
                )
            if not ok:
                raise ConfigError(f"{f.name} must be {kind}, got {short_repr(value)}.")

    def inert_fields(self) -> dict[str, str]:
        """Fields whose value cannot change this config's run, with why: ``{field: reason}``.

        A sweep refuses an axis that would give two settings the same run under
        different labels (``ppo_jax.sweep.spec``), and ``ppo-jax train`` / ``lm`` /
        ``rlhf`` a flag typed for one of them (``refuse_inert``). Subclasses override this.
        """
        return {}


def ignored_because(names, reason: str) -> str:
    """How every message says that fields (or the flags that set them) change nothing, and why (``inert_fields``).

    ``names``: one name, or several that are ignored for one reason ("--digits and --scratchpad are ignored ...").
    """
    names = [names] if isinstance(names, str) else list(names)
    return f"{and_list(names)} {'is' if len(names) == 1 else 'are'} ignored because {reason}"


def and_list(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def refuse_inert(cfg, given: dict[str, str]) -> None:
    """ConfigError if a field the user set is one ``cfg``'s switches ignore (``cfg.inert_fields()``), saying why.

    ``given``: field -> how the user wrote it (``{"beta": "--beta"}``); several fields may share one spelling
    (``--clip-eps`` sets clip_eps_low and clip_eps_high), which is named once.
    """
    inert = cfg.inert_fields()
    by_reason: dict[str, list[str]] = {}  # why they change nothing -> what the user wrote
    for name, written in given.items():
        if name in inert and written not in by_reason.setdefault(inert[name], []):
            by_reason[inert[name]].append(written)
    if by_reason:
        flags = list(dict.fromkeys(written for group in by_reason.values() for written in group))
        raise ConfigError(
            "; ".join(ignored_because(written, reason) for reason, written in by_reason.items())
            + f". Drop {and_list(flags)}, or turn on the switch that uses {'it' if len(flags) == 1 else 'them'}."
        )


class _Short(reprlib.Repr):
    def repr_int(self, x, level):  # str() refuses ints over 4300 digits
        return super().repr_int(x, level) if x.bit_length() <= 4000 else f"<a {x.bit_length()}-bit integer>"


_SHORT = _Short()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8


def short_repr(value) -> str:
    """``repr(value)`` cut short for a one-line message (input may be huge, deep or self-referencing)."""
    return _SHORT.repr(value)


def _is_leaf_value(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim <= 1 and value.dtype.kind in "fiu"
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in value)
    return isinstance(value, numbers.Real)


def is_concrete(value) -> bool:
    import jax

    return not isinstance(value, jax.core.Tracer)


def check_range(name: str, value, *, low=None, high=None, low_open=False, allow_inf=False, hint="") -> None:
    """ConfigError unless every entry of ``value`` lies in the range (tracers are skipped: checked before jit)."""
    if not is_concrete(value):
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


def check_positive_ints(cfg, names, *, allow_zero=(), host_only=()) -> None:
    """ConfigError unless each field in ``names`` is a positive integer (or >= 0 for those in ``allow_zero``).

    Each is at most ``MAX_INT32`` (a shape or a counter in a compiled program), or ``MAX_INT64`` for those in
    ``host_only`` (counts that only Python and NumPy hold).
    """
    for name in names:
        value, minimum = getattr(cfg, name), 0 if name in allow_zero else 1
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
            kind = "a non-negative" if minimum == 0 else "a positive"
            shown = (
                brief_int(value)
                if isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                else repr(value)
            )
            raise ConfigError(f"{name} must be {kind} integer, got {shown}.")
        high = MAX_INT64 if name in host_only else MAX_INT32
        if value > high:
            raise ConfigError(
                f"{name} must be at most {high} ({'64' if high == MAX_INT64 else '32'}-bit), got {brief_int(value)}."
            )


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
