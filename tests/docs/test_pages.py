"""Every command and code block of the tutorials runs, at the budget its ``ci:`` directives set (tests/docs/fences.py).

Each page runs in a fresh directory that links the repository's experiments/, scripts/, tests/ and docs/, so its
commands read as typed from the repository root; its outputs stay in the temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.fences import FenceError, parse

ROOT = Path(__file__).resolve().parents[2]
EXECUTABLE_PAGES = sorted(
    [ROOT / "docs" / "getting-started.md"]
    + [p for part in ("tutorials", "concepts", "extend") for p in (ROOT / "docs" / part).glob("*.md")]
)
LINKED = ("experiments", "scripts", "tests", "docs")
FENCE_TIMEOUT_S = 600


def _environment(cache: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # ppo-jax and python of this venv
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"  # tests.helpers etc. import as from the root
    env.pop("XLA_FLAGS", None)  # a page sets its own device count where it needs one
    env["JAX_COMPILATION_CACHE_DIR"] = str(cache)  # pages that compile the same program compile it once
    return env


@pytest.fixture(scope="module")
def compilation_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xla_cache")


@pytest.mark.parametrize("page", EXECUTABLE_PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_page_runs(page, tmp_path, compilation_cache):
    fences = [f for f in parse(page.read_text(), page.name) if f.runs]
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    env, timings = _environment(compilation_cache), []
    for n, fence in enumerate(fences):
        text = fence.command_text()
        if fence.write is not None:
            target = tmp_path / fence.write
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            continue
        if fence.lang == "python":
            script = tmp_path / f"_fence_{n}.py"
            script.write_text(text)
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", text]
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=FENCE_TIMEOUT_S)
        timings.append((fence.line, time.perf_counter() - start))
        assert done.returncode == 0, (
            f"{page.relative_to(ROOT)}:{fence.line}: the {fence.lang} fence exited {done.returncode}\n"
            f"--- fence (as run) ---\n{text}--- stdout ---\n{done.stdout[-4000:]}--- stderr ---\n{done.stderr[-4000:]}"
        )
    print(", ".join(f"line {line}: {s:.1f} s" for line, s in timings))


def test_every_executable_page_is_found():
    assert (ROOT / "docs" / "getting-started.md") in EXECUTABLE_PAGES
    assert any(p.parent.name == "tutorials" for p in EXECUTABLE_PAGES)


SAMPLE = """Intro.

<!-- ci: replace "--num-updates 200" "--num-updates 2" -->
<!-- ci: replace "runs/a" "runs/b" -->
```bash
ppo-jax train --num-updates 200 --out runs/a
```

```text
output, not run
```

<!-- ci: write specs/s.yaml -->
```yaml
name: s
```

<!-- ci: skip needs two hosts -->
```bash
srun ppo-jax sweep
```

1. A list item with an indented fence:

    ```python
    print("x")
    ```
"""


def test_fences_and_directives_are_read_as_written():
    fences = parse(SAMPLE)
    assert [(f.lang, f.line, f.runs) for f in fences] == [
        ("bash", 5, True),
        ("text", 9, False),
        ("yaml", 14, True),
        ("bash", 19, False),
        ("python", 25, True),
    ]
    assert fences[0].command_text() == "ppo-jax train --num-updates 2 --out runs/b\n"
    assert fences[2].write == "specs/s.yaml" and fences[2].command_text() == "name: s\n"
    assert fences[3].skip == "needs two hosts"
    assert fences[4].text == 'print("x")\n'


@pytest.mark.parametrize(
    "markdown, says",
    [
        ('<!-- ci: replace "a" -->\n```bash\na\n```\n', "two quoted strings"),
        ("<!-- ci: skip -->\n```bash\na\n```\n", "needs a reason"),
        ("<!-- ci: write /etc/x -->\n```yaml\na\n```\n", "relative path"),
        ("<!-- ci: frobnicate -->\n```bash\na\n```\n", "unknown directive"),
        ("<!-- ci: skip why -->\n\nSome text.\n```bash\na\n```\n", "right before a fence"),
        ("```bash\na\n", "never closed"),
    ],
)
def test_a_malformed_directive_names_its_line(markdown, says):
    with pytest.raises(FenceError, match=says):
        parse(markdown)


def test_a_replace_can_add_lines():
    (fence,) = parse(
        '<!-- ci: replace "model: decoder" "model: decoder\\n  model_dim: 16" -->\n```yaml\nmodel: decoder\n```\n'
    )
    assert fence.command_text() == "model: decoder\n  model_dim: 16\n"


def test_a_replace_that_matches_nothing_is_an_error():
    (fence,) = parse('<!-- ci: replace "--seeds 8" "--seeds 1" -->\n```bash\nppo-jax train --seeds 4\n```\n')
    with pytest.raises(FenceError, match="does not occur"):
        fence.command_text()
