"""One colour per setting: no two settings of a figure share a colour, or nearly so."""

import itertools

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from ppo_jax.report.figures import colours


def closest_pair(n: int) -> float:
    """The smallest L1 distance in RGB (0..1 per channel) between two of ``colours(n)``."""
    rgb = [np.array(to_rgb(c)) for c in colours(n)]
    assert len(rgb) == n
    return min(np.abs(a - b).sum() for a, b in itertools.combinations(rgb, 2))


@pytest.mark.parametrize("n", [2, 6, 8, 9, 10])
def test_up_to_ten_settings_get_distinct_hues(n):
    # a cividis gradient of 9 steps (the colours before) had two navy blues 0.21 apart: read as one colour
    assert closest_pair(n) > 0.3


def test_twenty_settings_are_still_told_apart():
    assert closest_pair(20) > 0.1  # tab20: a dark and a light shade of each hue
