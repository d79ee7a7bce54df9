"""Memory switches of the LM update: micro-batches take the minibatch's step under every loss aggregation and lower
the compiled program's memory; what cannot be split is refused; the memory estimate refuses a run over its budget
before pretraining (exit 2, with the estimate), in a run and in a sweep.

The exactness tests compare gradient accumulation with the one-minibatch step, whose loss the tests of
token_loss / loss_aggregation check against NumPy; SGD with learning rate 1 makes the parameter change the
gradient itself. The batch has responses of unequal length and a dropped row, so a micro-batch's own token mean
(or present-row count) differs from the minibatch's: a naive accumulation fails it (checked).
"""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from ppo_jax.cli.train import Lm, run_lm
from ppo_jax.errors import ConfigError, SpecError
from ppo_jax.lm import problems
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.models import init_params, make_models
from ppo_jax.lm.task import LM
from ppo_jax.lm.token_loss import SequenceBatch, minibatch_totals, sequence_loss
from ppo_jax.lm.validation import validate
from ppo_jax.minibatch_epochs import minibatch_epochs

CFG = LmConfig(
    model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2, num_prompts=2, group_size=4,
    num_minibatches=1, update_epochs=1, sft_steps=0, eval_prompts=0, norm_adv=True, kl_mode="loss",
)  # fmt: skip


def random_batch(cfg, seed: int = 0) -> SequenceBatch:
    """8 sequences; response lengths 1..L in a shuffled order, row 3 dropped (no response token)."""
    rng = np.random.default_rng(seed)
    n, prompt, length = cfg.num_sequences, problems.prompt_len(cfg), problems.response_len(cfg)
    vocab = problems.vocab_size(cfg)
    lengths = rng.permutation(np.arange(n) % length + 1)
    lengths[3] = 0
    mask = np.arange(length)[None, :] < lengths[:, None]
    log_prob = np.log(rng.uniform(0.05, 0.9, (n, length)))
    return SequenceBatch(
        sequence=jnp.asarray(rng.integers(2, vocab, (n, prompt + length)), jnp.int32),
        mask=jnp.asarray(mask),
        log_prob=jnp.asarray(log_prob, jnp.float32),
        ref_log_prob=jnp.asarray(log_prob + rng.normal(0, 0.3, (n, length)), jnp.float32),
        value=jnp.zeros((n, length), jnp.float32),
        advantage=jnp.asarray(rng.normal(0.5, 1.0, (n, length)), jnp.float32),
        target=jnp.zeros((n, length), jnp.float32),
        cov_key=jnp.zeros((n,), jnp.uint32),
    )


def sgd_step(cfg, batch, micro_batches, *, with_totals=True):
    """One minibatch step (SGD, learning rate 1): the parameters' change is minus the (accumulated) gradient."""
    policy = make_models(cfg).policy
    params = {"actor": init_params(policy, jax.random.key(0))}
    state = TrainState.create(apply_fn=None, params=params, tx=optax.sgd(1.0))
    beta = jnp.float32(0.1)
    if with_totals:
        loss = lambda p, mb, totals: sequence_loss(p, policy, None, mb, cfg, beta, totals)  # noqa: E731
        totals = lambda mb: minibatch_totals(mb, micro_batches)  # noqa: E731
    else:  # each micro-batch's own token means and row counts: not the minibatch's
        loss, totals = (lambda p, mb: sequence_loss(p, policy, None, mb, cfg, beta)), None
    new, metrics = jax.jit(
        lambda s, b: minibatch_epochs(
            s, b, loss, jax.random.key(1), num_minibatches=1, update_epochs=1, micro_batches=micro_batches,
            totals=totals,
        )
    )(state, batch)  # fmt: skip
    change = jax.tree.map(lambda a, b: np.asarray(a) - np.asarray(b), new.params, params)
    return np.concatenate([x.ravel() for x in jax.tree.leaves(change)]), jax.device_get(metrics)


# The two aggregations whose denominators span micro-batches (the minibatch's token count, its present rows); a row
# mean and a constant-normalised sum are exact per row (test_minibatch_epochs.py::test_micro_batches_of_a_row_mean).
@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-sum"])
def test_micro_batches_take_the_minibatch_step_where_the_denominators_span_them(loss_agg):
    cfg = CFG.replace(loss_agg=loss_agg)
    batch = random_batch(cfg)
    whole, whole_metrics = sgd_step(cfg, batch, 1)
    scale = np.abs(whole).max()
    assert scale > 1e-3  # a real step
    accumulated, metrics = sgd_step(cfg, batch, 4)  # micro-batches of 2 rows
    # float32: sums over micro-batches in another order; 1e-5 of the largest gradient entry
    np.testing.assert_allclose(accumulated, whole, rtol=0, atol=1e-5 * scale)
    for name in ("loss", "policy_loss", "kl_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"):
        np.testing.assert_allclose(metrics[name], whole_metrics[name], rtol=1e-5, atol=1e-7, err_msg=name)
    naive, _ = sgd_step(cfg, batch, 4, with_totals=False)  # token counts, resp. present rows, differ by micro-batch
    assert np.abs(naive - whole).max() > 1e-3 * scale  # micro-batches' own denominators give another step


