"""The documentation site builds with no warning (``mkdocs build --strict``), its generated pages are current, and
the README stays a front door: short, with the test command CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert done.returncode == 0, "\n".join(warnings) or done.stderr[-3000:]
    assert (tmp_path / "site" / "tutorials" / "first-run" / "index.html").exists()
    api = (tmp_path / "site" / "reference" / "core" / "index.html").read_text()
    assert "compute_gae" in api  # mkdocstrings rendered the docstrings, not just the headings
    objective = (tmp_path / "site" / "concepts" / "objective" / "index.html").read_text()
    assert "<math" in objective and "arithmatex" not in objective  # TeX became MathML (docs/hooks/mathml.py)


def test_the_api_pages_are_current():
    done = subprocess.run([sys.executable, "scripts/api_pages.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_module_is_in_the_module_map():
    index = (ROOT / "docs" / "reference" / "index.md").read_text()
    for path in (ROOT / "ppo_jax").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name not in ("ppo_jax.moved_modules", "ppo_jax.__main__"):
            assert f"| `{name}` |" in index, f"{name} is missing from docs/reference/index.md"


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if line.startswith('pip install -e ".[test'))
    assert test_command in ci.splitlines(), "the README's test command is not the one .ci/run runs"
    assert not re.search(r"\b[0-9a-f]{7,40}\b", readme), "no commit hashes in the README: results live in the docs"
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_every_subcommand_help_points_to_pages_that_exist():
    from ppo_jax.cli import SUBCOMMANDS

    for name, command in SUBCOMMANDS.items():
        if name == "envs":
            continue
        pages = re.findall(r"docs/[\w/.-]+\.md", command.__doc__)
        assert pages, f"ppo-jax {name} --help names no docs page"
        for page in pages:
            assert (ROOT / page).exists(), f"ppo-jax {name} --help names {page}, which does not exist"
