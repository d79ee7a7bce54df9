"""The special tokens every problem shares, and the masks of EOS-terminated responses.

``PAD = 0`` fills a response after its end; ``EOS = 1`` ends it. Every problem's
vocabulary starts with these two (``copy_task``: content tokens from 2 on;
``vocabulary``: digits and operators from 2 on), so the masks below apply to all.

Shapes: prompts ``[..., P]``, responses ``[..., L]``, sequences ``[..., P + L]``
(prompt then response), int32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

PAD = 0
EOS = 1


def join(prompt: jax.Array, response: jax.Array) -> jax.Array:
    """The sequence ``[..., P + L]``: prompt then response."""
    return jnp.concatenate([prompt.astype(jnp.int32), response.astype(jnp.int32)], axis=-1)


def response_mask(response: jax.Array) -> jax.Array:
    """``[..., L]`` bool: True on the response's tokens, up to and including its first EOS.

    A response without EOS (cut at the maximum length) is all True. Positions after
    the first EOS are padding: False.
    """
    is_eos = (response == EOS).astype(jnp.int32)
    eos_before = jnp.cumsum(is_eos, axis=-1) - is_eos  # EOS tokens strictly before position t
    return eos_before == 0


def end_at_eos(response: jax.Array) -> jax.Array:
    """``response [..., L]`` with every token after the first EOS replaced by PAD."""
    return jnp.where(response_mask(response), response, PAD)


def response_length(response: jax.Array) -> jax.Array:
    """``[...]`` int32: number of response tokens, EOS included."""
    return response_mask(response).sum(-1).astype(jnp.int32)


def ended(response: jax.Array) -> jax.Array:
    """``[...]`` bool: the response holds an EOS (it was not cut at the maximum length)."""
    return (response == EOS).any(-1)
