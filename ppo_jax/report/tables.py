"""Tables of final return per setting (rows) x env (columns): Markdown and LaTeX (booktabs).

A cell is ``IQM [low, high]`` over seeds (95% stratified-bootstrap CI); ``IQM (seeds: v0, v1, ...)`` where the
cell has too few seeds for a CI (``per_seed``, ``intervals.NO_CI_RULE``); ``IQM (no CI)`` for an aggregate over
such cells (``few_seeds``); or the value alone where it has no CI (low and high NaN; a ``text`` column, where a row
has one, gives a published number as printed); followed by ``(k/n diverged)`` where k of its n runs diverged (a
table with ``diverged`` and ``runs`` columns; ``ppo_jax.report.scores.DIVERGED_RULE``). **Bold by rule**
(``BOLD_RULE``): a cell is bold only where its interval lies wholly above every other interval of its column
(below, where lower is better), so bold never marks a point estimate the data do not separate; a column with
too few seeds has no bold, nor has a column of our values without intervals; a column of published numbers
(``text``) bolds its best value. Numbers keep 3 significant digits (at least one decimal place below 100).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

BOLD_RULE = (
    "bold: the best value of a column whose interval lies wholly above every other interval of that column "
    "(below, where lower is better); no cell is bold where the intervals overlap, nor in a column with too few "
    "seeds for an interval"
)


def fmt(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:#.3g}"  # below 1: 3 significant digits (0.886, 0.0662, 0.500)


def cell(value: float, low: float, high: float, per_seed: str = "", few_seeds: bool = False, text=None) -> str:
    """One cell: ``value [low, high]``, ``value (seeds: ...)`` (``per_seed``: ``v0;v1;...``), ``value (no CI)``
    (``few_seeds`` without per-seed values) or the value alone; ``text`` replaces the formatted value."""
    shown = text if isinstance(text, str) else fmt(value)
    if isinstance(per_seed, str) and per_seed:
        return f"{shown} (seeds: {', '.join(fmt(float(v)) for v in per_seed.split(';'))})"
    if isinstance(few_seeds, (bool, np.bool_)) and few_seeds:
        return f"{shown} (no CI)"
    if math.isfinite(low) or math.isfinite(high):
        return f"{shown} [{fmt(low)}, {fmt(high)}]"
    return shown


def _cells(
    table: pd.DataFrame, settings: list[str], columns: list[str], lower_is_better=()
) -> tuple[list[list[str]], list[list[bool]]]:
    """Cell texts and bold flags, rows = settings, columns = ``columns`` (values of table's ``env`` column)."""
    texts, bold = [], []
    winner = {c: _separated_best(table[table["env"] == c], c in lower_is_better) for c in columns}
    for setting in settings:
        row_text, row_bold = [], []
        for column in columns:
            match = table[(table["env"] == column) & (table["setting"] == setting)]
            if match.empty:
                row_text.append("")
                row_bold.append(False)
                continue
            row = match.iloc[0]
            diverged = int(row["diverged"]) if "diverged" in row and row["diverged"] == row["diverged"] else 0
            note = f" ({diverged}/{int(row['runs'])} diverged)" if diverged else ""
            shown = cell(
                row["iqm"], row["low"], row["high"], row.get("per_seed", ""), row.get("few_seeds"), row.get("text")
            )
            row_text.append(shown + note)
            row_bold.append(setting == winner[column])
        texts.append(row_text)
        bold.append(row_bold)
    return texts, bold


def _separated_best(column: pd.DataFrame, lower_is_better: bool) -> str | None:
    """The setting of ``column`` (rows: setting, iqm, low, high) that ``BOLD_RULE`` bolds, or None."""
    rows = column[column["iqm"].map(lambda x: math.isfinite(x))]
    if rows.empty or ("few_seeds" in rows and rows["few_seeds"].eq(True).any()):
        return None
    sign = -1.0 if lower_is_better else 1.0
    best = rows.loc[(sign * rows["iqm"]).idxmax()]
    others = rows.drop(index=best.name)
    has_intervals = rows[["low", "high"]].map(math.isfinite).any().any()
    if not has_intervals:  # bold only published numbers (a text column): our own values need intervals
        published = "text" in rows and rows["text"].map(lambda t: isinstance(t, str)).all()
        return str(best["setting"]) if published else None
    if others.empty:
        return str(best["setting"])
    near, far = ("high", "low") if lower_is_better else ("low", "high")
    if not (math.isfinite(best[near]) and others[far].map(math.isfinite).all()):
        return None
    separated = (sign * best[near] > sign * others[far]).all()
    return str(best["setting"]) if separated else None


def markdown(
    table: pd.DataFrame, settings: list[str], columns: list[str], corner: str = "setting", lower_is_better=()
) -> str:
    """A GitHub-flavoured Markdown table (``BOLD_RULE``)."""
    texts, bold = _cells(table, settings, columns, lower_is_better)
    lines = ["| " + " | ".join([corner, *columns]) + " |", "|" + "---|" + "---:|" * len(columns)]
    for setting, row, flags in zip(settings, texts, bold, strict=True):
        cells = [f"**{t}**" if b else t for t, b in zip(row, flags, strict=True)]
        lines.append("| " + " | ".join([setting.replace("|", "\\|"), *cells]) + " |")
    return "\n".join(lines) + "\n"


def tex_escape(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"),
        ("_", r"\_"),
        ("%", r"\%"),
        ("&", r"\&"),
        ("#", r"\#"),
        ("$", r"\$"),
    ):
        text = text.replace(char, escaped)
    return text


def latex(
    table: pd.DataFrame,
    settings: list[str],
    columns: list[str],
    caption: str,
    corner: str = "setting",
    lower_is_better=(),
) -> str:
    """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``); bold by ``BOLD_RULE``."""
    texts, bold = _cells(table, settings, columns, lower_is_better)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\caption{{{tex_escape(caption)}}}",
        r"\begin{tabular}{l" + "r" * len(columns) + "}",
        r"\toprule",
        " & ".join([tex_escape(corner), *map(tex_escape, columns)]) + r" \\",
        r"\midrule",
    ]
    for setting, row, flags in zip(settings, texts, bold, strict=True):
        cells = [rf"\textbf{{{tex_escape(t)}}}" if b else tex_escape(t) for t, b in zip(row, flags, strict=True)]
        lines.append(" & ".join([tex_escape(setting), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
