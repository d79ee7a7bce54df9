"""No switch name is spelled outside its table: code asks the registry, it does not branch on a name.

For every switch family (each ``Registry`` that scripts/switch_tables.py documents),
every ``ppo_jax`` source file other than the table's own module is parsed, and a
comparison of the family's config field with a literal name (``cfg.kl_mode == "none"``,
``self.advantage in ("grpo", "rloo")``) is a stray spelling: the variant's behaviour
belongs in its entry. docs/switches.md is checked to be what the tables generate.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import ppo_jax

PACKAGE_DIR = Path(ppo_jax.__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
SCRIPT = ROOT / "scripts" / "switch_tables.py"


def _switch_tables():
    spec = importlib.util.spec_from_file_location("switch_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _field_of(node) -> str | None:
    """``cfg.kl_mode`` / ``self.kl_mode`` / ``kl_mode`` / ``record["kl_mode"]`` -> "kl_mode"; anything else None."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if isinstance(node, ast.Name):
        return node.id
    return None


def _literals(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_literals(element) for element in node.elts)) if node.elts else set()
    return set()


def branches_on_names(source: str, field: str, names: set[str]) -> list[tuple[int, str]]:
    """``[(line, name)]``: comparisons of ``field`` with a literal in ``names`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if not any(_field_of(operand) == field for operand in operands):
            continue
        for operand in operands:
            found += [(node.lineno, name) for name in sorted(_literals(operand) & names)]
    return found


def test_the_checker_finds_a_branch_on_a_name():
    source = 'if cfg.kl_mode == "none":\n    pass\nif self.advantage in ("grpo", "x"):\n    pass\nif name == "none":\n    pass\n'
    source += 'if config["kl_mode"] != "loss":\n    pass\n'
    assert branches_on_names(source, "kl_mode", {"none", "loss"}) == [(1, "none"), (7, "loss")]
    assert branches_on_names(source, "advantage", {"grpo", "gae"}) == [(3, "grpo")]


def test_no_switch_name_is_spelled_outside_its_table():
    stray = []
    for _, registries in _switch_tables().tables():
        for registry in registries:
            homes = {Path(sys.modules[type(entry).__module__].__file__).resolve() for _, entry in registry.items()} | {
                Path(sys.modules[_module_of(registry)].__file__).resolve()
            }
            for path in sorted(PACKAGE_DIR.rglob("*.py")):
                if path.resolve() in homes:
                    continue
                for line, name in branches_on_names(path.read_text(), registry.field, set(registry.names())):
                    stray.append(f"{path.relative_to(ROOT)}:{line}: {registry.field} compared with {name!r}")
    assert not stray, "branch on the table's entry instead:\n" + "\n".join(stray)


def _module_of(registry) -> str:
    """The module whose globals hold ``registry``."""
    for name, module in list(sys.modules.items()):
        if name.startswith("ppo_jax") and any(value is registry for value in vars(module).values()):
            return name
    raise LookupError(registry.field)


def test_docs_switches_md_is_what_the_tables_generate():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
