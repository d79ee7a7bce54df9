"""The models of a run, by ``cfg.model``: the causal transformer (``transformer.py``) or the GRU (``gru.py``).

Both architectures share one interface, which this module dispatches on the
module's type: ``init_params(model, key)``, ``run(model, params, tokens [B, T])
-> [B, T, out_dim]`` (teacher forcing) and ``generate(model, params, key, prompt
[B, P], L) -> [B, L]`` (temperature-1 sampling, PAD after the first EOS). A run
has a policy (actor and reference; ``out_dim = vocab``, head gain 0.01) and a
scalar model (critic and reward model; one output), of one architecture.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from ppo_jax.lm import gru, problems, transformer


class Models(NamedTuple):
    policy: nn.Module  # actor and reference: logits [V]
    scalar: nn.Module  # critic and reward model: one output


def make_models(cfg) -> Models:
    vocab = problems.vocab_size(cfg)
    if cfg.model == "gru":
        sizes = dict(vocab_size=vocab, embed_dim=cfg.embed_dim, hidden_dim=cfg.hidden_dim)
        return Models(gru.SeqModel(out_dim=vocab, head_gain=0.01, **sizes), gru.SeqModel(out_dim=1, **sizes))
    sizes = dict(
        vocab_size=vocab,
        max_len=problems.prompt_len(cfg) + problems.response_len(cfg),
        model_dim=cfg.model_dim,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
    )
    return Models(transformer.Decoder(out_dim=vocab, head_gain=0.01, **sizes), transformer.Decoder(out_dim=1, **sizes))


def _module(model: nn.Module):
    return transformer if isinstance(model, transformer.Decoder) else gru


def init_params(model: nn.Module, key: jax.Array):
    return _module(model).init_params(model, key)


def run(model: nn.Module, params, tokens: jax.Array) -> jax.Array:
    """Outputs ``[B, T, out_dim]`` for ``tokens [B, T]``: row t is computed from tokens ``0..t``."""
    return _module(model).run(model, params, tokens)


def generate(model: nn.Module, params, key: jax.Array, prompt: jax.Array, max_response_len: int) -> jax.Array:
    """Responses ``[B, L]`` sampled at temperature 1 for ``prompt [B, P]``; PAD after the first EOS."""
    return _module(model).generate(model, params, key, prompt, max_response_len)


def response_outputs(model: nn.Module, params, sequence: jax.Array, prompt_len: int) -> jax.Array:
    """``[B, L, out_dim]``: the output that predicts (or values the state before) each response token.

    Row ``t`` is computed from the prompt and response tokens ``0..t-1``: logits of
    pi(. | s_t) for the actor, V(s_t) for the critic.
    """
    return run(model, params, sequence[:, :-1])[:, prompt_len - 1 :]


def score_at(outputs: jax.Array, position: jax.Array) -> jax.Array:
    """``outputs [B, T, 1]`` read at ``position [B]``: ``[B]``."""
    return jnp.take_along_axis(outputs[..., 0], position[:, None].astype(jnp.int32), axis=1)[:, 0]
