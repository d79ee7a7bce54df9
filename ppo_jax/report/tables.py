"""Tables of final return per setting (rows) x env (columns): Markdown and LaTeX (booktabs).

A cell is ``IQM [low, high]`` over seeds (95% stratified-bootstrap CI), or the value alone where it has no
CI (low and high NaN; a ``text`` column, where a row has one, gives a published number as printed), followed by ``(k/n diverged)`` where k of its n runs diverged (a table with
``diverged`` and ``runs`` columns; ``ppo_jax.report.scores.DIVERGED_RULE``). **Bold by rule**
(``BOLD_RULE``): a cell is bold only where its interval lies wholly above every other interval of its column
(below, where lower is better), so bold never marks a point estimate the data do not separate; a column
without intervals (published numbers) bolds its best value. Numbers keep 3 significant digits (at least one
decimal place below 100).
"""

from __future__ import annotations

import math

import pandas as pd

BOLD_RULE = (
    "bold: the best value of a column whose interval lies wholly above every other interval of that column "
    "(below, where lower is better); no cell is bold where the intervals overlap"
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
            cell = match.iloc[0]
            interval = (
                f" [{fmt(cell['low'])}, {fmt(cell['high'])}]"
                if math.isfinite(cell["low"]) or math.isfinite(cell["high"])
                else ""
            )
            diverged = int(cell["diverged"]) if "diverged" in cell and cell["diverged"] == cell["diverged"] else 0
            note = f" ({diverged}/{int(cell['runs'])} diverged)" if diverged else ""
            value = cell["text"] if isinstance(cell.get("text"), str) else fmt(cell["iqm"])  # text: as published
            row_text.append(value + interval + note)
            row_bold.append(setting == winner[column])
        texts.append(row_text)
        bold.append(row_bold)
    return texts, bold


def _separated_best(column: pd.DataFrame, lower_is_better: bool) -> str | None:
    """The setting of ``column`` (rows: setting, iqm, low, high) that ``BOLD_RULE`` bolds, or None."""
    rows = column[column["iqm"].map(lambda x: math.isfinite(x))]
    if rows.empty:
        return None
    sign = -1.0 if lower_is_better else 1.0
    best = rows.loc[(sign * rows["iqm"]).idxmax()]
    others = rows.drop(index=best.name)
    has_intervals = rows[["low", "high"]].map(math.isfinite).any().any()
    if not has_intervals or others.empty:
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


def _tex(text: str) -> str:
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
        rf"\caption{{{_tex(caption)}}}",
        r"\begin{tabular}{l" + "r" * len(columns) + "}",
        r"\toprule",
        " & ".join([_tex(corner), *map(_tex, columns)]) + r" \\",
        r"\midrule",
    ]
    for setting, row, flags in zip(settings, texts, bold, strict=True):
        cells = [rf"\textbf{{{_tex(t)}}}" if b else _tex(t) for t, b in zip(row, flags, strict=True)]
        lines.append(" & ".join([_tex(setting), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
