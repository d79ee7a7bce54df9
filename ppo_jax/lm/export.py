"""The trained policies of a run as Hugging Face checkpoint directories (``policy/seed_<s>/`` in the run directory).

For a Llama-family policy (``model: decoder``, or a checkpoint directory) each
seed's actor (with LoRA, the SFT model with the adapters merged into its
kernels, ``lora.merge``) is written by ``checkpoints.save_checkpoint``: config.json,
model.safetensors and, when the run started from a checkpoint, its tokenizer
files, so transformers and vLLM load the trained policy. Other architectures
export nothing (their parameters stay in params.msgpack).
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from ppo_jax.lm import decoder, lora
from ppo_jax.lm.checkpoint_model import CheckpointDecoder
from ppo_jax.lm.checkpoint_vocab import VocabMap
from ppo_jax.lm.checkpoints import Checkpoint, load_checkpoint, save_checkpoint
from ppo_jax.lm.models import make_models

POLICY_DIR = "policy"


def export_policies(cfg, output, seeds: list[int], path: Path, shared=None) -> list[Path]:
    """``path/policy/seed_<s>/`` for each seed of ``output.params["actor"]`` (leading seed axis); the paths written.

    With LoRA the actor is adapters, merged into ``shared.sft`` (the base; ``pretrain``'s output)."""
    policy = make_models(cfg).policy
    if not isinstance(policy, decoder.Decoder):
        return []
    source = load_checkpoint(policy.source) if isinstance(policy, CheckpointDecoder) else None
    written = []
    for index, seed in enumerate(seeds):
        params = jax.tree.map(lambda leaf, index=index: np.asarray(leaf[index]), output.params["actor"])
        if cfg.lora_rank:
            params = lora.merge(shared.sft, params, float(cfg.lora_alpha) / cfg.lora_rank)
        if source is None:
            ck = Checkpoint(policy.config, params)
        else:  # back in the checkpoint's own token ids
            ck = source.replace(params=VocabMap(*policy.swap, policy.config.vocab_size).params_to_checkpoint(params))
        written.append(save_checkpoint(path / POLICY_DIR / f"seed_{seed}", ck))
    return written
