"""Draw the README's figure from committed data: the clip range x entropy coefficient grid at the quick budget.

    python scripts/hero_figure.py          # writes docs/assets/hero.png

Reads docs/results/clip_eps_x_ent_coef_quick/per_env.csv (the committed report of
experiments/clip_eps_x_ent_coef_quick.yaml: IQM final return and 95% CI per env x setting, 8 seeds) and draws it
with the report's own heat map (``ppo_jax.report.figures.heatmap``), so the figure is the report's, not a redrawing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ppo_jax.report.figures import heatmap

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "results" / "clip_eps_x_ent_coef_quick" / "per_env.csv"


def grid_cells(per_env: pd.DataFrame, row_field: str = "clip_eps", col_field: str = "ent_coef") -> pd.DataFrame:
    """One row per env x setting with the two fields parsed out of the setting's label ("clip_eps=0.05, ent_coef=0")."""
    fields = per_env["setting"].map(lambda label: dict(part.split("=") for part in label.split(", ")))
    return pd.DataFrame(
        {
            "env": per_env["env"],
            "row": fields.map(lambda f: float(f[row_field])),
            "col": fields.map(lambda f: float(f[col_field])),
            "iqm": per_env["iqm"],
            "low": per_env["low"],
            "high": per_env["high"],
        }
    )


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets", help="folder for hero.png")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    per_env = pd.read_csv(SOURCE)
    heatmap(grid_cells(per_env), "clip_eps", "ent_coef", list(dict.fromkeys(per_env["env"])), args.out, "hero")
    (args.out / "hero.pdf").unlink()  # the report writes a PDF beside each PNG; the README shows the PNG
    print(f"wrote {args.out / 'hero.png'} from {SOURCE.relative_to(ROOT)}")
    return args.out / "hero.png"


if __name__ == "__main__":
    main()
