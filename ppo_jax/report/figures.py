"""Report figures (matplotlib, Agg): each saved as PNG (150 dpi) and PDF.

Colours: the Okabe–Ito palette (Okabe & Ito 2008; colour-blind safe) for up to
8 lines, the cividis colormap beyond. Panels are sized for one column
(about 3.3 x 2.4 inches each) with 8-pt text.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ppo_jax.report.tables import fmt  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
PANEL = (3.3, 2.4)
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def colours(n: int) -> list:
    """``n`` colours, one per setting: Okabe-Ito's eight (colour-blind safe), else tab20's twenty, dark shades first
    (distinct, where a gradient gives neighbouring settings near-identical colours), else a cividis gradient."""
    if n <= len(OKABE_ITO):
        return list(OKABE_ITO[:n])
    if n <= 20:
        tab20 = plt.get_cmap("tab20").colors
        return list(tab20[0::2] + tab20[1::2])[:n]
    return [plt.get_cmap("cividis")(x) for x in np.linspace(0.0, 0.95, n)]


def save(fig, out: Path, name: str) -> list[str]:
    """Write ``name.png`` (150 dpi, 128-colour palette: a third of the bytes) and ``name.pdf``; returns the names."""
    from PIL import Image

    fig.savefig(out / f"{name}.png", dpi=150, bbox_inches="tight")
    fig.savefig(out / f"{name}.pdf", bbox_inches="tight")
    plt.close(fig)
    with Image.open(out / f"{name}.png") as image:
        compact = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    compact.save(out / f"{name}.png", optimize=True)
    return [f"{name}.png", f"{name}.pdf"]


def panel_grid(n: int, ncols: int = 3):
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PANEL[0] * ncols, PANEL[1] * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def learning_curves(
    curves: dict, settings: list[str], envs: list[str], ylabel: str, out: Path, name: str, xlabel: str = "env steps"
) -> list[str]:
    """One panel per env, one line per setting: IQM over seeds with its 95% CI band, or with every seed's curve
    drawn thin where there are too few seeds for a CI.

    ``curves[(env, setting)] = (env_steps[points], iqm[points], ci[2, points], per-seed values[seeds, points] or
    None)``; ``xlabel``: what the steps count.
    """
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(envs))
        palette = dict(zip(settings, colours(len(settings)), strict=True))
        for ax, env in zip(axes, envs, strict=True):
            for setting in settings:
                if (env, setting) not in curves:
                    continue
                steps, iqm, ci, seeds = curves[(env, setting)]
                ax.plot(steps, iqm, color=palette[setting], lw=1.2, label=setting)
                if seeds is None:
                    ax.fill_between(steps, ci[0], ci[1], color=palette[setting], alpha=0.2, lw=0)
                else:
                    ax.plot(steps, seeds.T, color=palette[setting], lw=0.5, alpha=0.5)
            ax.set_title(env)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        handles, labels = next(iter(axes)).get_legend_handles_labels()
        columns = 4 if max(map(len, labels), default=0) <= 30 else 2  # long setting labels: fewer columns
        fig.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(columns, len(labels)),
            frameon=False,
        )
        fig.tight_layout()
        return save(fig, out, name)


def sensitivity(
    table: pd.DataFrame, settings: list[str], ticks: list[str], xlabel: str, out: Path, name: str
) -> list[str]:
    """Normalized final score (IQM over seeds, 95% CI) against the setting, one line per env plus all envs together.

    ``table`` has columns env, setting, iqm, low, high; env ``"all envs"`` is drawn in black.
    """
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(PANEL[0] * 1.25, PANEL[1] * 1.25))
        x = np.arange(len(settings))
        envs = list(dict.fromkeys(table["env"]))
        palette = dict(
            zip([e for e in envs if e != "all envs"], colours(len([e for e in envs if e != "all envs"])), strict=True)
        )
        palette["all envs"] = "#000000"
        for i, env in enumerate(envs):
            rows = table[table["env"] == env].set_index("setting").reindex(settings)
            offset = 0.0 if env == "all envs" else (i - (len(envs) - 2) / 2) * 0.04
            iqm, low, high = (rows[c].to_numpy(float) for c in ("iqm", "low", "high"))
            ax.errorbar(
                x + offset,
                iqm,
                yerr=[iqm - low, high - iqm],
                color=palette[env],
                marker=MARKERS[i % len(MARKERS)],
                ms=3.5,
                lw=2.0 if env == "all envs" else 1.0,
                capsize=2,
                label=env,
            )
        ax.axhline(0.0, color="0.6", lw=0.6, ls=":")
        ax.axhline(1.0, color="0.6", lw=0.6, ls="--")
        crowded = max(len(t) for t in ticks) * len(ticks) > 24  # labels wider than the axis: slant them
        ax.set_xticks(x, ticks, rotation=30 if crowded else 0, ha="right" if crowded else "center")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("normalized final score (IQM, 95% CI)")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        fig.tight_layout()
        return save(fig, out, name)


def interval_estimates(
    table: pd.DataFrame, settings: list[str], metric_names: tuple, out: Path, name: str
) -> list[str]:
    """Aggregate metrics over envs (rows: settings; panels: median, IQM, mean, optimality gap) with 95% CIs."""
    with plt.rc_context(STYLE):
        height = max(1.6, 0.28 * len(settings) + 0.6)
        fig, axes = plt.subplots(1, len(metric_names), figsize=(1.9 * len(metric_names) + 1.5, height), sharey=True)
        palette = colours(len(settings))
        y = np.arange(len(settings))[::-1]
        for ax, metric in zip(axes, metric_names, strict=True):
            rows = table[table["metric"] == metric].set_index("setting").reindex(settings)
            for yi, setting, colour in zip(y, settings, palette, strict=True):
                ax.plot(
                    [rows.loc[setting, "low"], rows.loc[setting, "high"]],
                    [yi, yi],
                    color=colour,
                    lw=5,
                    alpha=0.75,
                    solid_capstyle="butt",
                )
                ax.plot([rows.loc[setting, "value"]] * 2, [yi - 0.3, yi + 0.3], color="k", lw=1)
            ax.set_title(metric)
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(y, settings)
        fig.supxlabel("normalized score (optimality gap: lower is better)", fontsize=8)
        fig.tight_layout()
        return save(fig, out, name)


def improvement(table: pd.DataFrame, out: Path, name: str) -> list[str]:
    """P(setting > baseline) with 95% CIs, one row per setting."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(PANEL[0] * 1.2, max(1.4, 0.28 * len(table) + 0.6)))
        y = np.arange(len(table))[::-1]
        p, low, high = (table[c].to_numpy(float) for c in ("probability", "low", "high"))
        ax.errorbar(p, y, xerr=[p - low, high - p], fmt="o", color=OKABE_ITO[0], ms=3.5, capsize=2)
        ax.axvline(0.5, color="0.5", lw=0.8, ls="--")
        ax.set_yticks(y, table["setting"])
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"P(setting > {table['baseline'].iloc[0]})")
        fig.tight_layout()
        return save(fig, out, name)


