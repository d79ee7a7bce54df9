"""Hugging Face checkpoint directories in and out: ``load_checkpoint(path)`` and ``save_checkpoint(path, ck)``.

    from ppo_jax.lm.checkpoints import load_checkpoint, save_checkpoint
    ck = load_checkpoint("SmolLM2-135M")                  # config.json, safetensors, tokenizer files
    logits = ck.logits(tokens, attention_mask)            # [B, T] int32, 0/1 (left padding) -> [B, T, V] float32
    new = ck.generate(tokens, attention_mask, 16)         # greedy -> [B, 16] int32
    save_checkpoint("trained", ck.replace(params=params)) # loads in transformers and vLLM

A directory is what ``save_pretrained`` writes: config.json (transformers 4.x or
5.x keys, ``decoder_config.from_hf``), model.safetensors or a sharded
model.safetensors.index.json (``hf_tensors``), and optionally tokenizer.json with
tokenizer_config.json (``text_tokenizer``). Everything wrong with a directory is a
``CheckpointError`` with one line naming the file and the problem. No torch and
no network.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp

from ppo_jax.lm import decoder
from ppo_jax.lm.decoder import Decoder
from ppo_jax.lm.decoder_config import CheckpointError, DecoderConfig, from_hf
from ppo_jax.lm.hf_tensors import hf_tensors, read_params, write_tensors
from ppo_jax.lm.text_tokenizer import TOKENIZER_FILES, TextTokenizer, load_tokenizer

__all__ = ["Checkpoint", "CheckpointError", "load_checkpoint", "save_checkpoint"]


@partial(jax.jit, static_argnums=0)
def _logits(model: Decoder, params, tokens, attention_mask):
    return decoder.logits(model, params, tokens, attention_mask)


@partial(jax.jit, static_argnums=(0, 4))
def _greedy(model: Decoder, params, tokens, attention_mask, max_new_tokens: int):
    return decoder.greedy(model, params, tokens, attention_mask, max_new_tokens)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A decoder's config, parameters and tokenizer, with the files its directory carried."""

    config: DecoderConfig
    params: dict
    tokenizer: TextTokenizer | None = None
    hf_config: dict = dataclasses.field(default_factory=dict)  # config.json as read (unknown keys kept)
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)  # tokenizer and generation files, verbatim

    @property
    def model(self) -> Decoder:
        return Decoder(self.config)

    def replace(self, **changes) -> Checkpoint:
        """The same checkpoint with new fields (``params=`` for a trained policy)."""
        return dataclasses.replace(self, **changes)

    def logits(self, tokens, attention_mask) -> jax.Array:
        """``[B, T, V]`` float32 logits of ``tokens [B, T]`` int32 under ``attention_mask [B, T]`` (0 on left padding)."""
        tokens, attention_mask = _batch(tokens, attention_mask)
        return _logits(self.model, self.params, tokens, attention_mask)

    def generate(self, tokens, attention_mask, max_new_tokens: int) -> jax.Array:
        """``[B, max_new_tokens]`` int32 greedy continuations; a row that ends (EOS) is filled with the pad token."""
        tokens, attention_mask = _batch(tokens, attention_mask)
        return _greedy(self.model, self.params, tokens, attention_mask, int(max_new_tokens))


def _batch(tokens, attention_mask) -> tuple[jax.Array, jax.Array]:
    tokens, attention_mask = jnp.asarray(tokens, jnp.int32), jnp.asarray(attention_mask, jnp.int32)
    if tokens.ndim != 2 or tokens.shape != attention_mask.shape:
        raise ValueError(
            f"tokens {tokens.shape} and attention_mask {attention_mask.shape} must both be [batch, length]."
        )
    return tokens, attention_mask


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({error}).") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object, found {type(value).__name__}.")
    return value


def load_checkpoint(
    path: str | Path, *, param_dtype: str | None = None, compute_dtype: str | None = None
) -> Checkpoint:
    """The checkpoint in directory ``path``; CheckpointError (one line) for anything it cannot load.

    ``param_dtype`` / ``compute_dtype`` ("float32", "bfloat16") override the
    checkpoint's dtype (default: parameters as stored, compute in the same dtype).
    """
    directory = Path(path)
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint directory {directory} does not exist (or is not a directory).")
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise CheckpointError(
            f"{directory} has no config.json; a checkpoint directory is what save_pretrained writes "
            "(config.json, model.safetensors, tokenizer.json)."
        )
    hf_config = _read_json(config_path)
    config = from_hf(hf_config, where=str(config_path))
    if param_dtype or compute_dtype:
        try:
            config = dataclasses.replace(
                config,
                param_dtype=param_dtype or config.param_dtype,
                compute_dtype=compute_dtype or param_dtype or config.compute_dtype,
            )
        except ValueError as error:
            raise CheckpointError(str(error)) from None
    params = read_params(Decoder(config), directory)
    tokenizer = load_tokenizer(directory)
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(
            f"{directory / 'tokenizer.json'} has {tokenizer.vocab_size} tokens but the embedding has "
            f"{config.vocab_size} rows (config.json vocab_size): they belong to different models."
        )
    files = {name: (directory / name).read_bytes() for name in TOKENIZER_FILES if (directory / name).is_file()}
    return Checkpoint(config, params, tokenizer, hf_config, files)


def save_checkpoint(path: str | Path, ck: Checkpoint, *, max_shard_bytes: int = 5 * 2**30) -> Path:
    """Write ``ck`` as a Hugging Face directory transformers and vLLM load; returns the path.

    config.json is the one read (its unknown keys kept), or the config in
    transformers 4.x keys for a checkpoint built here; tensors in the parameters'
    dtype, sharded past ``max_shard_bytes``; tokenizer files copied verbatim. A
    non-empty ``path`` is refused (nothing is overwritten); the directory appears
    whole or not at all.
    """
    directory = Path(path)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise CheckpointError(f"{directory} exists and is not empty; save the checkpoint to a new directory.")
    hf_config = dict(ck.hf_config) if ck.hf_config else ck.config.to_hf()
    hf_config["torch_dtype" if "dtype" not in hf_config else "dtype"] = ck.config.param_dtype
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        (staging / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        tensors = hf_tensors(ck.model, jax.tree.map(lambda x: jnp.asarray(x, ck.config.param_dtype), ck.params))
        write_tensors(staging, tensors, max_shard_bytes=max_shard_bytes)
        for name, content in ck.files.items():
            (staging / name).write_bytes(content)
        if directory.exists():
            directory.rmdir()
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory
