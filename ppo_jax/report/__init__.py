"""Paper-ready reports of runs and sweeps: rliable statistics, figures, Markdown/LaTeX tables, index.md/html.

    from ppo_jax.report import make_report
    make_report(["runs/clip_eps_quick"], "reports/clip_eps_quick")      # or: ppo-jax report RUN_DIR... --out DIR

Modules: ``sources`` (read run/sweep directories of one task), ``scores`` (final
values, reference scores, normalization), ``intervals`` (rliable interval
estimates), ``frontier`` (RLHF: reward vs KL to the reference), ``paper_table1``
(the PPO paper's Table 1 beside ours, ``--normalize best-setting``), ``figures``,
``tables``, ``index``, ``sections`` (a report's parts: the ``Section`` interface), ``build`` (``make_report``
and ``SECTIONS``, the sections in order; ``register_section`` adds one from outside the package).
"""

from ppo_jax.errors import ReportError
from ppo_jax.report.build import make_report

__all__ = ["make_report", "ReportError"]
