"""Tiny random Hugging Face decoder checkpoints, with reference outputs, for the JAX Llama/Qwen tests.

Builds four checkpoints with torch + transformers (float32, eager attention, vocabulary 300, width 32,
MLP width 64, 2 layers) and writes each to ``<out>/<name>/``: exactly what ``model.save_pretrained``
and ``tokenizer.save_pretrained`` write, plus ``expected.safetensors`` (reference outputs):

* ``llama``: Llama, tied embeddings (like SmolLM2), 4 heads / 2 KV heads, rope_theta 10000, no scaling.
* ``llama3_scaled``: Llama, untied, 4 heads / 1 KV head, rope_theta 500000, Llama 3 RoPE scaling
  (original_max_position_embeddings 8, so the scaling changes the logits; checked against the same
  weights without scaling).
* ``qwen2``: Qwen2 (q/k/v projections with bias), tied, 4 heads / 2 KV heads, saved in shards
  (``model.safetensors.index.json`` and several ``model-0000i-of-0000n.safetensors``).
* ``qwen3``: Qwen3 (RMSNorm of each head's queries and keys), untied, head_dim 16 (not width / heads),
  4 heads / 2 KV heads.

Config formats: transformers 5 writes RoPE settings as ``rope_parameters`` (``rope_theta`` inside);
published checkpoints (transformers 4) have ``rope_theta`` and ``rope_scaling`` at the top level (and
``torch_dtype`` for ``dtype``). ``llama`` and ``llama3_scaled`` are rewritten into the 4.x format,
``qwen2`` and ``qwen3`` stay in the 5.x format; transformers 5 reads both, and the script checks that
every directory loads back to the logits of the model it was saved from.

Every parameter is overwritten with random values (so that none is left at an identity or zero
initialisation): matrices and embeddings normal with std 0.3 (at 0.1, greedy generation mostly repeats
one token), biases normal with std 0.1, RMSNorm weights (q_norm and k_norm included) 1 + normal with
std 0.1. The tokenizer (the same in every directory) is a byte-level BPE
trained on the inline ``CORPUS`` with the special tokens ``<|endoftext|>`` (0; BOS and padding),
``<|im_start|>`` (1) and ``<|im_end|>`` (2; EOS) and a ChatML chat template; its vocabulary, special
tokens included, is exactly the models' vocab_size (300).

``expected.safetensors`` holds, for a left-padded batch of three prompts of 12, 9 and 5 tokens (random
non-special ids):

* ``tokens`` int32 [3, 12], ``attention_mask`` int32 [3, 12] (0 on the left padding);
* ``logits`` float32 [3, 12, V]: the forward pass with position ids ``cumsum(mask) - 1``, set to 1 on
  the padding (transformers 4's generate; 5 sets 0; either way no logit at a real position changes).
  The logits at padded positions mean nothing (eager attention adds the float32 minimum to every key
  of a padded query, which then attends uniformly to the whole row): compare where the mask is 1;
* ``greedy`` int32 [3, 8]: the 8 new tokens of ``model.generate(do_sample=False)``; a row that emits
  EOS is continued with the pad id (``llama3_scaled`` row 1 and ``qwen3`` row 0 do, the seeds are
  chosen for it). At every step of every unfinished row the top logit beats the second by more than
  1e-3, so float32 rounding cannot flip a token;
* ``unpadded_logits_row2`` float32 [5, V]: the last prompt's logits without padding.

``tokenizer_cases.json`` (in ``<out>``) lists texts with the ids the transformers tokenizer gives them
(the last case adds ``"chat"``, a conversation, and its ``"text"`` is that conversation rendered by the
chat template), for round-trip tests with ``tokenizers``.

Rerun (deterministic: a rerun writes identical files; transformers 5 is required):

    pip install -e ".[fixtures]" && python scripts/make_lm_fixtures.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 300
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = (
    "The quick brown fox jumps over the lazy dog. A policy is trained to maximise the expected return, "
    "and the value function estimates how much reward is still to come from each state.",
    "Language models read a prompt one token at a time and then write the answer. When the answer is "
    "right, the reward is one; when it is wrong, the reward is zero. The model learns from both.",
    "12+35=47\n8+9=17\n100+250=350\n64+64=128\n7+5=12\n999+1=1000\n3+4=7\n21+21=42\n",
    "Add the numbers: 45+38=83, then 83+17=100. Sort the list 9 3 7 1 into 1 3 7 9.",
)
TOKENIZER_TEXTS = (
    "hello world",
    "The quick brown fox.",
    "12+35=47",
    "  two  spaces   and three",
    "first line\nsecond line",
    "a naïve café",
    "<|im_start|>user<|im_end|>",
    "999+1=1000\n",
)
CHAT = ({"role": "user", "content": "What is 12+35?"}, {"role": "assistant", "content": "12+35=47"})
LENGTHS = (12, 9, 5)
MAX_NEW_TOKENS = 8
WEIGHT_STD = 0.3
SMALL_STD = 0.1
"""Standard deviations of the random matrices and embeddings; of the biases and of the RMSNorm weights around 1."""
MARGIN = 1e-3
ARCH = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
)
"""Shared by all four models."""


@dataclasses.dataclass(frozen=True)
class Fixture:
    """One checkpoint: its config, the seed of its weights and prompts, how it is saved."""

    name: str
    config_class: type[transformers.PreTrainedConfig]
    config: dict[str, Any]
    seed: int
    legacy_config: bool = False
    """Rewrite config.json into the 4.x format (rope_theta and rope_scaling at the top level)."""
    max_shard_size: str | None = None
    greedy_eos: bool = False
    """Some greedy row emits EOS before its last step (asserted; the seed is chosen for it)."""


FIXTURES = (
    Fixture(
        "llama",
        transformers.LlamaConfig,
        dict(
            num_key_value_heads=2,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1e4},
        ),
        seed=2,
        legacy_config=True,
    ),
    Fixture(
        "llama3_scaled",
        transformers.LlamaConfig,
        dict(
            num_key_value_heads=1,
            tie_word_embeddings=False,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 5e5,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8,
            },
        ),
        seed=20,
        legacy_config=True,
        greedy_eos=True,
    ),
    Fixture(
        "qwen2",
        transformers.Qwen2Config,
        dict(
            num_key_value_heads=2,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        ),
        seed=5,
        max_shard_size="40KB",
    ),
    Fixture(
        "qwen3",
        transformers.Qwen3Config,
        dict(
            num_key_value_heads=2,
            head_dim=16,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        ),
        seed=41,
        greedy_eos=True,
    ),
)


def build_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """Byte-level BPE (digits split one by one) trained on CORPUS up to VOCAB_SIZE tokens, specials included."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    assert tokenizer.get_vocab_size() == VOCAB_SIZE, tokenizer.get_vocab_size()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_model(fixture: Fixture, tokenizer: transformers.PreTrainedTokenizerFast) -> transformers.PreTrainedModel:
    """The fixture's model in float32 with eager attention, every parameter drawn afresh from its seed."""
    config = fixture.config_class(
        **ARCH,
        **fixture.config,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    torch.manual_seed(fixture.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    generator = torch.Generator().manual_seed(fixture.seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if param.ndim > 1:
                param.copy_(WEIGHT_STD * noise)
            else:
                param.copy_(SMALL_STD * noise + (0.0 if name.endswith(".bias") else 1.0))
    return model.eval()


def to_legacy_config(path: Path) -> None:
    """Rewrite ``path/config.json`` as transformers 4 wrote it: top-level rope_theta and rope_scaling, torch_dtype."""
    config = json.loads((path / "config.json").read_text())
    rope = dict(config.pop("rope_parameters"))
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = rope if rope["rope_type"] != "default" else None
    config["torch_dtype"] = config.pop("dtype")
    (path / "config.json").write_text(json.dumps(dict(sorted(config.items())), indent=2) + "\n")


def load(path: Path) -> transformers.PreTrainedModel:
    """The checkpoint in ``path`` as transformers reads it (float32, eager attention)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


def prompts(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded random non-special token ids of LENGTHS and their attention mask, both [len(LENGTHS), max]."""
    rng = np.random.default_rng(seed)
    width = max(LENGTHS)
    tokens = np.zeros((len(LENGTHS), width), np.int64)  # 0: the pad id
    mask = np.zeros((len(LENGTHS), width), np.int64)
    for row, length in enumerate(LENGTHS):
        tokens[row, width - length :] = rng.integers(len(SPECIAL_TOKENS), VOCAB_SIZE, length)
        mask[row, width - length :] = 1
    return torch.from_numpy(tokens), torch.from_numpy(mask)


def logits(model: transformers.PreTrainedModel, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Forward pass with position ids counted over the real tokens (1 on the left padding)."""
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    with torch.no_grad():
        return model(tokens, attention_mask=mask, position_ids=positions).logits


def greedy(model: transformers.PreTrainedModel, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The new tokens of greedy generation, after checking that no step's argmax is within MARGIN of a tie."""
    with torch.no_grad():
        out = model.generate(
            tokens,
            attention_mask=mask,
            max_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    new = out.sequences[:, tokens.shape[1] :]
    assert new.shape == (len(LENGTHS), MAX_NEW_TOKENS), new.shape
    running = torch.ones(len(LENGTHS), dtype=torch.bool)
    for step, step_logits in enumerate(out.logits):
        top2 = step_logits.topk(2, dim=-1).values
        gaps = (top2[:, 0] - top2[:, 1])[running]
        assert (gaps > MARGIN).all(), f"greedy step {step}: top-2 gaps {gaps.tolist()} (change the seed)"
        running &= new[:, step] != model.generation_config.eos_token_id
    return new


def check_rope_scaling(model: transformers.PreTrainedModel, tokens: torch.Tensor, mask: torch.Tensor) -> None:
    """Assert that the model's logits differ from those of the same weights without RoPE scaling."""
    config = model.config.to_dict()
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": model.config.rope_parameters["rope_theta"]}
    plain = transformers.AutoModelForCausalLM.from_config(
        type(model.config).from_dict(config), attn_implementation="eager", dtype=torch.float32
    )
    plain.load_state_dict(model.state_dict())
    real = mask.bool()
    gap = (logits(model, tokens, mask)[real] - logits(plain.eval(), tokens, mask)[real]).abs().max().item()
    assert gap > MARGIN, f"RoPE scaling changes the logits by only {gap}"


def write_fixture(fixture: Fixture, tokenizer: transformers.PreTrainedTokenizerFast, out: Path) -> None:
    """Save the fixture's model and tokenizer to ``out/name`` and the reference outputs of the saved files."""
    path = out / fixture.name
    shutil.rmtree(path, ignore_errors=True)
    model = build_model(fixture, tokenizer)
    save_kwargs = {"max_shard_size": fixture.max_shard_size} if fixture.max_shard_size else {}
    model.save_pretrained(path, **save_kwargs)
    tokenizer.save_pretrained(path, save_jinja_files=False)  # chat_template in tokenizer_config.json, as published
    if fixture.legacy_config:
        to_legacy_config(path)
    if fixture.max_shard_size:
        shards = list(path.glob("model-*-of-*.safetensors"))
        assert (path / "model.safetensors.index.json").exists() and len(shards) >= 2, shards

    tokens, mask = prompts(fixture.seed)
    saved = load(path)
    reference = logits(model, tokens, mask)
    assert torch.equal(logits(saved, tokens, mask), reference), f"{path} does not load back to the saved model"
    if fixture.config["rope_parameters"]["rope_type"] != "default":
        check_rope_scaling(saved, tokens, mask)
    last = len(LENGTHS) - 1
    alone = tokens[last : last + 1, -LENGTHS[last] :]
    unpadded = logits(saved, alone, torch.ones_like(alone))[0]
    np.testing.assert_allclose(unpadded, reference[last, -LENGTHS[last] :], atol=1e-5, rtol=1e-5)
    new_tokens = greedy(saved, tokens, mask)
    emits_eos = (new_tokens[:, :-1] == tokenizer.eos_token_id).any().item()
    assert emits_eos == fixture.greedy_eos, f"{fixture.name}: greedy emits EOS early: {emits_eos}"
    expected = {
        "tokens": tokens.numpy().astype(np.int32),
        "attention_mask": mask.numpy().astype(np.int32),
        "logits": reference.numpy(),
        "greedy": new_tokens.numpy().astype(np.int32),
        "unpadded_logits_row2": unpadded.numpy(),
    }
    save_file(expected, path / "expected.safetensors")


def tokenizer_cases(tokenizer: transformers.PreTrainedTokenizerFast, saved: Path) -> list[dict[str, Any]]:
    """TOKENIZER_TEXTS and the CHAT conversation rendered by the chat template, each with its token ids.

    Checks that the ``tokenizers`` library alone, reading the saved ``tokenizer.json``, encodes and decodes alike.
    """
    chat = tokenizer.apply_chat_template(list(CHAT), tokenize=False)
    cases = [{"text": text, "ids": tokenizer.encode(text)} for text in TOKENIZER_TEXTS]
    cases.append({"chat": list(CHAT), "text": chat, "ids": tokenizer.encode(chat)})
    plain = Tokenizer.from_file(str(saved))
    for case in cases:
        assert plain.encode(case["text"]).ids == case["ids"], case
        assert plain.decode(case["ids"], skip_special_tokens=False) == case["text"], case
        assert tokenizer.decode(case["ids"]) == case["text"], case
    return cases


def main() -> None:
    """Write every fixture and tokenizer_cases.json under --out."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/lm/fixtures/checkpoints"))
    args = parser.parse_args()
    major = int(transformers.__version__.split(".")[0])
    assert major >= 5, f"transformers {transformers.__version__}: 5 or later reads both config formats"
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.disable_progress_bar()
    tokenizer = build_tokenizer()
    args.out.mkdir(parents=True, exist_ok=True)
    for fixture in FIXTURES:
        write_fixture(fixture, tokenizer, args.out)
        print(f"wrote {args.out / fixture.name}")
    cases = tokenizer_cases(tokenizer, args.out / FIXTURES[0].name / "tokenizer.json")
    lines = ",\n".join(json.dumps(case, ensure_ascii=False) for case in cases)  # one case a line
    (args.out / "tokenizer_cases.json").write_text(f"[\n{lines}\n]\n", encoding="utf-8")


if __name__ == "__main__":
    main()
