"""The project is citable: a valid CITATION.cff whose version matches the package's."""

import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from cffconvert import Citation

import ppo_jax

ROOT = Path(__file__).resolve().parents[1]


def test_citation_cff_is_valid_and_matches_the_version():
    text = (ROOT / "CITATION.cff").read_text()
    Citation(cffstr=text).validate()  # raises on a file that breaks the CFF 1.2.0 schema
    assert yaml.safe_load(text)["version"] == ppo_jax.__version__


def test_version_is_one_number_everywhere():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == ppo_jax.__version__
    assert f"## [{ppo_jax.__version__}]" in (ROOT / "CHANGELOG.md").read_text()
    assert f"version = {{{ppo_jax.__version__}}}" in (ROOT / "README.md").read_text()


def test_an_invalid_citation_is_rejected():
    with pytest.raises(jsonschema.ValidationError, match="authors"):
        Citation(cffstr="cff-version: 1.2.0\ntitle: x\n").validate()  # no authors, no message
