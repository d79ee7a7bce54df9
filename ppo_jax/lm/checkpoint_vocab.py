"""A checkpoint's token ids in the engine's order: its pad token is id 0 and its EOS id 1, as ``tokens.py`` says.

The lab's engine reads PAD = 0 and EOS = 1 (masks, the end of a response, the
verifiers). A checkpoint whose tokenizer puts them elsewhere enters with two rows of
its embedding (and columns of its LM head) swapped: ``order[engine_id] = checkpoint_id``.
A relabelling of ids changes no function the model computes; the tokenizer's ids
pass through the same map (``to_engine`` / ``to_checkpoint``), and a saved policy
is swapped back, so its directory is in the checkpoint's own ids.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from ppo_jax.lm import tokens
from ppo_jax.lm.decoder_config import CheckpointError, DecoderConfig
from ppo_jax.lm.text_tokenizer import TextTokenizer, load_tokenizer


@dataclasses.dataclass(frozen=True)
class VocabMap:
    """The checkpoint's pad and EOS ids; the engine's ids are the checkpoint's with those swapped onto 0 and 1."""

    pad: int = tokens.PAD
    eos: int = tokens.EOS
    vocab_size: int = 0

    def order(self) -> np.ndarray:
        """``[V]``: the checkpoint id of each engine id."""
        return self._order

    @functools.cached_property
    def _order(self) -> np.ndarray:
        order = np.arange(self.vocab_size)
        for engine_id, checkpoint_id in ((tokens.PAD, self.pad), (tokens.EOS, self.eos)):
            where = int(np.flatnonzero(order == checkpoint_id)[0])
            order[[engine_id, where]] = order[[where, engine_id]]
        return order

    @functools.cached_property
    def _inverse(self) -> np.ndarray:
        return np.argsort(self._order)

    def to_engine(self, ids) -> np.ndarray:
        """Checkpoint ids -> engine ids (any shape)."""
        return self._inverse[np.asarray(ids)]

    def to_checkpoint(self, ids) -> np.ndarray:
        """Engine ids -> checkpoint ids (any shape)."""
        return self.order()[np.asarray(ids)]

    def params_to_engine(self, params: dict) -> dict:
        """Embedding rows (and LM head columns) in engine order."""
        return self._permute(params, self.order())

    def params_to_checkpoint(self, params: dict) -> dict:
        return self._permute(params, np.argsort(self.order()))

    @staticmethod
    def _permute(params: dict, index: np.ndarray) -> dict:
        out = {**params, "embed": jnp.asarray(params["embed"])[index]}
        if "head" in params and params["head"].shape[-1] == index.size:
            out["head"] = jnp.asarray(params["head"])[:, index]
        return out


def vocab_map(config: DecoderConfig, tokenizer: TextTokenizer | None, where: str) -> VocabMap:
    """The map of a checkpoint: its pad and EOS from tokenizer_config.json, else config.json; CheckpointError if it
    has no pad token distinct from EOS (padding must be a token no prompt contains)."""
    eos = tokenizer.eos_token_id if tokenizer is not None else None
    eos = eos if eos is not None else (config.eos_token_ids[0] if config.eos_token_ids else None)
    pad = tokenizer.pad_token_id if tokenizer is not None else None
    pad = pad if pad is not None else config.pad_token_id
    if eos is None or pad is None or pad == eos:
        raise CheckpointError(
            f"{where}: the checkpoint needs an EOS token and a distinct pad token (found eos {eos}, pad {pad}); set "
            "pad_token in tokenizer_config.json (or pad_token_id in config.json) to an unused special token."
        )
    return VocabMap(int(pad), int(eos), config.vocab_size)


def engine_config(config: DecoderConfig) -> DecoderConfig:
    """The config the engine trains: pad 0, EOS 1 (the checkpoint's other EOS ids are not stops here), float32
    parameters and compute (Adam on bfloat16 weights loses small updates; a saved policy is cast back)."""
    return dataclasses.replace(
        config, pad_token_id=tokens.PAD, eos_token_ids=(tokens.EOS,), param_dtype="float32", compute_dtype="float32"
    )


def checkpoint_tokenizer(directory: str) -> TextTokenizer | None:
    return load_tokenizer(Path(directory))
