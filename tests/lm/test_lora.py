"""LoRA (Hu et al. 2022) on the decoder family: a fresh adapter is the base, the projection against NumPy, the merged
model against base + adapters, training reaches only the adapters, the ConfigErrors, and the merged export."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ppo_jax.cli import main
from ppo_jax.errors import ConfigError
from ppo_jax.lm import decoder, lora
from ppo_jax.lm.checkpoints import load_checkpoint
from ppo_jax.lm.config import LmConfig
from ppo_jax.lm.decoder_config import DecoderConfig
from ppo_jax.lm.models import make_models
from ppo_jax.lm.rope import RopeParams
from ppo_jax.lm.train import init, pretrain, step
from ppo_jax.lm.validation import validate
from ppo_jax.storage.run_dir import load_params

FAST = {"xla_backend_optimization_level": 0}

# Grouped-query attention, q/k/v biases and an o bias: every projection path of the family.
CONFIG = DecoderConfig(
    model_type="qwen2",
    vocab_size=40,
    hidden_size=24,
    intermediate_size=40,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=6,
    max_position_embeddings=32,
    rope=RopeParams("default", 10000.0),
    qkv_bias=True,
    o_bias=True,
    eos_token_ids=(1,),
    pad_token_id=0,
)
MODEL = decoder.Decoder(CONFIG)
TOKENS = jnp.asarray(np.random.default_rng(0).integers(2, 40, (3, 9)), jnp.int32).at[1, :3].set(0)  # left-padded
logits = jax.jit(decoder.run, static_argnums=0)


def random_adapters(rank: int, key) -> dict:
    """Adapters on every target with A and B both random and nonzero, so each term matters."""
    adapters = lora.init_adapters(MODEL, lora.TARGETS, rank, key)
    return {
        name: {"a": ab["a"], "b": 0.2 * jax.random.normal(jax.random.fold_in(key, i), ab["b"].shape)}
        for i, (name, ab) in enumerate(adapters.items())
    }


def test_a_fresh_adapter_leaves_the_logits_and_the_samples_exactly_the_bases():
    base = decoder.init_params(MODEL, jax.random.key(0))
    adapters = lora.init_adapters(MODEL, lora.TARGETS, 4, jax.random.key(1))
    assert all(np.abs(np.asarray(ab["a"])).max() > 0 and not np.asarray(ab["b"]).any() for ab in adapters.values())
    adapted = lora.attach(base, adapters, 16.0 / 4)
    np.testing.assert_array_equal(np.asarray(logits(MODEL, adapted, TOKENS)), np.asarray(logits(MODEL, base, TOKENS)))
    generate = jax.jit(decoder.generate, static_argnums=(0, 4))
    np.testing.assert_array_equal(
        np.asarray(generate(MODEL, adapted, jax.random.key(2), TOKENS, 6)),
        np.asarray(generate(MODEL, base, jax.random.key(2), TOKENS, 6)),
    )


@pytest.mark.parametrize("name", lora.TARGETS)
def test_each_projection_is_x_w_plus_bias_plus_alpha_over_r_x_a_b(name):
    """``decoder._linear`` of one layer of ``attach``'s output against float64 NumPy, A and B random."""
    rank, alpha = 3, 6.0
    base = decoder.init_params(MODEL, jax.random.key(0))
    adapters = random_adapters(rank, jax.random.key(3))
    layers = lora.attach(base, adapters, alpha / rank)["layers"]
    layer = jax.tree.map(lambda leaf: leaf[1], layers)  # the second layer
    d_in = base["layers"][name].shape[1]
    h = np.random.default_rng(1).normal(size=(2, 5, d_in)).astype(np.float32)
    got = np.asarray(decoder._linear(jnp.asarray(h), layer, name))

    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    w, a, b = f64(base["layers"][name][1]), f64(adapters[name]["a"][1]), f64(adapters[name]["b"][1])
    want = h @ w + (alpha / rank) * (h @ a) @ b
    if f"{name}_bias" in base["layers"]:
        want = want + f64(base["layers"][f"{name}_bias"][1])
    assert np.abs((alpha / rank) * (h @ a) @ b).max() > 0.1  # the adapter's term is not negligible
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_merged_weights_give_the_logits_of_base_plus_adapters():
    rank, alpha = 4, 8.0
    base = decoder.init_params(MODEL, jax.random.key(0))
    adapters = random_adapters(rank, jax.random.key(4))
    adapted = np.asarray(logits(MODEL, lora.attach(base, adapters, alpha / rank), TOKENS))
    merged = lora.merge(base, adapters, alpha / rank)
    assert set(merged["layers"]) == set(base["layers"])  # a plain model: nothing but the base's names
    assert np.abs(adapted - np.asarray(logits(MODEL, base, TOKENS))).max() > 0.1  # the adapters change the model
    np.testing.assert_allclose(np.asarray(logits(MODEL, merged, TOKENS)), adapted, rtol=0, atol=2e-5)


# A tiny GRPO run on 1-digit addition with the lab's decoder: a critic (gae) too, to check it stays a full model.
TINY = LmConfig(
    model="decoder", digits=1, model_dim=16, num_layers=1, num_heads=2, num_prompts=4, group_size=4,
    num_minibatches=2, update_epochs=1, sft_steps=20, sft_eval_every=20, pretrain_batch=16, lora_rank=2,
    lora_targets="q,v,down", lora_alpha=4.0, eval_prompts=0,
)  # fmt: skip


