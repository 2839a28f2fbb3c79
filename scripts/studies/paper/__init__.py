"""The BALLAD paper's four questions (REPRODUCTION.md): the runs they need, and their
figures, tables and key numbers drawn from the stored results only.

Three runs, each a resumable grid in its own folder:

* ``main``: BALLAD (entropy), BALLAD (cosine), All-in-AL, All-in-LR, default costs, for each
  prior. Q1, Q2 and Q3 are read from it.
* ``costs``: BALLAD and the All-in baselines with c_fp = 10, and with c_fn = 10 (Q4).
* ``bayes``: Q1 with the paper's threshold search (gp_minimize) on a few data sets and seeds,
  compared with ``main``.

The table builders (``q1_summary``, ``q2_table``, ``q3_stats``, ``q4_table``, ...) are pure
functions of the tidy results; ``report`` writes their tables and figures and collects the
key numbers beside the paper's (``paper_vs_ours.md``).

The study is split by job: ``runs`` (the grids and their runs), ``questions`` (the report's
writer and the tables, figures and key numbers of each question), ``figures`` (its own
figures of cost per round and the reward-difference tables) and ``key_numbers`` (ours
beside the paper's, and the report of the questions asked).
"""

from __future__ import annotations

from scripts.studies.paper.key_numbers import (
    key_numbers_page,
    pretty,
    report,
)
from scripts.studies.paper.questions import (
    Writer,
    ballad_dynamics,
    bayes,
    bayes_comparison,
    bayes_key,
    budget_percent,
    conditional_cost,
    first_better,
    q1,
    q1_conditional,
    q1_key,
    q1_summary,
    q2,
    q2_key,
    q2_shares,
    q2_table,
    q3,
    q3_stats,
    q4,
    q4_key,
    q4_table,
)
from scripts.studies.paper.runs import (
    BALLADS,
    DEFAULT_BAYES_DATASETS,
    MAIN_AGENTS,
    PAPER,
    Q1_AGENTS,
    Q4_COSTS,
    QUESTIONS,
    Experiment,
    Key,
    experiments,
    run_experiments,
)

__all__ = ["BALLADS", "DEFAULT_BAYES_DATASETS", "MAIN_AGENTS", "PAPER", "Q1_AGENTS", "Q4_COSTS",
           "QUESTIONS", "Experiment", "Key", "Writer", "ballad_dynamics", "bayes",
           "bayes_comparison", "bayes_key", "budget_percent", "conditional_cost", "experiments",
           "first_better", "key_numbers_page", "pretty", "q1", "q1_conditional", "q1_key",
           "q1_summary", "q2", "q2_key", "q2_shares", "q2_table", "q3", "q3_stats", "q4", "q4_key",
           "q4_table", "report", "run_experiments"]
