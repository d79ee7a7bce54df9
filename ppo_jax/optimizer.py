"""The optimizer every task trains with: global-norm clip + Adam, hyperparameters injected (traceable, vmappable)."""

from __future__ import annotations

import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState


def make_optimizer() -> optax.GradientTransformation:
    """Global-norm clip + Adam, with lr, max_grad_norm and eps injected into the optimizer state.

    The transformation is built from placeholder constants, so ``TrainState.tx``
    (a static field) never holds a tracer; the real, possibly traced, values
    are written into the state with ``set_hyperparams``.

    Per leaf, not on one concatenated vector (``optax.flatten``): the copies in and
    out of the vector made Pendulum runs (256x256 networks) slower in an A/B of
    4 Dec 2026 whose script was not kept (``git show 78b92a0:docs/benchmarks.md``).
    """

    def chain(learning_rate, max_grad_norm, eps):
        return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate, eps=eps))

    return optax.inject_hyperparams(chain)(learning_rate=1.0, max_grad_norm=1.0, eps=1.0)


def set_hyperparams(train_state: TrainState, **values) -> TrainState:
    """Overwrite injected optimizer hyperparameters (``learning_rate``, ``max_grad_norm``, ``eps``)."""
    opt_state = train_state.opt_state
    hyperparams = dict(opt_state.hyperparams)
    for name, value in values.items():
        hyperparams[name] = jnp.asarray(value, hyperparams[name].dtype)
    return train_state.replace(opt_state=opt_state._replace(hyperparams=hyperparams))


def create_train_state(apply_fn, params, cfg) -> TrainState:
    """A TrainState with ``make_optimizer()`` and ``cfg``'s lr, max_grad_norm and adam_eps injected."""
    train_state = TrainState.create(apply_fn=apply_fn, params=params, tx=make_optimizer())
    return set_hyperparams(train_state, learning_rate=cfg.lr, max_grad_norm=cfg.max_grad_norm, eps=cfg.adam_eps)
