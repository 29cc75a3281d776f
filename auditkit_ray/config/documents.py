"""Run and sweep files as documents: the one reader of YAML (1.2 booleans) and JSON, with a map from a field
path to the line that holds it, for error messages.

Whatever the bytes, reading ends in a document or in one ``ConfigError`` naming the file and, where there is
one, the line, in bounded time and memory: the limits of ``core.limits`` (size, nesting, values with YAML
aliases expanded) are checked while reading, before anything walks the document; a key given twice in one
mapping is an error in YAML and JSON alike; a tagged YAML value that cannot be read (``!!int 1.5``) or a tag
outside the JSON types (``!!binary``, ``!!set``) is an error at its line; keys are strings; the text is UTF-8
(a byte-order mark allowed).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingEndEvent, SequenceEndEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from ..core.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from ..core.shown import shown, shown_text
from ..errors import ConfigError

__all__ = ["Lines", "read_document", "read_text", "read_value"]

_STR, _MERGE = "tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"
#: tags whose values are no JSON type: refused, so that a file means the same read as YAML or as JSON
_REFUSED_TAGS = ("binary", "set", "omap", "pairs", "timestamp")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PROBLEM = "a string holds a lone UTF-16 surrogate (an escape like \\ud800): not text"


class _Refused(yaml.MarkedYAMLError):
    """A document this reader does not take (a limit, a duplicate key, a key that is no string): valid
    YAML, perhaps, but not a configuration."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)


class _Rules(Composer, SafeConstructor, Resolver):
    """Composition and construction with the configuration's rules; the events come from libyaml when it is
    there (``_FastLoader``), else from PyYAML's own parser (``_PyLoader``)."""

    def __init__(self) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(collection node) -> values it holds, aliases expanded
        self._open: set[int] = set()  # collections being composed (an alias to one is a cycle)

    # ------------------------------------------------------------------ composing
    def compose_node(self, parent: Any, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) in self._open:
                raise _Refused(f"the alias *{shown_text(event.anchor, 40)} is used inside the value it names "
                               "(a structure that contains itself)", event.start_mark)
            return super().compose_node(parent, index)
        return super().compose_node(parent, index)

    def compose_scalar_node(self, anchor: Any) -> Node:
        node = super().compose_scalar_node(anchor)
        if _SURROGATE.search(node.value):
            raise _Refused(_SURROGATE_PROBLEM, node.start_mark)
        return node

    def _enter(self, mark: Any) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep (the limit)", mark)

    def _done(self, node: Node, size: int) -> None:
        self._depth -= 1
        self._open.discard(id(node))
        self._sizes[id(node)] = size
        if size > MAX_VALUES:
            raise _Refused(f"holds more than {MAX_VALUES:,} values, aliases counted at each use (the limit)",
                           node.start_mark)

    def _size(self, node: Node) -> int:
        return self._sizes.get(id(node), 1)

    def _open_collection(self, kind: type, anchor: Any) -> Any:
        """The node a collection's start event opens (one level deeper, anchored, marked open)."""
        start = self.get_event()
        self._enter(start.start_mark)
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(kind, None, start.implicit)
        node = kind(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self._open.add(id(node))
        return node

    def _close_collection(self, node: Node, size: int) -> Node:
        if size <= MAX_VALUES:
            node.end_mark = self.get_event().end_mark
        self._done(node, size)
        return node

    def compose_sequence_node(self, anchor: Any) -> Node:
        node = self._open_collection(SequenceNode, anchor)
        size = 1
        while size <= MAX_VALUES and not self.check_event(SequenceEndEvent):
            child = self.compose_node(node, len(node.value))
            node.value.append(child)
            size += self._size(child)
        return self._close_collection(node, size)

    def compose_mapping_node(self, anchor: Any) -> Node:
        node = self._open_collection(MappingNode, anchor)
        seen: dict[str, Any] = {}
        size = 1
        while size <= MAX_VALUES and not self.check_event(MappingEndEvent):
            key = self.compose_node(node, None)
            if key.tag != _MERGE:
                _check_key(key, seen)
            value = self.compose_node(node, key)
            node.value.append((key, value))
            size += self._size(key) + self._size(value)
        return self._close_collection(node, size)

    # ------------------------------------------------------------------ constructing
    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - a tagged scalar that does not convert (!!int 1.5, !!timestamp x)
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            value = shown(node.value, 40) if isinstance(node, ScalarNode) else "this value"
            raise _Refused(f"{tag} {value} cannot be read as {tag} ({shown_text(exc, 60)})",
                           node.start_mark) from None

    def _refused_tag(self, node: Node) -> Any:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise _Refused(f"the tag {tag} is not taken in a run or sweep file (strings, numbers, booleans, null, "
                       "lists and mappings only)", node.start_mark)


# YAML 1.2 booleans: only true/false. (YAML 1.1 reads ``on``, ``off``, ``yes`` and ``no`` as booleans, which
# would turn ``on: extracted`` into ``True: extracted``.)
# Dates stay text, as in JSON (YAML 1.1 reads ``2024-01-01`` as a date, which no setting takes).
_Rules.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for k, v in Resolver.yaml_implicit_resolvers.items()
}
_Rules.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
for _tag in _REFUSED_TAGS:
    _Rules.add_constructor(f"tag:yaml.org,2002:{_tag}", _Rules._refused_tag)