def profiles(data: dict, taus: np.ndarray, settings: list[str], out: Path, name: str) -> list[str]:
    """Performance profiles: fraction of runs with normalized score > tau, with 95% CI bands."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(PANEL[0] * 1.25, PANEL[1] * 1.25))
        for setting, colour in zip(settings, colours(len(settings)), strict=True):
            profile, ci = data[setting]
            ax.plot(taus, profile, color=colour, lw=1.2, label=setting)
            ax.fill_between(taus, ci[0], ci[1], color=colour, alpha=0.2, lw=0)
        ax.set_xlabel(r"normalized score $\tau$")
        ax.set_ylabel(r"fraction of runs with score $> \tau$")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        fig.tight_layout()
        return save(fig, out, name)


def heatmap(
    cells: pd.DataFrame,
    row_field: str,
    col_field: str,
    envs: list[str],
    out: Path,
    name: str,
    label: str = "final return",
) -> list[str]:
    """Per env, a heat map over a two-field grid: the IQM of ``label`` in colour, IQM and 95% CI written in each
    cell (``tables.fmt``: 3 significant digits; the IQM alone where there is no CI).

    ``cells`` has columns env, row, col (the two fields' values), iqm, low, high.
    """
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(envs), ncols=2)
        for ax, env in zip(axes, envs, strict=True):
            rows = cells[cells["env"] == env]
            row_values = sorted(rows["row"].unique())
            col_values = sorted(rows["col"].unique())
            grid = rows.pivot(index="row", columns="col", values="iqm").reindex(index=row_values, columns=col_values)
            image = ax.imshow(grid.to_numpy(float), cmap="cividis", aspect="auto", origin="lower")
            for _, cell in rows.iterrows():
                i, j = row_values.index(cell["row"]), col_values.index(cell["col"])
                value = grid.to_numpy(float)[i, j]
                light = image.norm(value) < 0.55 if np.isfinite(value) else True
                ax.text(
                    j,
                    i,
                    fmt(cell["iqm"])
                    + (f"\n[{fmt(cell['low'])}, {fmt(cell['high'])}]" if np.isfinite(cell["low"]) else ""),
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if light else "black",
                )
            ax.set_xticks(range(len(col_values)), [f"{v:g}" for v in col_values])
            ax.set_yticks(range(len(row_values)), [f"{v:g}" for v in row_values])
            ax.set_xlabel(col_field)
            ax.set_ylabel(row_field)
            ax.set_title(f"{env}: {label} (IQM, 95% CI)")
            fig.colorbar(image, ax=ax, shrink=0.85)
        fig.tight_layout()
        return save(fig, out, name)


def paper_comparison(
    ours: pd.DataFrame, paper: dict[str, float], settings: list[str], out: Path, name: str
) -> list[str]:
    """Per setting (rows): our normalized score over envs (bar, 95% CI) and the PPO paper's Table 1 (diamond).

    ``ours`` has columns setting, value, low, high; ``paper``: setting -> the paper's number, where it has one.
    """
    with plt.rc_context(STYLE):
        labels = 0.055 * max(len(s) for s in settings)  # inches of 7-pt tick labels beside the bars
        fig, ax = plt.subplots(figsize=(PANEL[0] * 1.2 + labels, max(1.6, 0.28 * len(settings) + 0.8)))
        rows = ours.set_index("setting").reindex(settings)
        y = np.arange(len(settings))[::-1]
        value, low, high = (rows[c].to_numpy(float) for c in ("value", "low", "high"))
        ax.barh(
            y,
            value,
            xerr=[value - low, high - value],
            color=OKABE_ITO[0],
            alpha=0.8,
            capsize=2,
            label="this report: mean over envs (95% CI)",
        )
        marks = [(yi, paper[s]) for yi, s in zip(y, settings, strict=True) if s in paper]
        if marks:
            ax.scatter(
                [p for _, p in marks],
                [yi for yi, _ in marks],
                marker="D",
                s=14,
                color=OKABE_ITO[3],
                zorder=3,
                label="PPO paper, Table 1 (7 MuJoCo tasks)",
            )
        ax.axvline(0.0, color="0.6", lw=0.6, ls=":")
        ax.axvline(1.0, color="0.6", lw=0.6, ls="--")
        ax.set_yticks(y, settings)
        ax.set_xlabel("normalized score (random = 0, best setting = 1)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
        fig.tight_layout()
        return save(fig, out, name)
