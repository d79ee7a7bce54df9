"""The README's figure: the committed per-env table's labels parsed into the grid the heat map draws."""

import pandas as pd
from PIL import Image

from scripts.hero_figure import SOURCE, grid_cells, main


def test_labels_parse_into_the_two_fields():
    per_env = pd.DataFrame(
        {
            "env": ["A", "A"],
            "setting": ["clip_eps=0.05, ent_coef=0", "clip_eps=0.3, ent_coef=0.003"],
            "iqm": [1.0, 2.0],
            "low": [0.5, 1.5],
            "high": [1.5, 2.5],
        }
    )
    cells = grid_cells(per_env)
    assert cells[["row", "col"]].values.tolist() == [[0.05, 0.0], [0.3, 0.003]]
    assert cells["iqm"].tolist() == [1.0, 2.0]


def test_the_committed_grid_is_complete_and_the_figure_is_drawn(tmp_path):
    cells = grid_cells(pd.read_csv(SOURCE))
    for _, env in cells.groupby("env"):  # the spec's 5 x 4 grid, every cell once
        assert sorted(set(env["row"])) == [0.05, 0.1, 0.2, 0.3, 0.5]
        assert sorted(set(env["col"])) == [0.0, 0.003, 0.01, 0.03]
        assert len(env) == 20
    png = main(["--out", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hero.png"]
    with Image.open(png) as image:
        assert image.width > 800
