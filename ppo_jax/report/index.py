"""``index.md`` and a static ``index.html`` tying a report together: definitions, provenance, tables, figures."""

from __future__ import annotations

import html
from pathlib import Path

from ppo_jax.report.intervals import MIN_SEEDS, NO_CI_RULE
from ppo_jax.report.tables import BOLD_RULE, tex_escape


def commits(meta: dict) -> list[tuple[str, bool]]:
    """(commit, dirty) of every tree that wrote a directory: the one that started it, then each process that wrote a
    sweep's chunks (metadata.json ``processes``, where the chunks recorded it); "unknown" where git could not tell."""
    trees = [(meta.get("git_commit") or "unknown", bool(meta.get("git_dirty")))]
    trees += [(p["git_commit"], bool(p.get("git_dirty"))) for p in meta.get("processes") or [] if p.get("git_commit")]
    return list(dict.fromkeys(trees))


def _commit_text(meta: dict, width: int | None = None) -> str:
    return ", ".join(f"{commit[:width]}{' (uncommitted changes)' if dirty else ''}" for commit, dirty in commits(meta))


def sources_line(provenance: list[dict]) -> str:
    """``Sources: NAME at commit C (uncommitted changes), ...``: the line every table of a report ends with (every
    commit a sweep's processes ran, where its parts ran several)."""
    parts = []
    for source in provenance:
        meta = source["metadata"] or {}
        trees = commits(meta)
        parts.append(f"{source['name']} at commit{'s' if len(trees) > 1 else ''} {_commit_text(meta, 12)}")
    return "Sources: " + "; ".join(parts) + "."


def stamp_tables(out: Path, names: list[str], line: str) -> None:
    """End every Markdown table in ``names`` with ``line`` and every LaTeX table's caption with it."""
    for name in names:
        path = out / name
        text = path.read_text()
        if name.endswith(".md"):
            path.write_text(text.rstrip("\n") + f"\n\n{line}\n")
        elif name.endswith(".tex"):
            head, caption, tail = text.partition("\\caption{")
            if caption:
                body, _, rest = tail.partition("}\n")
                path.write_text(f"{head}{caption}{body} {tex_escape(line)}}}\n{rest}")


def _provenance(record: dict) -> list[str]:
    lines = []
    for source in record["sources"]:
        meta = source["metadata"] or {}
        versions = meta.get("versions") or {}
        devices = meta.get("devices") or []
        hardware = f"{len(devices)} x {meta.get('backend', '?')} device(s), {meta.get('cpu_count', '?')} CPUs, {meta.get('platform', '?')}"
        command = meta.get("command_line") or "?"
        processes = [
            f"{p.get('host')} pid {p.get('pid')} at {(p.get('git_commit') or 'unknown')[:12]}"
            f"{' (uncommitted changes)' if p.get('git_dirty') else ''}: {p.get('chunks')} chunk(s)"
            for p in meta.get("processes") or []
            if p.get("git_commit")
        ]
        lines += [
            f"- **{source['name']}** ({source['kind']} directory `{source['path']}`)",
            f"  - commit `{_commit_text(meta)}`; command `{command}`",
            *(["  - processes that wrote its chunks: " + "; ".join(processes)] if processes else []),
            "  - versions: " + (", ".join(f"{k} {v}" for k, v in versions.items()) or "?"),
            f"  - hardware: {hardware}; started {meta.get('start_time', '?')}, ended {meta.get('end_time', '?')}",
        ]
    return lines


def _definitions(record: dict) -> list[str]:
    p = record["parameters"]
    score = record.get("score", {"metric": "episode_return", "label": "episodic return"})
    reference = (
        (
            " (--normalize best-setting: the reference is the best setting's mean final return on every env, as in "
            "the PPO paper, Schulman et al. 2017, sec. 6.1)"
        )
        if p.get("normalize") == "best-setting"
        else ""
    )
    lines = [
        f"- **Final return** of a run ({record.get('task', 'ppo')} task): mean {score['label']} (`{score['metric']}`) over "
        f"the last {p['last_percent']:g}% of its logged updates (from its own metrics table). **Evaluation** (if "
        "present): mean return of fresh episodes played by the final parameters, sampling actions (stochastic) or "
        "taking the mode (deterministic).",
        f"- **Normalized score**: (final return - random) / (best - random) per env, so random play = 0 and the reference = 1{reference}:",
    ]
    for env, ref in record["normalizers"].items():
        lines.append(f"  - {env}: random {ref['random']:g}, best {ref['best']:g} ({ref['source']})")
    lines.append(
        f"- **Statistics** (rliable; Agarwal et al. 2021): IQM = interquartile mean over runs; 95% CIs by "
        f"{p['bootstrap']} with {p['reps']} replicates, NumPy seed {p['seed']}. Aggregates over envs use the normalized "
        "scores of every run on every env; the optimality gap is the mean shortfall below 1 (lower is better); "
        "P(X > Y) is the Mann-Whitney probability that a run of X beats a run of Y on the same env, averaged over envs. "
        f"Tables: {BOLD_RULE}; {NO_CI_RULE.format(n=p.get('min_seeds_for_ci', MIN_SEEDS))}. Every run's final "
        "values are in final_returns.csv and its curves in curves.csv."
    )
    divergence = record.get("divergence")
    if divergence:
        unrecorded = [
            s["name"] for s, known in zip(record["sources"], divergence["recorded"], strict=True) if not known
        ]
        lines.append(f"- **Diverged runs**: {divergence['rule']}")
        if unrecorded:
            lines.append(
                f"  - {', '.join(unrecorded)}: written before non_finite was recorded; a run there counts as "
                "diverged from its first update with a non-finite loss."
            )
        found = divergence["runs"]
        shown = "; ".join(f"{r['env']}, {r['setting']}, seed {r['seed']} at update {r['update']}" for r in found[:20])
        more = f"; and {len(found) - 20} more (report.json)" if len(found) > 20 else ""
        lines.append(
            f"  - {len(found)} run{'s' if len(found) != 1 else ''} diverged" + (f": {shown}{more}." if found else ".")
        )
    if record["setting_fields"]:
        lines.append(f"- Settings differ in: {', '.join(record['setting_fields'])}.")
    return lines


