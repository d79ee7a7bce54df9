"""Draw docs/assets/clip_objective.png: PPO's clipped objective against the ratio r, from the package's own loss.

Two panels, A > 0 and A < 0 (Schulman et al. 2017, fig. 1): ``L^CLIP = min(r A, clip(r, 1-eps, 1+eps) A)``
(``objective: clip``), the clipped term alone (``clip_no_min``) and ``r A`` (``unclipped``). Every curve and every
slope is ``ppo_jax.losses.policy_loss`` (negated: the loss is minus the objective) and its ``jax.grad`` on a grid
of ratios; nothing here writes the formula again. The shaded ranges are where the gradient of L^CLIP is exactly 0.

    python scripts/objective_figure.py                # writes docs/assets/clip_objective.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.losses import policy_loss

CLIP_EPS = 0.2
RATIOS = np.linspace(0.02, 2.0, 199)  # steps of 0.01; 0 is left out (log 0)
CURVES = ("clip", "clip_no_min", "unclipped")  # objectives of ppo_jax.losses.OBJECTIVES drawn


def objective_curves(ratios, advantage: float, clip_eps: float = CLIP_EPS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per objective in ``CURVES``: (objective, d objective / d r), each ``float32[len(ratios)]``.

    The package's per-sample loss at ``log_prob = log r``, ``old_log_prob = 0`` and ``advantage``, negated;
    the slope is its ``jax.grad`` with respect to ``log_prob`` divided by ``r`` (d log r / d r = 1 / r).
    """
    log_ratio = jnp.log(jnp.asarray(ratios, jnp.float32))
    advantage = jnp.full_like(log_ratio, advantage)
    zeros = jnp.zeros_like(log_ratio)

    def objective(name, log_prob):
        return -policy_loss(
            name, log_prob, zeros, advantage, zeros, clip_eps=clip_eps, kl_beta=0.0, dual_clip_c=3.0
        )  # kl and kl_beta: unused by these three objectives

    out = {}
    for name in CURVES:
        values = objective(name, log_ratio)
        d_log_prob = jax.grad(lambda lp, name=name: objective(name, lp).sum())(log_ratio)  # samples are independent
        out[name] = (np.asarray(values), np.asarray(d_log_prob / jnp.exp(log_ratio)))
    return out


def draw(out: Path, clip_eps: float = CLIP_EPS) -> None:
    """Write the two-panel PNG (900 x 380 px) to ``out``; the same bytes every time on one matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), dpi=100, sharex=True)
    styles = {
        "clip": dict(
            color="tab:blue", lw=2.6, label=r"$L^{CLIP} = \min(rA,\ \mathrm{clip}(r, 1-\epsilon, 1+\epsilon)A)$  (clip)"
        ),
        "clip_no_min": dict(
            color="tab:orange",
            lw=1.8,
            ls="--",
            label=r"$\mathrm{clip}(r, 1-\epsilon, 1+\epsilon)A$ alone  (clip_no_min)",
        ),
        "unclipped": dict(color="0.45", lw=1.0, ls=":", label=r"$rA$  (unclipped)"),
    }
    for ax, advantage in zip(axes, (1.0, -1.0), strict=True):
        curves = objective_curves(RATIOS, advantage, clip_eps)
        flat = curves["clip"][1] == 0.0
        low, high = (-2.2, 2.2)
        ax.fill_between(
            RATIOS, low, high, where=flat, color="tab:blue", alpha=0.10, lw=0, label=r"gradient of $L^{CLIP}$ is 0"
        )
        for name in ("unclipped", "clip", "clip_no_min"):
            ax.plot(RATIOS, curves[name][0], **styles[name])
        for edge in (1 - clip_eps, 1 + clip_eps):
            ax.axvline(edge, color="0.3", lw=0.8, ls="-.")
        ax.axhline(0.0, color="0.75", lw=0.6)
        ax.set_xticks([0, 1 - clip_eps, 1, 1 + clip_eps, 2], ["0", r"$1-\epsilon$", "1", r"$1+\epsilon$", "2"])
        ax.set_xlim(0, 2)
        ax.set_ylim(low, high)
        ax.set_xlabel(r"ratio $r = \pi(a|s)\ /\ \pi_{old}(a|s)$")
        ax.set_title(
            f"$A {'>' if advantage > 0 else '<'} 0$   ($A = {advantage:+g}$, $\\epsilon = {clip_eps:g}$)", fontsize=11
        )
    axes[0].set_ylabel("objective (maximised)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.subplots_adjust(left=0.07, right=0.99, top=0.92, bottom=0.29, wspace=0.15)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})  # no version string: the bytes depend on the drawing only
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/assets/clip_objective.png"), help="the PNG to write")
    args = parser.parse_args(argv)
    draw(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
