"""vmap_runs: jax.vmap over runs, and over a single run the unbatched function (same results, faster on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.rl.train import train
from ppo_jax.vmap_runs import vmap_runs


def _affine(shared, x):
    return {"y": shared["a"] * x["v"] + shared["b"], "n": 3, "shape": jnp.asarray(x["v"].ndim)}


@pytest.mark.parametrize("runs", [1, 3])
def test_same_outputs_as_vmap_with_the_run_axis_first(runs):
    shared = {"a": jnp.float32(2.0), "b": jnp.arange(4, dtype=jnp.float32)}
    xs = {"v": jnp.arange(runs * 4, dtype=jnp.float32).reshape(runs, 4)}
    got = jax.jit(vmap_runs(_affine, in_axes=(None, 0)))(shared, xs)
    want = jax.jit(jax.vmap(_affine, in_axes=(None, 0)))(shared, xs)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    # Each run's function saw one run's arguments: a vector per run, not a batch.
    np.testing.assert_array_equal(got["shape"], np.ones(runs))
    np.testing.assert_array_equal(got["y"], 2.0 * np.arange(runs * 4).reshape(runs, 4) + np.arange(4))


def test_one_run_is_called_unbatched():
    seen = []

    def record(x):
        seen.append((x.shape, isinstance(x, jax.core.Tracer)))  # called eagerly: a tracer only under vmap
        return x.sum()

    out = vmap_runs(record, in_axes=(0,))(jnp.ones((1, 5)))
    assert seen == [((5,), False)] and out.shape == (1,) and float(out[0]) == 5.0
    seen.clear()
    out = vmap_runs(record, in_axes=(0,))(jnp.ones((2, 5)))
    assert seen == [((5,), True)] and out.shape == (2,)


@pytest.mark.parametrize("in_axes", [(None, None), (1, 0), (0, -1)])
def test_in_axes_must_map_leading_axes(in_axes):
    with pytest.raises(ValueError, match="in_axes"):
        vmap_runs(_affine, in_axes=in_axes)


def test_one_training_run_matches_the_vmapped_program_to_float_tolerance():
    """Today's program (jax.vmap over one seed) and the unbatched one: kernels differ, numbers agree."""
    cfg = PPOConfig(env="CartPole-v1", total_timesteps=2 * 512)
    keys = jax.random.split(jax.random.key(3), 1)
    one = jax.jit(vmap_runs(lambda c, k: train(c, k).metrics, in_axes=(None, 0)))(cfg, keys)
    vmapped = jax.jit(jax.vmap(lambda c, k: train(c, k).metrics, in_axes=(None, 0)))(cfg, keys)
    assert set(one) == set(vmapped)
    for name in one:
        assert one[name].shape == vmapped[name].shape == (1, cfg.num_updates), name
        np.testing.assert_allclose(one[name], vmapped[name], rtol=2e-3, atol=1e-6, err_msg=name)
