"""Run and sweep files as documents: YAML (1.2 booleans) or JSON, with a
map from a field path to the line that holds it, for error messages."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

__all__ = ["Lines", "read_document"]


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. (YAML 1.1 reads ``on``, ``off``,
    ``yes`` and ``no`` as booleans, which would turn ``on: extracted`` into
    ``True: extracted``.)"""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class Lines:
    """Maps a field path to a line number through the composed YAML node tree."""

    def __init__(self, node: yaml.Node | None):
        self.root = node

    def line(self, loc: tuple) -> int | None:
        node = self.root
        found = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for k, v in node.value:
                    if getattr(k, "value", None) == str(key):
                        nxt = v
                        found = k.start_mark.line + 1
                        break
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                node = node.value[key]
                found = node.start_mark.line + 1
            else:
                break
            if node is None:
                break
        return found


def read_document(path: str | os.PathLike) -> tuple[Any, Lines]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: config file is not UTF-8 (byte {exc.start})") from None
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text), Lines(None)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{p}{where}: invalid YAML: {problem}") from None
    return data, Lines(node)
