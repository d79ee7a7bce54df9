"""Parity with transformers on committed tiny checkpoints (``scripts/make_lm_fixtures.py``), without torch.

Each fixture directory is what ``save_pretrained`` wrote for a random Llama,
Llama-3 (rope scaling), Qwen2 (sharded, q/k/v bias) or Qwen3 (q/k norm) model,
plus ``expected.safetensors``: transformers' logits on a left-padded batch and its
greedy continuations. Those numbers came from torch; the package's come from JAX.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file

from ppo_jax.lm.checkpoints import load_checkpoint, save_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"
NAMES = ("llama", "llama3_scaled", "qwen2", "qwen3")


def expected(name: str) -> dict[str, np.ndarray]:
    return load_file(str(FIXTURES / name / "expected.safetensors"))


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    return request.param, load_checkpoint(FIXTURES / request.param), expected(request.param)


def test_the_fixtures_cover_the_family():
    """Tied and untied heads, a GQA ratio > 1, Llama 3 rope scaling, q/k/v bias, q/k norm, both config formats."""
    configs = {name: load_checkpoint(FIXTURES / name).config for name in NAMES}
    assert {c.tie_word_embeddings for c in configs.values()} == {True, False}
    assert all(c.num_heads // c.num_kv_heads > 1 for c in configs.values())
    assert configs["llama3_scaled"].rope.kind == "llama3"
    assert configs["qwen2"].qkv_bias and configs["qwen3"].qk_norm
    raw = {name: json.loads((FIXTURES / name / "config.json").read_text()) for name in NAMES}
    assert any("rope_parameters" in r for r in raw.values()), "no transformers 5.x config"
    assert any("rope_parameters" not in r and "rope_theta" in r for r in raw.values()), "no transformers 4.x config"
    assert "rope_scaling" in raw["llama3_scaled"]
    assert (FIXTURES / "qwen2" / "model.safetensors.index.json").is_file()


def test_logits_equal_transformers(case):
    name, ck, ref = case
    ours = np.asarray(ck.logits(ref["tokens"], ref["attention_mask"]))
    assert ours.dtype == np.float32 and ours.shape == ref["logits"].shape
    real = ref["attention_mask"] == 1
    np.testing.assert_allclose(ours[real], ref["logits"][real], atol=1e-4, rtol=0, err_msg=name)


def test_left_padding_changes_no_logit_of_a_prompt(case):
    name, ck, ref = case
    row = ref["tokens"][2][ref["attention_mask"][2] == 1]
    alone = np.asarray(ck.logits(row[None], np.ones((1, row.size), np.int32)))[0]
    padded = np.asarray(ck.logits(ref["tokens"], ref["attention_mask"]))[2, -row.size :]
    np.testing.assert_allclose(alone, ref["unpadded_logits_row2"], atol=1e-4, rtol=0, err_msg=name)
    np.testing.assert_allclose(padded, alone, atol=1e-5, rtol=0, err_msg=name)


def test_greedy_generation_equals_transformers_token_for_token(case):
    name, ck, ref = case
    greedy = ref["greedy"]
    ours = np.asarray(ck.generate(ref["tokens"], ref["attention_mask"], 8))
    assert ours.dtype == np.int32 and ours.shape == (3, 8)
    np.testing.assert_array_equal(ours[:, : greedy.shape[1]], greedy, err_msg=name)
    # transformers stops early once every row has ended: the rest is the fill token
    assert (ours[:, greedy.shape[1] :] == ck.config.fill_token_id).all()


def test_tokenizer_round_trips():
    cases = json.loads((FIXTURES / "tokenizer_cases.json").read_text())
    tokenizer = load_checkpoint(FIXTURES / "llama").tokenizer
    assert tokenizer is not None and len(cases) >= 5
    for item in cases:
        assert tokenizer.encode(item["text"]) == item["ids"], item["text"]
        assert tokenizer.decode(item["ids"]) == item["text"]


def test_chat_template_renders_as_transformers():
    cases = json.loads((FIXTURES / "tokenizer_cases.json").read_text())
    (chat,) = [item for item in cases if "chat" in item]
    tokenizer = load_checkpoint(FIXTURES / "llama").tokenizer
    assert tokenizer.render_chat(chat["chat"], add_generation_prompt=False) == chat["text"]
    assert tokenizer.encode(chat["text"]) == chat["ids"]


def test_a_saved_checkpoint_loads_back_with_the_same_logits_and_files(tmp_path):
    ck = load_checkpoint(FIXTURES / "qwen2")
    ref = expected("qwen2")
    saved = save_checkpoint(tmp_path / "out", ck)
    back = load_checkpoint(saved)
    np.testing.assert_array_equal(
        np.asarray(back.logits(ref["tokens"], ref["attention_mask"])),
        np.asarray(ck.logits(ref["tokens"], ref["attention_mask"])),
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (saved / name).read_bytes() == (FIXTURES / "qwen2" / name).read_bytes()


def test_saving_refuses_a_non_empty_directory(tmp_path):
    ck = load_checkpoint(FIXTURES / "llama")
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        save_checkpoint(tmp_path, ck)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_bfloat16_compute_stays_close_to_float32(case):
    """bfloat16 parameters and compute: the per-token KL to the float32 logits is small (MaxText's criterion)."""
    name, _, ref = case
    ck = load_checkpoint(FIXTURES / name, param_dtype="bfloat16")
    assert ck.config.compute_dtype == "bfloat16"
    ours = np.asarray(ck.logits(ref["tokens"], ref["attention_mask"]), np.float64)
    real = ref["attention_mask"] == 1
    log_p = ref["logits"][real] - np.logaddexp.reduce(ref["logits"][real], axis=-1, keepdims=True)
    log_q = ours[real] - np.logaddexp.reduce(ours[real], axis=-1, keepdims=True)
    kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
    assert kl.max() < 5e-3, (name, kl.max())


@pytest.mark.parametrize("name", NAMES)
def test_a_saved_policy_loads_into_transformers_with_equal_logits(tmp_path, name):
    """A trained policy (new parameters) saved here is read by transformers, which computes the same logits."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ck = load_checkpoint(FIXTURES / name)
    rng = np.random.default_rng(0)
    trained = ck.replace(params=jax.tree.map(lambda p: p + 0.05 * rng.standard_normal(p.shape, np.float32), ck.params))
    saved = save_checkpoint(tmp_path / name, trained)
    model = transformers.AutoModelForCausalLM.from_pretrained(saved, attn_implementation="eager").eval()
    ref = expected(name)
    mask = ref["attention_mask"]
    positions = np.where(mask == 1, np.cumsum(mask, -1) - 1, 1)
    with torch.no_grad():
        theirs = model(
            torch.tensor(ref["tokens"], dtype=torch.long),
            attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(positions),
        ).logits.numpy()
    ours = np.asarray(trained.logits(ref["tokens"], mask))
    np.testing.assert_allclose(ours[mask == 1], theirs[mask == 1], atol=1e-4, rtol=0)
    assert np.abs(ours - np.asarray(ck.logits(ref["tokens"], mask))).max() > 1e-2  # the parameters did change
