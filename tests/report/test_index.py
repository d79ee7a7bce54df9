"""The provenance a report prints: every commit that wrote a sweep's chunks, not only the first process's."""

from __future__ import annotations

from ppo_jax.report.index import sources_line


def source(name, **meta):
    return {"name": name, "metadata": meta}


def test_every_process_commit_is_named_once_and_a_dirty_tree_is_flagged():
    parts = source(
        "sweep",
        git_commit="a" * 40,
        git_dirty=False,
        processes=[
            {"host": "h", "pid": 1, "git_commit": "a" * 40, "git_dirty": False, "chunks": 3},
            {"host": "h", "pid": 2, "git_commit": "b" * 40, "git_dirty": True, "chunks": 2},
            {"host": "g", "pid": 3, "git_commit": "a" * 40, "git_dirty": False, "chunks": 1},
        ],
    )
    assert sources_line([parts]) == f"Sources: sweep at commits {'a' * 12}, {'b' * 12} (uncommitted changes)."


def test_a_directory_without_processes_names_its_own_commit_or_unknown():
    old_sweep = source("old", git_commit="c" * 40, git_dirty=True, processes=[{"pid": 1, "chunks": 4}])
    assert sources_line([old_sweep, source("run")]) == (
        f"Sources: old at commit {'c' * 12} (uncommitted changes); run at commit unknown."
    )
