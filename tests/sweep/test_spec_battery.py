"""Bad-input battery for sweep specs: Hypothesis-generated YAML and raw text -> a spec, or a SpecError naming the file.

Three generators: spec-shaped YAML (the real top-level keys and config fields with values of every type,
out-of-range numbers, NaN/inf, huge integers, empty lists, repeated values, unknown keys, nested junk), raw
YAML-ish text, and Python dicts given to ``from_dict`` directly (tuples, bytes, NumPy scalars). Every case
either loads or raises ``ConfigError`` whose one-line message starts with the file name and, where the spec has
lines, the line; nothing else escapes and nothing is traced or compiled (``tests.battery.watching``). Case
counts per outcome appear in pytest's terminal summary.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ppo_jax.config_fields import field_names
from ppo_jax.errors import ConfigError
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.rl.config import PPOConfig
from ppo_jax.sweep.spec import TOP_KEYS, SweepSpec, from_dict, load_spec
from ppo_jax.sweep.spec_axes import DISTRIBUTIONS, RANDOM_KEYS
from ppo_jax.sweep.spec_values import field_kind
from ppo_jax.sweep.spec_yaml import parse_yaml
from tests import battery

battery.warm_up()

FIELDS = {name: field_kind(PPOConfig, name) for name in field_names(PPOConfig)}
FIELDS.update({name: field_kind(RlhfConfig, name) for name in field_names(RlhfConfig) if name not in FIELDS})
OTHER_NAMES = ["seed", "seeds", "progress", "anneal_lr", "clip_epsilon", "lr_", "", "grid", "base"]
ENVS = [
    "CartPole-v1",
    "Acrobot-v1",
    "Pendulum-v1",
    "MountainCar-v0",
    "CartPole-v2",
    "brax/ant",
    "cartpole",
    "",
    "Cart\nPole",
]
WORDS = [
    "clip",
    "kl_fixed",
    "kl_adaptive",
    "dual_clip",
    "unclipped",
    "tanh",
    "relu",
    "gelu",
    "linear",
    "constant",
    "gaussian",
    "tanh_gaussian",
    "state",
    "parameter",
    "orthogonal",
    "learned",
    "programmatic",
    "gae",
    "broadcast",
    "spring",
    "mjx",
    "ppo",
    "rlhf",
    "1e-3",
    "5_000",
    "0x10",
    "nan",
    ".inf",
    "-inf",
    "true",
    "null",
    "~",
    "64x64",
    "a\nb",
    "é",
    "\t",
    "{",
    "- x",
    "&a",
    "*a",
    "#",
]
HUGE = [2**31, 2**32, 2**63, 2**64, -(2**63), 10**30, 10**400, -(10**400)]

ints = st.one_of(st.integers(-3, 300), st.integers(-(2**70), 2**70), st.sampled_from(HUGE))
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-2, 2),
    st.sampled_from([0.0, -0.0, 1e-3, 0.1, 0.10000000001, 0.2, 0.5, 0.99, 1.0, 1e-45, 1e-50, 3.5e38]),
)
texts = st.one_of(st.sampled_from(WORDS + ENVS), st.text(max_size=8))
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
junk_keys = st.one_of(
    st.sampled_from(list(TOP_KEYS) + list(FIELDS) + OTHER_NAMES),
    st.text(max_size=6),
    st.integers(-2, 3),
    st.booleans(),
    st.none(),
    st.floats(-1, 1),
)
junk = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(junk_keys, inner, max_size=4), max_leaves=12
)


def typical(kind: str):
    """Values a field of this kind takes in a real spec, and their near misses."""
    if kind == "float":
        return (
            st.sampled_from([0.0, 1e-3, 2.5e-4, 0.01, 0.1, 0.2, 0.3, 0.5, 0.9, 0.95, 0.99, 1.0, 3.0, -0.1, 1.5])
            | floats
        )
    if kind == "int":
        return st.sampled_from([1, 2, 4, 8, 16, 64, 128, 1024, 4096, 500_000, 0, -1, 3]) | ints
    if kind == "bool":
        return st.booleans() | st.sampled_from([0, 1, "yes", None])
    if kind == "sizes":
        return st.lists(st.integers(-1, 128), max_size=3) | st.integers(-1, 64) | st.lists(st.booleans(), max_size=2)
    return st.sampled_from(WORDS + ENVS) | texts


field_names_st = st.one_of(
    st.sampled_from(list(FIELDS)), st.sampled_from(list(FIELDS)), st.sampled_from(OTHER_NAMES), junk_keys
)


@st.composite
def field_value(draw, name):
    return draw(st.one_of(typical(FIELDS[name]), typical(FIELDS[name]), junk) if name in FIELDS else junk)


@st.composite
def field_map(draw, max_size=4):
    names = draw(st.lists(field_names_st, max_size=max_size, unique_by=lambda n: (type(n), n)))
    return {name: draw(field_value(name)) for name in names}


@st.composite
def axis_map(draw):
    """grid: / zip: -- field: [values], with repeats, empty lists and scalars now and then."""
    names = draw(st.lists(field_names_st, max_size=3, unique_by=lambda n: (type(n), n)))
    out = {}
    for name in names:
        values = st.lists(field_value(name), min_size=0, max_size=4)
        repeated = field_value(name).map(lambda v: [v, v])
        out[name] = draw(st.one_of(values, values, repeated, field_value(name)))
    return out


@st.composite
def distribution(draw, name):
    dist = draw(st.sampled_from(DISTRIBUTIONS) | junk_keys)
    if dist == "choice":
        args = draw(st.lists(field_value(name), max_size=4) | junk)
    else:
        bound = st.one_of(floats, ints, st.sampled_from([1e-5, 1e-3, 0.1, 1, 2, 8, "1e-3"]))
        args = draw(st.lists(bound, min_size=2, max_size=2) | st.lists(bound, max_size=3) | junk)
    return draw(st.just({dist: args}) | st.just({dist: args, "uniform": [0, 1]}) | junk)


@st.composite
def random_block(draw):
    names = draw(st.lists(field_names_st, max_size=3, unique_by=lambda n: (type(n), n)))
    block = {
        "num_samples": draw(st.integers(-1, 12) | ints | junk),
        "seed": draw(st.integers(-1, 5) | ints | junk),
        "axes": {name: draw(distribution(name)) for name in names} if draw(st.booleans()) or names else draw(junk),
    }
    keys = draw(st.lists(st.sampled_from(list(RANDOM_KEYS) + ["sed", "samples"]), max_size=4, unique=True))
    return {k: block.get(k, 1) for k in keys}


def env_list():
    return st.lists(st.sampled_from(ENVS), min_size=0, max_size=3) | st.lists(
        st.sampled_from(ENVS[:3]), min_size=1, max_size=2, unique=True
    )


TOP = {
    "name": texts | junk,
    "description": texts | junk,
    "task": st.sampled_from(["ppo", "ppo", "rlhf", "rlhff", "PPO"]) | junk,
    "base": field_map() | junk,
    "envs": env_list() | junk,
    "env_base": st.dictionaries(st.sampled_from(ENVS) | junk_keys, field_map(max_size=2) | junk, max_size=2) | junk,
    "seeds": st.integers(-1, 6) | st.lists(st.integers(-1, 10), max_size=4) | st.lists(ints, max_size=3) | ints | junk,
    "grid": axis_map() | junk,
    "zip": axis_map() | junk,
    "random": random_block() | junk,
    "pretrain": st.fixed_dictionaries({}, optional={"seed": ints, "per_setting": st.booleans() | junk, "sed": junk})
    | junk,
    "log_every": st.integers(-1, 5) | ints | junk,
}


@st.composite
def spec_objects(draw):
    """A spec-shaped object: some of the top-level keys with values near and far from valid, maybe junk keys."""
    spec = draw(st.fixed_dictionaries({}, optional=TOP))
    if draw(st.integers(0, 4)) == 0:
        spec.update(draw(st.dictionaries(junk_keys, junk, max_size=2)))
    return draw(st.just(spec) | st.just(spec) | st.just(spec) | junk)


TOKENS = [
    "grid:",
    "base:",
    "zip:",
    "random:",
    "seeds:",
    "envs:",
    "task:",
    "env_base:",
    "clip_eps:",
    "lr:",
    "num_samples:",
    "axes:",
    "uniform:",
    "choice:",
    "\n",
    "\n  ",
    "\n    ",
    " ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "0.1",
    "1e-3",
    "-1",
    "10000000000000000000000",
    ".nan",
    ".inf",
    "'",
    '"',
    "|",
    ">",
    "#",
    "&a ",
    "*a",
    "? ",
    "!!binary ",
    "!!timestamp 2001-13-45",
    "!!python/name:os.system",
    "<<: ",
    "---",
    "...",
    "%YAML 1.2",
    "\t",
    "\x00",
    "\ufeff",
    "CartPole-v1",
    "rlhf",
    "true",
    "null",
]
raw_texts = st.one_of(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join), st.text(max_size=60))


def _load(path: Path, text: str):
    path.write_text(text, encoding="utf-8", errors="surrogatepass")  # a lone surrogate: bytes that are not UTF-8
    return load_spec(path)


def check_file_spec(test: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, battery.watching():
        path = Path(tmp) / "spec.yaml"
        try:
            spec = _load(path, text)
        except ConfigError as error:
            message = str(error)
            battery.check_message(message)
            assert message.startswith(f"{path}"), f"the message does not start with the file: {message!r}"
            try:
                data, lines = parse_yaml(text, str(path))
            except ConfigError:
                data, lines = None, {}
            if lines and data is not None:  # the spec has lines: the message names one
                assert message.startswith(f"{path}, line "), f"no line in {message!r}"
            battery.count(test, "refused")
            return
        assert isinstance(spec, SweepSpec) and spec.settings
        battery.count(test, "loaded")


@battery.battery_settings(max_examples=500)
@given(spec_objects())
def test_spec_shaped_yaml_loads_or_gives_a_spec_error_naming_file_and_line(spec):
    check_file_spec("spec battery: spec-shaped YAML", yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))


@battery.battery_settings(max_examples=300)
@given(raw_texts)
def test_raw_text_loads_or_gives_a_spec_error(text):
    check_file_spec("spec battery: raw text", text)


python_junk = st.recursive(
    st.one_of(
        scalars,
        st.binary(max_size=4),
        st.sampled_from([np.float32(0.1), np.int64(3), np.float64("nan"), np.bool_(True)]),
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(junk_keys, inner, max_size=3)
    ),
    max_leaves=10,
)


@battery.battery_settings(max_examples=200)
@given(st.fixed_dictionaries({}, optional={**TOP, "grid": axis_map() | python_junk, "base": field_map() | python_junk}))
def test_python_dicts_load_or_give_a_spec_error(spec):
    with battery.watching():
        try:
            from_dict(spec)
        except ConfigError as error:
            battery.check_message(str(error))
            assert str(error).startswith("<spec>"), str(error)
            battery.count("spec battery: Python dicts (from_dict)", "refused")
            return
        battery.count("spec battery: Python dicts (from_dict)", "loaded")


@pytest.mark.parametrize("text", ["", "# nothing\n", "---\n"])
def test_an_empty_spec_says_so(text, tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="the spec is empty"):
        load_spec(path)
