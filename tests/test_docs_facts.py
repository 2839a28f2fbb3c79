"""The README says what the code does (issue 30): every registered agent and query strategy
in its tables, ``probe-switch``'s observation version, the cache folder's name, the
mirror's schemes and the summary's ``margin``; the architecture notes the plugins."""

from __future__ import annotations

import re
from pathlib import Path

from agents.allocators import ProbeSwitch
from agents.registry import agent_names
from ballad_env.data import adbench
from ballad_env.queries import AL_QUERIES, LR_QUERIES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_every_agent_and_query_strategy_is_in_the_readme() -> None:
    rows = "\n".join(_table_rows(README))
    named = set(re.findall(r"`([a-z0-9-]+)(?:-<percent>)?`", rows))
    missing = [n for n in agent_names() if n not in named and not n.startswith("lr-first")]
    assert missing == []
    strategies = set(AL_QUERIES.names()) | set(LR_QUERIES.names())
    assert sorted(s for s in strategies if f'"{s}"' not in rows) == []


def test_probe_switch_row_says_its_observation_version() -> None:
    row = next(r for r in _table_rows(README) if r.startswith("| `probe-switch`"))
    assert f"observation {ProbeSwitch.observation_version}" in row


def test_cache_folder_mirror_and_margin_are_said() -> None:
    commit = adbench.registry()["commit"]
    cached = adbench.cache_path(adbench.registry()["datasets"][0])
    assert cached.parent.name == commit[:12]
    assert "adbench/<first 12 characters of the pinned commit>/<file>" in README
    assert "`ftp://`, is refused" in README
    assert "`margin`, (runner-up - best) / runner-up" in README


def test_the_architecture_says_how_plugins_reach_workers() -> None:
    text = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    assert "--import my_module" in text and "ballad_env.plugins" in text
