"""The guide says what the code does (issue 30): every registered agent and query strategy
in its tables (``docs/agents.md``, ``docs/environment.md``), ``probe-switch``'s observation
version, the cache folder's name and the mirror's schemes (``docs/datasets.md``), the
summary's ``margin`` (``docs/experiments.md``); the architecture notes the plugins."""

from __future__ import annotations

import re
from pathlib import Path

from agents.allocators import ALLOCATOR_AGENTS, ProbeSwitch
from agents.bandits import BANDIT_AGENTS
from agents.oracle import ORACLE_AGENTS
from agents.rules import RULE_AGENTS
from agents.sadal import SADAL_AGENTS
from ballad_env.data import adbench
from ballad_env.queries import AL_QUERIES, LR_QUERIES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_every_agent_and_query_strategy_is_in_the_guide() -> None:
    rows = "\n".join(_table_rows(_page("agents.md")) + _table_rows(_page("environment.md")))
    named = set(re.findall(r"`([a-z0-9-]+)(?:-<percent>)?`", rows))
    shipped = [name for table in (RULE_AGENTS, ORACLE_AGENTS, ALLOCATOR_AGENTS, BANDIT_AGENTS,
                                  SADAL_AGENTS) for name in table]  # not a test's own
    missing = [n for n in shipped if n not in named and not n.startswith("lr-first")]
    assert missing == []
    strategies = {name for table in (AL_QUERIES, LR_QUERIES) for name in table.names()
                  if table[name].__module__ == "ballad_env.queries"}  # shipped ones
    assert sorted(s for s in strategies if f'"{s}"' not in rows) == []


def test_probe_switch_row_says_its_observation_version() -> None:
    row = next(r for r in _table_rows(_page("agents.md")) if r.startswith("| `probe-switch`"))
    assert f"observation {ProbeSwitch.observation_version}" in row


def test_cache_folder_mirror_and_margin_are_said() -> None:
    commit = adbench.registry()["commit"]
    cached = adbench.cache_path(adbench.registry()["datasets"][0])
    assert cached.parent.name == commit[:12]
    assert "adbench/<first 12 characters of the pinned commit>/<file>" in _page("datasets.md")
    assert "`ftp://`, is refused" in _page("datasets.md")
    assert "relative: (runner-up - best) / runner-up" in " ".join(
        _page("experiments.md").split())


def test_the_architecture_says_how_plugins_reach_workers() -> None:
    text = " ".join(_page("architecture.md").split())
    assert "--import my_module" in text and "ballad_env.plugins" in text


#: A module of the clone named in backticks, as the pages name the code they describe.
MODULE_PATH = re.compile(r"`((?:agents|ballad_env|scripts|tests)/[\w/]+\.py)`")


def named_modules_missing(pages: list[Path]) -> list[str]:
    """The ``page:line: path`` of every module the pages name that the clone lacks."""
    return [f"{page}:{number}: {found}"
            for page in pages
            for number, line in enumerate(page.read_text().splitlines(), 1)
            for found in MODULE_PATH.findall(line) if not (ROOT / found).is_file()]


def test_every_module_the_pages_name_exists(tmp_path: Path) -> None:
    """A page names the module that holds what it describes; after a move, a stale path
    sends the reader to nothing (``docs/studies/POLICIES.md`` named the policy study's
    runner in ``agents/experiments/training/`` after it moved to ``scripts/``)."""
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    assert not named_modules_missing(pages)
    stale = tmp_path / "stale.md"
    stale.write_text("see `agents/experiments/training/gone.py` and `agents/policy.py`\n")
    assert [m.split(": ")[1] for m in named_modules_missing([stale])] == [
        "agents/experiments/training/gone.py"]
