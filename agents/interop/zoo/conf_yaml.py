"""A YAML hyperparameter file read within bounds before rl-zoo3 reads it.

rl-zoo3 reads a ``--conf-file`` with ``yaml.safe_load`` and then pretty-prints the
hyperparameters it found. Safe loading shares the object an alias names, so a file of a few
hundred bytes whose anchors each alias the one before twice (28 levels: 2^28 leaves) loads
in a moment, but printing it, copying it or saving it as ``config.yml`` walks every
expansion: gigabytes. :func:`check_conf_yaml` reads the file's YAML events (the parser's
stream: no objects are built) and refuses, with one line naming the file, a file larger
than :data:`MAX_CONF_BYTES`, a tag that builds Python objects (``!!python/...``; safe
loading would fail on it with a long traceback) or any tag safe loading does not know,
nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_ALIASES` aliases, an alias of
an anchor not yet complete (a recursive structure), and a document whose aliases expand to
more than :data:`MAX_EXPANDED` nodes. The files shipped beside this module hold no alias.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import yaml

from ballad_env.files import open_regular

#: The largest hyperparameter file read (rl-zoo3's own largest is about 20 kB).
MAX_CONF_BYTES = 1 << 20
#: The most aliases a file may hold.
MAX_ALIASES = 1_000
#: The most nodes a document may hold once every alias is expanded.
MAX_EXPANDED = 100_000
#: The deepest nesting of sequences and mappings.
MAX_DEPTH = 64
#: YAML's prefix of the tags that build Python objects (``!!python/object/apply:...``).
PYTHON_TAG = "tag:yaml.org,2002:python/"


class ConfYamlError(ValueError):
    """A hyperparameter file refused before any YAML library builds it."""


@dataclass
class _Count:
    """The walk's state: expanded sizes of finished anchors, open collections' sizes."""

    anchors: dict[str, int] = field(default_factory=dict)
    open_anchors: list[str | None] = field(default_factory=list)
    sizes: list[int] = field(default_factory=lambda: [0])
    aliases: int = 0


def check_conf_yaml(path: str | os.PathLike) -> None:
    """Refuse ``path`` (a ``ConfYamlError`` naming it and the problem, one line) unless it is
    a regular file of at most :data:`MAX_CONF_BYTES` whose YAML passes the bounds above."""
    try:
        with open_regular(path, "the --conf-file") as handle:
            raw = handle.read(MAX_CONF_BYTES + 1)
    except OSError as err:
        raise ConfYamlError(f"the --conf-file {path} cannot be read: {err}") from err
    if len(raw) > MAX_CONF_BYTES:
        raise ConfYamlError(f"the --conf-file {path} is larger than {MAX_CONF_BYTES:,} bytes: "
                            "a hyperparameter file holds a few kB")
    try:
        problem = _event_problem(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        reason = getattr(err, "problem", None) or type(err).__name__
        raise ConfYamlError(f"the --conf-file {path} is not valid YAML{at}: {reason}") from err
    if problem:
        raise ConfYamlError(f"the --conf-file {path} is refused: {problem}")


def _event_problem(text: str) -> str | None:
    """What in the YAML ``text`` passes the bounds (None: nothing), from its events."""
    count = _Count()
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        problem = _tag_problem(event) or _step(count, event)
        if problem:
            line = event.start_mark.line + 1 if event.start_mark is not None else "?"
            return f"line {line}: {problem}"
    return None


def _tag_problem(event: yaml.Event) -> str | None:
    """Why an event's explicit tag is refused: a Python object's, or one safe loading lacks."""
    tag = getattr(event, "tag", None)
    if tag is None or tag == "!":
        return None
    if tag.startswith(PYTHON_TAG):
        return (f"the tag !!python/{tag[len(PYTHON_TAG):]} builds a Python object (it would "
                "run code); write the value as plain YAML")
    if tag not in yaml.SafeLoader.yaml_constructors:
        return f"the tag {tag} is not a plain YAML type; write the value as plain YAML"
    return None


def _step(count: _Count, event: yaml.Event) -> str | None:
    """Add one event to the expanded count; the bound it passes, if any."""
    if isinstance(event, yaml.DocumentStartEvent):
        count.sizes = [0]
    elif isinstance(event, yaml.AliasEvent):
        count.aliases += 1
        if count.aliases > MAX_ALIASES:
            return f"more than {MAX_ALIASES:,} aliases (*name)"
        if event.anchor not in count.anchors:
            return f"the alias *{event.anchor} names no finished anchor (a recursive structure)"
        return _grow(count, count.anchors[event.anchor])
    elif isinstance(event, yaml.ScalarEvent):
        if event.anchor is not None:
            count.anchors[event.anchor] = 1
        return _grow(count, 1)
    elif isinstance(event, yaml.CollectionStartEvent):
        if len(count.sizes) > MAX_DEPTH:
            return f"sequences and mappings nested more than {MAX_DEPTH} deep"
        count.anchors.pop(event.anchor, None)  # an alias inside it would recurse
        count.open_anchors.append(event.anchor)
        count.sizes.append(1)
    elif isinstance(event, yaml.CollectionEndEvent):
        size, anchor = count.sizes.pop(), count.open_anchors.pop()
        if anchor is not None:
            count.anchors[anchor] = size
        return _grow(count, size)
    return None


def _grow(count: _Count, nodes: int) -> str | None:
    """Add ``nodes`` to the open collection (and the document); the bound passed, if any."""
    count.sizes[-1] += nodes
    if sum(count.sizes) > MAX_EXPANDED:
        return (f"its aliases expand to more than {MAX_EXPANDED:,} values (an alias bomb "
                "takes gigabytes when rl-zoo3 prints or saves the hyperparameters)")
    return None


__all__ = ["MAX_ALIASES", "MAX_CONF_BYTES", "MAX_DEPTH", "MAX_EXPANDED", "ConfYamlError",
           "check_conf_yaml"]
