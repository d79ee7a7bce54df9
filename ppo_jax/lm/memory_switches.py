"""The switches that trade compute for memory: remat, parameter and compute dtypes, micro-batches; ``check(cfg)``.

- ``remat``: each decoder layer under ``jax.checkpoint`` (``decoder.forward``; Chen et al. 2016).
- ``param_dtype`` / ``compute_dtype``: the stored (master) weights and the matmuls. float32 weights with bfloat16
  compute is mixed-precision training (Micikevicius et al. 2018): the optimizer updates float32 weights, each matmul
  casts them to bfloat16, and the logits, softmax, norms' statistics and losses stay float32 (``decoder.py``).
- ``micro_batches``: gradient accumulation (``ppo_jax.minibatch_epochs``). Every minibatch-level quantity of the
  loss is taken over the whole minibatch (``token_loss.MinibatchTotals``: its response tokens, present rows and
  advantage statistics), so the accumulated gradient is the minibatch's, to float rounding, under every loss
  aggregation. Two switches rank the minibatch's tokens by the current policy, which one micro-batch cannot see:
  ``top_entropy_quantile`` below 1 and a ``cov_reg``; with micro-batches they are refused.

The dtypes and remat apply to the Llama-family models only (``model: decoder`` and checkpoint directories): the
GRU and the GPT-2-style transformer are small flax modules of the lab, always float32, never rematerialised.
"""

from __future__ import annotations

import numpy as np

from ppo_jax.config_fields import is_concrete
from ppo_jax.errors import ConfigError
from ppo_jax.lm.covariance_regularizers import COVARIANCE_REGULARIZERS
from ppo_jax.lm.decoder_config import DTYPES

DECODER_FAMILY = "model: decoder or a checkpoint directory"

WHAT_TO_TRY = (
    "remat (decoder models: recompute each layer in the backward pass), micro_batches (gradient accumulation), "
    "compute_dtype bfloat16, lora_rank, mesh (more devices), or a smaller batch (num_prompts, group_size, "
    "max_response_len; more num_minibatches)"
)
"""The switches that lower an update's memory, in the words of a refusal over the memory budget (a run's
``ppo_jax.memory_estimate.check_budget`` writes them as flags, a sweep's as spec fields)."""


def decoder_dtypes(cfg, default: str) -> dict[str, str]:
    """``{"param_dtype", "compute_dtype"}`` of a decoder built for ``cfg``: its fields, ``default`` (float32 for the
    lab's decoder, a checkpoint's own dtype) where param_dtype is "", param_dtype where compute_dtype is ""."""
    param = cfg.param_dtype or default
    return {"param_dtype": param, "compute_dtype": cfg.compute_dtype or param}


def check(cfg, *, decoder_family: bool) -> None:
    """ConfigError for a dtype outside ``DTYPES``, remat or a dtype on a model without them (``decoder_family``:
    the run's model is a Llama-family decoder), or micro-batches that do not split the minibatch exactly."""
    for name in ("param_dtype", "compute_dtype"):
        value = getattr(cfg, name)
        if value and value not in DTYPES:
            raise ConfigError(f"{name}={value!r} is not supported; choose one of {', '.join(DTYPES)} ('' = default).")
    asked = [name for name in ("param_dtype", "compute_dtype") if getattr(cfg, name)] + ["remat"] * bool(cfg.remat)
    if asked and not decoder_family:
        raise ConfigError(
            f"{' and '.join(asked)} apply to the Llama-family models only ({DECODER_FAMILY}); model {cfg.model!r} "
            "is always float32 without remat: use --model decoder, or drop the flag."
        )
    check_micro_batches(cfg)


def check_micro_batches(cfg) -> None:
    """micro_batches >= 1, dividing the minibatch's sequences, and no switch that ranks the whole minibatch's tokens."""
    m, size = cfg.micro_batches, cfg.minibatch_size
    if m < 1:
        raise ConfigError(f"micro_batches must be >= 1 (1: no gradient accumulation), got {m}.")
    if size % m:
        raise ConfigError(
            f"micro_batches={m} does not divide the minibatch of {size} sequences (num_prompts x group_size / "
            f"num_minibatches); choose among {[d for d in range(1, size + 1) if size % d == 0]}."
        )
    if m == 1:
        return
    if COVARIANCE_REGULARIZERS[cfg.cov_reg].fn is not None:  # it ranks the minibatch's tokens
        raise ConfigError(
            f"cov_reg={cfg.cov_reg!r} ranks the whole minibatch's tokens by the current policy's covariance, which "
            "one micro-batch cannot see, so micro_batches > 1 would change the update: use micro_batches 1 "
            "(more num_minibatches instead), or cov_reg none."
        )
    quantile = cfg.top_entropy_quantile
    if is_concrete(quantile) and np.any(np.asarray(quantile) < 1):
        raise ConfigError(
            f"top_entropy_quantile={float(np.min(quantile)):.6g} keeps the top share of the whole minibatch's tokens by the current "
            "policy's entropy, which one micro-batch cannot see, so micro_batches > 1 would change the update: use "
            "micro_batches 1 (more num_minibatches instead), or top_entropy_quantile 1."
        )