def test_micro_batches_lower_the_update_programs_memory():
    cfg = CFG.replace(model_dim=64, num_layers=4, num_heads=4, num_prompts=4, group_size=8, digits=3)
    batch = random_batch(cfg)

    def temporaries(m):
        policy = make_models(cfg).policy
        params = {"actor": jax.eval_shape(lambda: init_params(policy, jax.random.key(0)))}
        state = jax.eval_shape(lambda p: TrainState.create(apply_fn=None, params=p, tx=optax.sgd(1.0)), params)
        fn = jax.jit(
            lambda s, b: minibatch_epochs(
                s, b, lambda p, mb, t: sequence_loss(p, policy, None, mb, cfg, 0.1, t), jax.random.key(1),
                num_minibatches=1, update_epochs=1, micro_batches=m, totals=lambda mb: minibatch_totals(mb, m),
            )
        )  # fmt: skip
        return fn.lower(state, batch).compile().memory_analysis().temp_size_in_bytes

    one, four = temporaries(1), temporaries(4)
    assert four < 0.6 * one, (one, four)


def test_what_micro_batches_cannot_split_is_refused():
    with pytest.raises(ConfigError, match="micro_batches=3 does not divide the minibatch of 8 sequences"):
        validate(CFG.replace(micro_batches=3))
    with pytest.raises(ConfigError, match="cov_reg='clip_cov' ranks the whole minibatch"):
        validate(CFG.replace(micro_batches=2, cov_reg="clip_cov"))
    with pytest.raises(ConfigError, match="top_entropy_quantile=0.2 keeps the top share"):
        validate(CFG.replace(micro_batches=2, top_entropy_quantile=0.2))
    validate(CFG.replace(micro_batches=8))  # one sequence each


def test_dtypes_and_remat_are_checked():
    with pytest.raises(ConfigError, match="compute_dtype='float16' is not supported; choose one of float32, bfloat16"):
        validate(CFG.replace(compute_dtype="float16"))
    with pytest.raises(ConfigError, match="remat apply to the Llama-family models only.*model 'gru'"):
        validate(LmConfig(model="gru", remat=True))
    with pytest.raises(ConfigError, match="param_dtype apply to the Llama-family models only.*'transformer'"):
        validate(LmConfig(model="transformer", param_dtype="bfloat16"))
    validate(CFG.replace(remat=True, compute_dtype="bfloat16"))


def test_a_bad_memory_budget_is_refused_before_anything_compiles():
    with pytest.raises(ConfigError, match="--memory-budget takes a size like 8GiB, 500MB or 2e9"):
        run_lm(Lm(memory_budget="lots", config=CFG), ["ppo-jax", "lm", "--memory-budget", "lots"])
    with pytest.raises(ConfigError, match="--memory-budget takes a size"):
        run_lm(Lm(memory_budget="-3GB", config=CFG), ["ppo-jax", "lm", "--memory-budget", "-3GB"])


def test_a_run_over_the_budget_is_refused_with_its_estimate_before_pretraining(tmp_path):
    out = tmp_path / "run"
    argv = [
        sys.executable, "-m", "ppo_jax.cli", "lm", "--model", "decoder", "--model-dim", "16", "--num-layers", "1",
        "--num-heads", "2", "--digits", "1", "--num-prompts", "2", "--group-size", "4", "--num-updates", "1",
        "--sft-steps", "5", "--eval-prompts", "0", "--no-progress", "--memory-budget", "10KB", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    assert "error: one update of 1 run needs an estimated" in done.stderr
    assert "over the memory budget of 9.8 KiB" in done.stderr and "--remat" in done.stderr
    assert "memory: ~" in done.stderr + done.stdout  # the estimate is printed
    assert "pretrain (seed" not in done.stderr + done.stdout  # refused before pretraining
    assert not (out / "config.json").exists()  # nor was a run directory written


def test_a_sweep_group_over_the_budget_is_refused_with_what_to_try():
    from ppo_jax.sweep.program import Shared, device_mesh, fit_program

    cfg = validate(LmConfig(model="gru", digits=1, embed_dim=8, hidden_dim=8, num_prompts=2, group_size=2,
                            num_updates=1, sft_steps=0, eval_prompts=0))  # fmt: skip
    with pytest.raises(SpecError, match=r"pair\(s\) per device need about .* over the memory budget of 1000 B") as e:
        fit_program(LM, cfg, 1, 1000, device_mesh(), 1, Shared("once"))
    assert "micro_batches" in str(e.value) and "remat" in str(e.value)
