"""A run's models from a checkpoint directory (``model: DIR``): ``CheckpointDecoder``, built and checked before compiling.

The policy is the checkpoint's decoder in the engine's token ids
(``checkpoint_vocab``); ``init_params`` loads its weights, and a value model
(critic, reward model) gets the same weights under a fresh one-output head
(Ouyang et al. 2022: the value function starts from the reward or SFT model).
``run`` and ``generate`` are the decoder's (``models`` dispatches on this module).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax

from ppo_jax.lm import problems, tokens
from ppo_jax.lm.checkpoint_vocab import VocabMap, engine_config, vocab_map
from ppo_jax.lm.decoder import Decoder, generate, run, sample  # noqa: F401 - the interface models dispatches to
from ppo_jax.lm.decoder import init_params as fresh_params
from ppo_jax.lm.decoder_config import CheckpointError, DecoderConfig, from_hf
from ppo_jax.lm.hf_tensors import check_tensors, read_params
from ppo_jax.lm.memory_switches import decoder_dtypes
from ppo_jax.lm.text_tokenizer import load_tokenizer


@dataclasses.dataclass(frozen=True)
class CheckpointDecoder(Decoder):
    """A ``Decoder`` whose weights come from ``source``, its pad and EOS ids (``swap``) relabelled to 0 and 1."""

    source: str = ""
    swap: tuple[int, int] = (tokens.PAD, tokens.EOS)

    def apply(self, params: dict, tokens: jax.Array) -> jax.Array:
        return run(self, params, tokens)


def init_params(model: CheckpointDecoder, key: jax.Array) -> dict:
    """The source's weights in engine ids; a value model's head is fresh (orthogonal, ``head_gain``)."""
    lm = Decoder(model.config)
    loaded = VocabMap(*model.swap, model.config.vocab_size).params_to_engine(read_params(lm, Path(model.source)))
    if not model.out_dim:
        return loaded
    head = fresh_params(Decoder(model.config, model.out_dim, model.head_gain), key)["head"]
    return {**{name: value for name, value in loaded.items() if name != "head"}, "head": head}


def is_checkpoint_path(value) -> bool:
    """Whether a ``model`` value names a checkpoint directory rather than an architecture (a path, or a directory)."""
    return isinstance(value, str) and ("/" in value or value.startswith(".") or Path(value).is_dir())


def checkpoint_config(directory: str) -> DecoderConfig:
    """The DecoderConfig of checkpoint ``directory``'s config.json; CheckpointError (one line) if it has none."""
    path = Path(directory) / "config.json"
    if not Path(directory).is_dir():
        raise CheckpointError(f"--model {directory}: no such checkpoint directory (nor a model architecture).")
    if not path.is_file():
        raise CheckpointError(f"--model {directory}: the directory has no config.json (save_pretrained writes one).")
    try:
        hf = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({error}).") from None
    return from_hf(hf, where=str(path))


def checkpoint_vocab_map(cfg) -> VocabMap:
    """The checkpoint's pad and EOS ids (problems with their own vocabulary: the lab's 0 and 1)."""
    config = checkpoint_config(cfg.model)
    if not problems.problem_of(cfg).needs_tokenizer:
        return VocabMap(tokens.PAD, tokens.EOS, config.vocab_size)
    return vocab_map(config, load_tokenizer(Path(cfg.model)), str(cfg.model))


def build(cfg, vocab: int, out_dim: int, *, head_gain: float = 1.0) -> CheckpointDecoder:
    """The ``MODELS`` entry's build: the policy (``out_dim == vocab``: the checkpoint's LM head) or a value model, in
    ``cfg``'s dtypes (``memory_switches.decoder_dtypes``; "": the checkpoint's) and with its remat."""
    mapping = checkpoint_vocab_map(cfg)
    config = engine_config(checkpoint_config(cfg.model))
    return CheckpointDecoder(
        dataclasses.replace(config, **decoder_dtypes(cfg, config.param_dtype)),
        out_dim=0 if out_dim == vocab else out_dim,
        head_gain=head_gain,
        remat=cfg.remat,
        source=cfg.model,
        swap=(mapping.pad, mapping.eos),
    )


def check(cfg) -> None:
    """Every tensor there and of its shape (headers only); a text problem needs the tokenizer, the lab's other problems a
    checkpoint of their own vocabulary (their verifiers read their own token ids)."""
    config = checkpoint_config(cfg.model)
    check_tensors(Decoder(config), Path(cfg.model))
    if problems.problem_of(cfg).needs_tokenizer:
        if load_tokenizer(Path(cfg.model)) is None:
            raise CheckpointError(f"--model {cfg.model}: the {cfg.problem} problem needs its tokenizer.json.")
        checkpoint_vocab_map(cfg)
        return
    vocab = problems.vocab_size(cfg)
    if config.vocab_size != vocab or config.eos_token_ids[:1] != (tokens.EOS,) or config.pad_token_id != tokens.PAD:
        raise CheckpointError(
            f"--model {cfg.model}: its vocabulary ({config.vocab_size} tokens, EOS {list(config.eos_token_ids)}, "
            f"PAD {config.pad_token_id}) is not the {problems.describe(cfg)} problem's ({vocab} tokens, EOS "
            f"{tokens.EOS}, PAD {tokens.PAD}); the lab's problems run on checkpoints of their own vocabulary "
            "(a run with --model decoder saves one per seed under policy/), text problems on any tokenizer."
        )