def _check_key(key: Node, seen: dict[str, Any]) -> None:
    """A mapping's key is a string, given once (``seen``: the keys so far, with their marks)."""
    if not isinstance(key, ScalarNode):
        raise _Refused("a key must be a string, not a mapping or a list", key.start_mark)
    if key.tag != _STR:
        raise _Refused(f"a key must be a string, not {shown(key.value, 40)} (quote it: "
                       f"'{shown_text(key.value, 40)}')", key.start_mark)
    if key.value in seen:
        raise _Refused(f"duplicate key {shown(key.value, 60)} (first on line {seen[key.value].line + 1}): a key "
                       "is given once", key.start_mark)
    seen[key.value] = key.start_mark


class _PyLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, _Rules):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _Rules.__init__(self)


try:  # libyaml scans and parses (several times faster); the composing and its rules stay in Python
    from yaml.cyaml import CParser

    class _FastLoader(_Rules, CParser):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _Rules.__init__(self)

    _Loader: type = _FastLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = _PyLoader


class Lines:
    """Maps a field path to a line number through the composed YAML node tree (for a JSON file, a tree of
    the same nodes, built when a message first asks for a line)."""

    def __init__(self, node: Node | None | Callable[[], Node | None]):
        self._root = node

    @property
    def root(self) -> Node | None:
        if callable(self._root):
            self._root = self._root()
        return self._root  # type: ignore[return-value]

    def line(self, loc: tuple) -> int | None:
        node = self.root
        found = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, MappingNode):
                nxt = None
                for k, v in node.value:
                    if getattr(k, "value", None) == str(key):
                        nxt = v
                        found = k.start_mark.line + 1
                        break
                node = nxt
            elif isinstance(node, SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                node = node.value[key]
                found = node.start_mark.line + 1
            else:
                break
            if node is None:
                break
        return found


def _where(source: Any, line: int | None) -> str:
    return f"{source}:{line}" if line else str(source)


def _yaml(text: str, source: Any) -> tuple[Any, Lines]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except _Refused as exc:
        raise ConfigError(f"{_where(source, exc.problem_mark.line + 1)}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else None
        if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not take: its position, no mark
            line = text.count("\n", 0, exc.position) + 1
            code = exc.character if isinstance(exc.character, int) else ord(exc.character)
            problem = f"a character YAML does not take (U+{code:04X}); write it as an escape in double quotes"
        else:
            problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
        err = ConfigError(f"{_where(source, line)}: invalid YAML: {shown_text(problem, 160)}")
        err.syntax = True  # type: ignore[attr-defined]
        raise err from None
    finally:
        loader.dispose()
    return data, Lines(node)


# ---------------------------------------------------------------------------------------------- JSON
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+')


def _json_nodes(text: str, source: Any) -> Node | None:
    """The JSON ``text`` as YAML nodes with their lines, for ``Lines``; also where the first nesting beyond
    the limit or the first duplicate key stands (a ``_Refused``). Only runs when a message needs a line."""
    root: Node | None = None
    stack: list[tuple[Node, dict[str, Any]]] = []
    key: Node | None = None
    line, last = 1, 0
    for m in _JSON_TOKEN.finditer(text):
        line += text.count("\n", last, m.start())
        last = m.start()
        tok = m.group(0)
        mark = yaml.Mark(str(source), m.start(), line - 1, 0, None, None)
        if tok in ",:":
            continue
        if tok in "}]":
            node, _ = stack.pop()
            node.end_mark = mark
            continue
        if tok == "{":
            node: Node = MappingNode("tag:yaml.org,2002:map", [], mark, None)
        elif tok == "[":
            node = SequenceNode("tag:yaml.org,2002:seq", [], mark, None)
        else:
            try:
                value = json.loads(tok) if tok.startswith('"') else tok
            except ValueError:
                value = tok
            node = ScalarNode(_STR if tok.startswith('"') else "tag:yaml.org,2002:json", value, mark, mark)
        if stack:
            parent, seen = stack[-1]
            if isinstance(parent, MappingNode) and key is None:
                if node.value in seen:
                    raise _Refused(f"duplicate key {shown(node.value, 60)} (first on line "
                                   f"{seen[node.value].line + 1}): a key is given once", mark)
                seen[node.value] = mark
                key = node
                continue
            if isinstance(parent, MappingNode):
                parent.value.append((key, node))
                key = None
            else:
                parent.value.append(node)
        elif root is None:
            root = node
        if isinstance(node, (MappingNode, SequenceNode)):
            stack.append((node, {}))
            if len(stack) > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep (the limit)", mark)
    return root


def _json_line(text: str, source: Any) -> Callable[[], Node | None]:
    def build() -> Node | None:
        try:
            return _json_nodes(text, source)
        except _Refused:
            return None
    return build


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate()
    return out


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json(text: str, source: Any) -> tuple[Any, Lines]:
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_not_json)
    except _Duplicate:
        raise ConfigError(_refused_at(text, source) or f"{source}: a key is given twice in one mapping") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}: invalid JSON: {shown_text(exc.msg, 160)}") from None
    except RecursionError:
        raise ConfigError(_refused_at(text, source)
                          or f"{source}: nested more than {MAX_DEPTH} levels deep (the limit)") from None
    except ValueError as exc:  # NaN or Infinity, an integer of thousands of digits
        raise ConfigError(f"{source}: invalid JSON: {shown_text(exc, 160)}") from None
    problem = _json_problem(data)
    if problem:
        raise ConfigError(_refused_at(text, source) if problem == "depth" else f"{source}: {problem}")
    return data, Lines(_json_line(text, source))


