"""Orbax checkpoints of a run's state: exact round trip (PRNG keys included), the newest N kept, corrupt ones set aside."""

from __future__ import annotations

import errno
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.storage.checkpoints import Checkpoints


class State(NamedTuple):
    params: dict
    step: jax.Array
    key: jax.Array


def state(value: float) -> State:
    """A carry like a run's: float and int leaves, a nested dict, typed PRNG keys with a leading run axis."""
    keys = jnp.stack([jax.random.key(s) for s in (7, 8)])
    params = {
        "w": jnp.full((2, 3), value, jnp.float32) + jnp.arange(3) * 1e-7,
        "b": {"c": jnp.float32([value, -value])},
    }
    return State(params, jnp.int32([int(value), 5]), jax.vmap(lambda k: jax.random.fold_in(k, int(value)))(keys))


def assert_same(a: State, b: State) -> None:
    for x, y in zip(jax.tree.leaves(a._replace(key=None)), jax.tree.leaves(b._replace(key=None)), strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(jax.random.key_data(a.key), jax.random.key_data(b.key))
    # the restored keys are keys, and draw what the originals draw
    np.testing.assert_array_equal(jax.vmap(jax.random.normal)(a.key), jax.vmap(jax.random.normal)(b.key))


def test_round_trip_is_exact_and_keeps_the_newest(tmp_path):
    checkpoints = Checkpoints(tmp_path / "checkpoints", keep=2)
    for update in (10, 20, 30):
        checkpoints.save(update, state(float(update) + 0.1), {"metrics_bytes": 100 * update})
    assert checkpoints.updates() == [20, 30]
    restored, meta = checkpoints.restore(like=state(0.0))
    assert meta == {"metrics_bytes": 3000, "update": 30}
    assert_same(restored, state(30.1))
    checkpoints.close()


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_with_a_warning(tmp_path):
    checkpoints = Checkpoints(tmp_path / "checkpoints", keep=3)
    for update in (1, 2):
        checkpoints.save(update, state(float(update)), {})
    checkpoints.wait()  # written asynchronously
    newest = tmp_path / "checkpoints" / "2"
    for path in (newest / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x00garbage")
    with pytest.warns(UserWarning, match=r"checkpoint .*/checkpoints/2 cannot be read .*; moved it to .*/corrupt/"):
        restored, meta = checkpoints.restore(like=state(0.0))
    assert meta["update"] == 1
    assert_same(restored, state(1.0))
    [moved] = (tmp_path / "corrupt").iterdir()  # kept, not deleted
    assert moved.name.startswith("checkpoints-2.") and (moved / "state").is_dir()
    assert checkpoints.updates() == [1]
    for path in (tmp_path / "checkpoints" / "1" / "state").rglob("*"):
        if path.is_file():
            path.unlink()
    with (
        pytest.warns(UserWarning),
        pytest.raises(ConfigError, match="no readable checkpoint .* start it over with --force"),
    ):
        checkpoints.restore(like=state(0.0))
    assert len(list((tmp_path / "corrupt").iterdir())) == 2


def test_a_state_of_another_shape_is_refused(tmp_path):
    checkpoints = Checkpoints(tmp_path / "checkpoints")
    checkpoints.save(1, state(1.0), {})
    checkpoints.wait()
    other = state(0.0)._replace(step=jnp.int32([1, 2, 3]))
    with pytest.warns(UserWarning, match="cannot be read"), pytest.raises(ConfigError):
        checkpoints.restore(like=other)


def test_a_write_orbax_failed_in_its_threads_is_an_os_error_naming_the_directory(tmp_path, monkeypatch):
    checkpoints = Checkpoints(tmp_path / "checkpoints")
    checkpoints.save(1, state(1.0), {})
    checkpoints.wait()

    def full_disk(*args, **kwargs):  # how tensorstore reports it, raised where Orbax waits for its threads
        raise ValueError(
            "RESOURCE_EXHAUSTED: Error writing local file ...: No space left on device [os_error_code='28']"
        )

    monkeypatch.setattr(checkpoints._manager, "wait_until_finished", full_disk)
    with pytest.raises(
        OSError, match=r"could not write a checkpoint in .*/checkpoints: No space left on device"
    ) as error:
        checkpoints.save(2, state(2.0), {})
    assert error.value.errno == errno.ENOSPC and "continue with --resume" in str(error.value)
    monkeypatch.undo()
    assert checkpoints.updates() == [1]  # what was written before is intact
    checkpoints.close()