def write_index(out: Path, result: dict, record: dict) -> None:
    """Write ``index.md`` and ``index.html`` in ``out`` from the analysis ``result`` and ``report.json`` ``record``:
    each Markdown table of ``result["files"]`` and each figure under its heading in ``result["titles"]`` (the
    sections', ``ppo_jax.report.sections.Section.titles``; else its name), in the order written."""
    files, titles = result["files"], result["titles"]
    names = ", ".join(s["name"] for s in record["sources"])
    md = [
        f"# Report: {names}",
        "",
        "## Definitions",
        "",
        *_definitions(record),
        "",
        "## Provenance",
        "",
        *_provenance(record),
        "",
    ]
    specs = [(s["name"], s["kind"], s.get("spec")) for s in record["sources"] if s.get("spec")]
    for name, kind, text in specs:
        title = "spec.yaml" if kind == "sweep" else "config.json"
        md += [
            f"<details><summary>{name}: {title}</summary>",
            "",
            "```" + ("yaml" if kind == "sweep" else "json"),
            text.rstrip(),
            "```",
            "</details>",
            "",
        ]
    tables = [(name, titles.get(name, name)) for name in files["tables"] if name.endswith(".md")]
    for name, title in tables:
        md += [
            f"## {title}",
            "",
            (out / name).read_text(),
            f"LaTeX: [{name.replace('.md', '.tex')}]({name.replace('.md', '.tex')})"
            if (out / name.replace(".md", ".tex")).exists()
            else "",
            "",
        ]
    if "baseline" in result:
        md += [f"Baseline for the probability of improvement: **{result['baseline']}**.", ""]
    stems = list(dict.fromkeys(f.rsplit(".", 1)[0] for f in files["figures"]))
    for stem in stems:
        md += [
            f"## {titles.get(stem, stem)}",
            "",
            f"![{stem}]({stem}.png)",
            "",
            f"PDF: [{stem}.pdf]({stem}.pdf)",
            "",
        ]
    md += ["## Data", "", *[f"- [{f}]({f})" for f in files["data"]], "- [report.json](report.json)", ""]
    (out / "index.md").write_text("\n".join(md))

    body = [
        f"<h1>Report: {html.escape(names)}</h1>",
        "<h2>Definitions</h2>",
        _html_list(_definitions(record)),
        "<h2>Provenance</h2>",
        _html_list(_provenance(record)),
    ]
    for name, kind, text in specs:
        title = "spec.yaml" if kind == "sweep" else "config.json"
        body.append(f"<details><summary>{html.escape(name)}: {title}</summary><pre>{html.escape(text)}</pre></details>")
    for name, title in tables:
        body += [f"<h2>{html.escape(title)}</h2>", _html_table((out / name).read_text())]
    for stem in stems:
        body += [
            f"<h2>{html.escape(titles.get(stem, stem))}</h2>",
            f'<p><img src="{stem}.png" alt="{stem}" style="max-width:100%"> <a href="{stem}.pdf">PDF</a></p>',
        ]
    body += [
        "<h2>Data</h2>",
        "<ul>" + "".join(f'<li><a href="{f}">{f}</a></li>' for f in [*files["data"], "report.json"]) + "</ul>",
    ]
    page = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>ppo_jax report</title><style>"
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    (out / "index.html").write_text(page)


def _inline(text: str) -> str:
    """Markdown **bold** and `code` -> HTML, after escaping."""
    parts = html.escape(text).split("**")
    text = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_list(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_inline(line.strip().lstrip('- '))}</li>" for line in lines) + "</ul>"


def _html_table(markdown: str) -> str:
    rows = [line.strip().strip("|").split(" | ") for line in markdown.strip().splitlines()]
    head, body = rows[0], rows[2:]
    out = ["<table><tr>" + "".join(f"<th>{_inline(c.strip())}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{_inline(c.strip())}</td>" for c in row) + "</tr>" for row in body]
    return "".join(out) + "</table>"