def test_training_reaches_only_the_adapters_and_the_base_stays_the_sft_model():
    pre = jax.jit(pretrain, compiler_options=FAST)(TINY, jax.random.key(0))
    sft_before = jax.tree.map(np.array, pre.sft)
    cfg = TINY.replace(advantage="gae")
    carry = init(cfg, jax.random.key(1), pre)
    shapes = lambda tree: jax.tree.map(np.shape, tree)  # noqa: E731

    adapters = carry.train_state.params["actor"]
    layers = pre.sft["layers"]
    want = {
        name: {"a": (1, *layers[name].shape[1:2], 2), "b": (1, 2, layers[name].shape[2])} for name in ("q", "v", "down")
    }
    assert shapes(adapters) == want
    critic = carry.train_state.params["critic"]
    assert shapes(critic) == shapes(decoder.init_params(make_models(cfg).scalar, jax.random.key(0)))
    # Adam's moments are the trainable parameters' only: the adapters and the critic, never the base.
    mu = optax.tree_utils.tree_get(carry.train_state.opt_state, "mu")
    assert shapes(mu) == shapes(carry.train_state.params)

    run_steps = jax.jit(
        lambda c, p: jax.lax.fori_loop(0, 3, lambda u, c: step(cfg, c, u, p)[0], c), compiler_options=FAST
    )
    after = run_steps(carry, pre)
    trained = after.train_state.params["actor"]
    assert shapes(trained) == want
    for name in want:  # the gradient reached every adapter: B left zero, A moved
        assert np.abs(np.asarray(trained[name]["b"])).max() > 0
        assert np.abs(np.asarray(trained[name]["a"]) - np.asarray(adapters[name]["a"])).max() > 0
    jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.asarray, pre.sft), sft_before)


@pytest.mark.parametrize(
    "change, fragment",
    [
        (dict(model="transformer"), "not one; use --model decoder"),
        (dict(model="gru"), "not one; use --model decoder"),
        (dict(lora_targets="q,attn"), "attn is not one"),
        (dict(lora_targets="q,q"), "give distinct names"),
        (dict(lora_targets=""), "give distinct names"),
        (dict(lora_rank=-1), "lora_rank must be >= 0"),
        (dict(lora_rank=17), "smallest side of the targeted kernels (16)"),  # q is [16, 16]
        (dict(lora_alpha=0.0), "lora_alpha must be > 0"),
    ],
)
def test_bad_lora_settings_are_config_errors(change, fragment):
    with pytest.raises(ConfigError) as error:
        validate(TINY.replace(**{"lora_targets": "q", **change}))
    assert fragment in str(error.value)


def test_a_rank_up_to_the_smallest_targeted_side_is_accepted():
    validate(TINY.replace(lora_rank=16, lora_targets="q,gate"))  # q [16, 16], gate [16, 42]
    with pytest.raises(ConfigError, match="smallest side"):
        validate(TINY.replace(lora_rank=17, lora_targets="q,gate"))


def test_alpha_and_targets_are_inert_without_a_rank():
    inert = TINY.replace(lora_rank=0).inert_fields()
    assert "lora_alpha" in inert and "lora_targets" in inert
    assert "lora_alpha" not in TINY.inert_fields() and "lora_targets" not in TINY.inert_fields()


def test_a_lora_run_saves_the_merged_policy_which_loads_with_the_logits_of_base_plus_adapters(tmp_path):
    out = tmp_path / "run"
    args = ["lm", "--model", "decoder", "--digits", "1", "--model-dim", "16", "--num-layers", "1", "--num-heads", "2"]
    args += ["--sft-steps", "20", "--sft-eval-every", "20", "--pretrain-batch", "16", "--preset", "grpo"]
    args += ["--num-updates", "2", "--num-prompts", "4", "--group-size", "4", "--eval-prompts", "8"]
    args += ["--lora-rank", "2", "--lora-alpha", "4", "--lora-targets", "q,o,up", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    stored = load_params(out)
    adapters = jax.tree.map(lambda leaf: leaf[0], stored["actor"])  # seed 0
    assert set(adapters) == {"q", "o", "up"} and set(adapters["q"]) == {"a", "b"}
    base = stored["reference"]
    saved = load_checkpoint(out / "policy" / "seed_0")
    assert np.abs(np.asarray(saved.params["layers"]["q"]) - base["layers"]["q"]).max() > 0  # merged, not the base
    np.testing.assert_array_equal(np.asarray(saved.params["layers"]["k"]), base["layers"]["k"])  # not targeted
    tokens = np.array([[2, 3, 4, 5], [0, 0, 6, 7]], np.int32)
    mask = (np.arange(4) >= np.array([[0], [2]])).astype(np.int32)
    model = decoder.Decoder(saved.config)
    adapted = decoder.logits(model, lora.attach(base, adapters, 4.0 / 2), tokens, mask)
    np.testing.assert_allclose(
        np.asarray(saved.logits(tokens, mask))[mask == 1], np.asarray(adapted)[mask == 1], atol=2e-5
    )
