"""What the bad-input battery shares (tests/*/test_*_battery.py; not a test module itself).

The battery feeds Hypothesis-generated junk to the spec parser, the command line and the report reader, and
asserts the project rule: every input is either accepted or refused with a ``ConfigError`` (``SpecError``,
``ReportError``) whose one-line message names the file; never another exception, never a compilation.

* ``CASES`` counts the generated cases per test and outcome; ``tests/conftest.py`` prints it in the terminal
  summary (a "bad-input battery" section, shown by plain ``pytest -q``).
* ``COMPILES`` records every JAX compilation event (tracing, lowering, backend compile) while ``watching()``:
  a battery test asserts it stays empty, so nothing it feeds reaches a compiled program.
* ``ReachedTraining`` is what the batteries patch the first step of training / sweeping / compiling to raise:
  input that gets that far was accepted.
"""

from __future__ import annotations

import contextlib
import io
import os
import traceback
from collections import Counter, defaultdict
from pathlib import Path

import jax
from hypothesis import HealthCheck, settings

CASES: dict[str, Counter] = defaultdict(Counter)
COMPILES: list[str] = []
_watching = False

SETTINGS = dict(
    deadline=None,
    derandomize=True,  # the same cases on every run: CI is deterministic
    database=None,  # nothing written to .hypothesis/
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def battery_settings(max_examples: int):
    """Deterministic Hypothesis settings; ``PPO_JAX_BATTERY_SCALE=10`` runs 10x the cases (a deeper local search),
    ``PPO_JAX_BATTERY_RANDOM=1`` fresh random ones instead of the fixed sequence."""
    scale = float(os.environ.get("PPO_JAX_BATTERY_SCALE", "1"))
    fixed = {**SETTINGS, "derandomize": not os.environ.get("PPO_JAX_BATTERY_RANDOM")}
    return settings(max_examples=max(1, round(max_examples * scale)), **fixed)


class ReachedTraining(Exception):  # noqa: N818 -- a signal, not an error
    """Raised by a patched entry point: the input was accepted and would now train, sweep or compile."""


def count(test: str, outcome: str) -> None:
    CASES[test][outcome] += 1


def _on_event(event: str, *args, **kwargs) -> None:
    if _watching and event.startswith("/jax/core/compile/backend_compile"):
        frames = [f for f in traceback.extract_stack() if "/jax/" not in f.filename and "battery.py" not in f.filename]
        COMPILES.append(f"{event} from " + " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[::-1][:6]))


jax.monitoring.register_event_duration_secs_listener(_on_event)
jax.monitoring.register_event_listener(_on_event)


WARM_ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0", "brax/ant")
"""The valid env ids the batteries use. Validating an env builds it once (``ppo_jax.rl.envs.make_env``, cached),
and gymnax's constructors run a few eager jnp ops: ``warm_up`` does that before anything is watched."""


def warm_up() -> None:
    """Import and build what validation imports and builds, outside ``watching`` (see ``WARM_ENVS``)."""
    from ppo_jax.sweep.spec import from_dict

    from_dict({"task": "rlhf"})
    for env in WARM_ENVS:
        with contextlib.suppress(Exception):  # brax/ant without the optional Brax extra
            from_dict({"envs": [env]})


@contextlib.contextmanager
def watching():
    """Record JAX compilation events inside the block (in ``COMPILES``)."""
    global _watching
    _watching, before = True, len(COMPILES)
    try:
        yield
    finally:
        _watching = False
    assert len(COMPILES) == before, f"a JAX program was traced or compiled: {COMPILES[before:]}"


@contextlib.contextmanager
def captured():
    """stdout and stderr of the block, as two StringIO (Hypothesis examples cannot use pytest's capsys)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def check_message(message: str, *, names: str | None = None) -> None:
    """A refusal's message: one line, not empty, not a dump of the input, naming ``names`` if given."""
    assert message.strip(), "an empty error message"
    assert "\n" not in message.strip(), f"a message over several lines: {message!r}"
    assert "Traceback" not in message, message
    assert len(message) < 1500, f"a message of {len(message)} characters: {message[:300]!r}..."
    if names is not None:
        assert names in message, f"the message does not name {names}: {message!r}"
