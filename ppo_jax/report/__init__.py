"""Paper-ready reports of runs and sweeps: rliable statistics, figures, Markdown/LaTeX tables, index.md/html.

    from ppo_jax.report import make_report
    make_report(["runs/clip_eps_quick"], "reports/clip_eps_quick")      # or: ppo-jax report RUN_DIR... --out DIR

Modules: ``sources`` (read run/sweep directories), ``scores`` (final return,
reference scores, normalization), ``statistics`` (rliable interval estimates),
``figures``, ``tables``, ``index``, ``build`` (``make_report``).
"""

from ppo_jax.report.build import make_report
from ppo_jax.report.sources import ReportError

__all__ = ["make_report", "ReportError"]
