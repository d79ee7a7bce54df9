"""The package's import graph: no cycles (module-level or inside functions), the engines imported only as
engines, and the task packages (``rl``, ``lm``) apart: neither imports the other, and the shared modules
import neither (only the registry, the package root, the command line and the moved-module aliases name them).

Every ``import`` / ``from ... import`` of a ``ppo_jax`` module in every source file
is read with ``ast`` (wherever it sits: module level, inside a function or a
``TYPE_CHECKING`` block), resolved to the module it names, and the graph of those
edges must be acyclic. ``from pkg import name`` counts as importing ``pkg.name``
when that is a module, else ``pkg``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import ppo_jax

PACKAGE_DIR = Path(ppo_jax.__file__).resolve().parent
ENGINES = {"ppo_jax.rl.train", "ppo_jax.lm.train"}
TASK_PACKAGES = ("ppo_jax.rl", "ppo_jax.lm")
MAY_NAME_TASKS = {"ppo_jax", "ppo_jax.task_registry", "ppo_jax.moved_modules"}  # and ppo_jax.cli.*


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The longest prefix of dotted ``name`` that is a ppo_jax module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        edges = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import: resolve against this module's package
                    base = module.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                names = [f"{source}.{alias.name}" for alias in node.names] or [source]
            for name in names:
                target = _resolve(name)
                if target is not None and target != module:
                    edges.add(target)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or None; depth-first search with colours."""
    colour, stack = {}, []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == "grey":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in colour:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = "black"
        return None

    for node in sorted(graph):
        if node not in colour:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_finds_a_known_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_reads_function_level_imports():
    graph = import_graph()
    assert "ppo_jax.rl.envs" in graph["ppo_jax.rl.build_network"]  # imported inside make_network
    assert "ppo_jax.rl.config" in graph["ppo_jax.rl.task"]
    assert "ppo_jax.initializers" in graph["ppo_jax.lm.gru"]


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_engines_are_imported_only_through_their_task():
    """Nothing imports a training engine to learn metric names: only the task's engine loader (``Task.engine``, a
    function in the task's module holding the import) loads one, each its own."""
    graph = import_graph()
    importers = {module: edges & ENGINES for module, edges in graph.items() if edges & ENGINES}
    assert importers == {"ppo_jax.rl.task": {"ppo_jax.rl.train"}, "ppo_jax.lm.task": {"ppo_jax.lm.train"}}


def test_ppo_jax_rl_train_is_the_module():
    import ppo_jax.rl.train as module

    assert module.__name__ == "ppo_jax.rl.train" and callable(module.train)
    assert importlib.import_module("ppo_jax.rl.train") is module


def _package_of(module: str) -> str | None:
    """The task package ``module`` belongs to, or None for a shared module."""
    return next((pkg for pkg in TASK_PACKAGES if module == pkg or module.startswith(pkg + ".")), None)


def test_task_packages_never_import_each_other():
    graph = import_graph()
    crossings = [
        f"{module} -> {target}"
        for module, edges in graph.items()
        for target in edges
        if _package_of(module) and _package_of(target) and _package_of(module) != _package_of(target)
    ]
    assert crossings == [], f"a task package imports another: {crossings}"


def test_shared_modules_import_no_task_package():
    """The root, sweep/, storage/ and report/ are shared: they reach a task only through the registry."""
    graph = import_graph()
    leaks = [
        f"{module} -> {target}"
        for module, edges in graph.items()
        for target in edges
        if _package_of(module) is None
        and module not in MAY_NAME_TASKS
        and not module.startswith("ppo_jax.cli")
        and _package_of(target)
    ]
    assert leaks == [], f"shared modules importing a task package: {leaks}"


def test_the_crossing_check_catches_a_crossing():
    assert _package_of("ppo_jax.lm.models") == "ppo_jax.lm" and _package_of("ppo_jax.rl.networks") == "ppo_jax.rl"
    assert _package_of("ppo_jax.rlx") is None and _package_of("ppo_jax.losses") is None


def test_old_module_paths_still_import_with_a_deprecation_warning():
    import warnings

    import ppo_jax.rl.train

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("ppo_jax.update_loop")
        from ppo_jax.ppo_loss import clipped_surrogate_loss  # now in ppo_jax.losses
    assert any(issubclass(w.category, DeprecationWarning) and "ppo_jax.scan_updates" in str(w.message) for w in caught)
    assert old.scan_updates is importlib.import_module("ppo_jax.scan_updates").scan_updates
    assert clipped_surrogate_loss is importlib.import_module("ppo_jax.losses").clipped_surrogate_loss
    assert importlib.import_module("ppo_jax.train").train is ppo_jax.rl.train.train
