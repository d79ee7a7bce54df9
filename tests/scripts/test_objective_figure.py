"""scripts/objective_figure.py draws the package's clipped objective right: its curves and slopes against
hand-worked values of min(r A, clip(r, 1-eps, 1+eps) A) (Schulman et al. 2017, eq. 7) and against that formula in
NumPy on the whole grid; main writes a ~900 px PNG, the same bytes twice."""

import importlib.util
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figure():
    """scripts/objective_figure.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("objective_figure", ROOT / "scripts" / "objective_figure.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["objective_figure"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["objective_figure"]


# (r, A, eps): objective and slope d/dr of clip (with the min) and of clip_no_min (the clipped term alone), by hand
HAND_WORKED = [
    # A > 0 above the range: both flat at (1+eps) A
    ((1.5, 1.0, 0.2), (1.2, 0.0), (1.2, 0.0)),
    ((1.5, 1.0, 0.3), (1.3, 0.0), (1.3, 0.0)),
    # A > 0 below the range: the min keeps r A (slope A); the clipped term alone is flat at (1-eps) A
    ((0.5, 1.0, 0.2), (0.5, 1.0), (0.8, 0.0)),
    # A < 0 below the range: both flat at (1-eps) A
    ((0.5, -1.0, 0.2), (-0.8, 0.0), (-0.8, 0.0)),
    # A < 0 above the range: the min keeps r A (slope A); the clipped term alone is flat at (1+eps) A
    ((1.5, -1.0, 0.2), (-1.5, -1.0), (-1.2, 0.0)),
    ((1.5, -2.0, 0.2), (-3.0, -2.0), (-2.4, 0.0)),
    # inside the range: r A and slope A for both
    ((1.1, 2.0, 0.2), (2.2, 2.0), (2.2, 2.0)),
    ((0.9, -0.5, 0.2), (-0.45, -0.5), (-0.45, -0.5)),
]


@pytest.mark.parametrize(("point", "with_min", "without_min"), HAND_WORKED)
def test_hand_worked_points(figure, point, with_min, without_min):
    r, advantage, eps = point
    curves = figure.objective_curves(np.array([r]), advantage, eps)
    for name, (value, slope) in (("clip", with_min), ("clip_no_min", without_min)):
        np.testing.assert_allclose(curves[name][0][0], value, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(curves[name][1][0], slope, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(curves["unclipped"][0][0], r * advantage, atol=1e-6)
    np.testing.assert_allclose(curves["unclipped"][1][0], advantage, atol=1e-5)


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_the_drawn_grid_is_the_formula(figure, advantage):
    """Every point the figure draws equals eq. 7 in NumPy, and the shaded (zero-gradient) range of L^CLIP is
    r > 1 + eps for A > 0 and r < 1 - eps for A < 0 (grid points on an edge left out)."""
    r, eps = figure.RATIOS, figure.CLIP_EPS
    curves = figure.objective_curves(r, advantage, eps)
    clipped = np.clip(r, 1 - eps, 1 + eps) * advantage
    np.testing.assert_allclose(curves["clip"][0], np.minimum(r * advantage, clipped), atol=1e-6)
    np.testing.assert_allclose(curves["clip_no_min"][0], clipped, atol=1e-6)
    off_edges = (np.abs(r - (1 - eps)) > 1e-3) & (np.abs(r - (1 + eps)) > 1e-3)
    flat = r > 1 + eps if advantage > 0 else r < 1 - eps
    np.testing.assert_array_equal((curves["clip"][1] == 0)[off_edges], flat[off_edges])
    outside = (r < 1 - eps) | (r > 1 + eps)
    np.testing.assert_array_equal((curves["clip_no_min"][1] == 0)[off_edges], outside[off_edges])


def test_main_writes_a_900_px_png_the_same_bytes_twice(figure, tmp_path):
    first, second = tmp_path / "a" / "clip.png", tmp_path / "b.png"
    assert figure.main(["--out", str(first)]) == 0
    figure.main(["--out", str(second)])
    data = first.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (900, 380)
    assert data == second.read_bytes()