def _refused_at(text: str, source: Any) -> str:
    """The message for the first nesting beyond the limit or duplicate key of a JSON text, with its line."""
    try:
        _json_nodes(text, source)
    except _Refused as exc:
        return f"{_where(source, exc.problem_mark.line + 1)}: {exc.problem}"
    return ""


def _json_problem(data: Any) -> str:
    """What JSON's parser lets through and this reader does not (nesting beyond the limit, too many values,
    a lone surrogate), found without recursion; "" when there is none."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return f"holds more than {MAX_VALUES:,} values (the limit)"
        if isinstance(value, (dict, list)) and depth > MAX_DEPTH:
            return "depth"
        if isinstance(value, dict):
            count += len(value)
            if any(_SURROGATE.search(k) for k in value):
                return _SURROGATE_PROBLEM
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, str) and _SURROGATE.search(value):
            return _SURROGATE_PROBLEM
    return ""


# ---------------------------------------------------------------------------------------------- files
_KIND = {dict: "mapping", list: "list", str: "string", int: "number", float: "number", bool: "boolean",
         type(None): "null"}


def _decode(raw: bytes, source: Any) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{source}:1: the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                          "save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{source}:{line}: the file is not UTF-8 (byte {exc.start}: "
                          f"{raw[exc.start:exc.start + 1]!r}); save it as UTF-8") from None


def read_text(text: str, source: Any = "<text>", *, as_json: bool = False) -> tuple[Any, Lines]:
    """A document from ``text`` (YAML, or JSON when ``as_json``) and its lines, under this reader's rules:
    a ``ConfigError`` naming ``source`` and the line otherwise."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: {len(text):,} characters; a run or sweep file holds at most "
                          f"{MAX_FILE_BYTES:,} bytes (the limit)")
    return _json(text, source) if as_json else _yaml(text, source)


def read_document(path: str | os.PathLike) -> tuple[Any, Lines]:
    """A run or sweep file (YAML, or JSON by its ``.json`` suffix): a mapping, and its lines."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{shown_text(p, 200)}: cannot read config file ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{p}: larger than {MAX_FILE_BYTES:,} bytes, the most a run or sweep file holds "
                          "(the limit)")
    text = _decode(raw, p)
    if not text.strip():
        raise ConfigError(f"{p}:1: the file is empty; a run file is a mapping (model:, dataset:, ...), "
                          "a sweep file too (base:, grid:)")
    data, lines = read_text(text, p, as_json=p.suffix.lower() == ".json")
    if data is None and lines.root is None:  # comments only, or a bare `---`
        raise ConfigError(f"{p}:1: the file holds no settings; a run file is a mapping (model:, dataset:, ...), "
                          "a sweep file too (base:, grid:)")
    if not isinstance(data, dict):
        kind = _KIND.get(type(data), type(data).__name__)
        raise ConfigError(f"{_where(p, lines.line(()))}: a run or sweep file is a mapping (model:, dataset:, "
                          f"... or base:, grid:), not a {kind}")
    return data, lines


def read_value(text: str, source: Any = "<value>") -> Any:
    """One value as a file would hold it (``--set KEY=VALUE``: ``0.7``, ``true``, ``[a, b]``), under the
    same rules; a ``ConfigError`` (with ``.syntax`` when it is not YAML at all) otherwise."""
    return read_text(text, source)[0]
