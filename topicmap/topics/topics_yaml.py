"""Reading a topics file's YAML safely: the whole file within its size and value bounds, each topic's nodes checked
(duplicate keys, unread tags, alias bombs, nesting) before they become values, and no recursion anywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, CollectionStartEvent, MappingStartEvent, ScalarEvent, StreamEndEvent
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

from topicmap.topics.topic_errors import TopicConfigError, shown

#: the topics file is read whole, up to this size, and up to this many YAML values (a value costs ~0.3 kB and
#: a few microseconds to read: 16 MB of "1," would otherwise take 4 GB)
MAX_TOPICS_FILE_BYTES = 16 * 1024 * 1024
MAX_TOPICS_FILE_VALUES = 100_000
#: one topic's YAML, as its values will be: values (a value used again through an alias counted each time)
#: and nesting levels under the topic
MAX_TOPIC_VALUES = 100_000
MAX_TOPIC_DEPTH = 16


class _TopicsLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML without implicit timestamps: an impossible date such as 2026-13-01 must become a per-topic
    error naming the field, not a failure of the whole file inside the YAML parser.

    libyaml parses when it is installed (PyYAML's wheels have it): a 2 MB file in 0.05 s where PyYAML's own
    parser takes 4 s, on every tick of the registry. Only the parser's events are used: the nodes are built
    by ``compose``, without recursion and counting them."""


_TopicsLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
#: the tags the safe constructor reads (str, int, float, bool, null, seq, map, binary, set, omap, pairs,
#: explicit timestamps); any other (``!!python/object``, ``!custom``) is refused with its place
_READABLE_TAGS = frozenset(tag for tag in _TopicsLoader.yaml_constructors if tag is not None)
_KEY_TAGS = _READABLE_TAGS | {"tag:yaml.org,2002:merge"}


def read_yaml(path: Path) -> Node | None:
    """The file's YAML node graph (aliases are shared nodes, not copies yet), or None for an empty file."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TOPICS_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise TopicConfigError("<file>", str(path), "file not found") from exc
    except OSError as exc:
        raise TopicConfigError("<file>", str(path), f"cannot be read: {exc}") from exc
    if len(data) > MAX_TOPICS_FILE_BYTES:
        raise TopicConfigError(
            "<file>", str(path), f"is larger than {MAX_TOPICS_FILE_BYTES // 2**20} MiB: not read"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TopicConfigError("<file>", str(path), f"not UTF-8 (at byte {exc.start})") from exc
    loader = _TopicsLoader(text)
    try:
        return compose(loader, path)
    except yaml.YAMLError as exc:
        raise TopicConfigError("<file>", str(path), f"not valid YAML: {exc}") from exc
    finally:
        loader.dispose()


def compose(loader: _TopicsLoader, path: Path) -> Node | None:
    """The document's node graph, built from the parser's events without recursion and counting its values
    (PyYAML's composer, and libyaml's, recurse once per level and have no bound on the values). As PyYAML's:
    an alias is the node of its anchor (shared, not copied), an undefined alias or a second document is an
    error."""
    loader.get_event()  # stream start
    if loader.check_event(StreamEndEvent):
        return None
    loader.get_event()  # document start
    anchors: dict[str, Node] = {}
    open_collections: list[CollectionNode] = []
    pending_keys: list[Node | None] = []  # per open collection: a mapping's key that waits for its value
    root: Node | None = None
    values = 0
    while root is None or open_collections:
        event = loader.get_event()
        if not isinstance(event, AliasEvent | ScalarEvent | CollectionStartEvent):  # a collection ends
            open_collections.pop().end_mark = event.end_mark
            pending_keys.pop()
            continue
        values += 1
        if values > MAX_TOPICS_FILE_VALUES:
            raise TopicConfigError(
                "<file>", str(path), f"holds more than {MAX_TOPICS_FILE_VALUES:,} YAML values: not read"
            )
        if isinstance(event, AliasEvent):
            if event.anchor not in anchors:
                raise ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
            node = anchors[event.anchor]
        else:
            if event.anchor is not None and event.anchor in anchors:
                raise ComposerError(
                    f"found duplicate anchor {event.anchor!r}; first occurrence",
                    anchors[event.anchor].start_mark,
                    "second occurrence",
                    event.start_mark,
                )
            node = _new_node(loader, event)
            if event.anchor is not None:
                anchors[event.anchor] = node
        if not open_collections:
            root = node
        elif isinstance(open_collections[-1], SequenceNode):
            open_collections[-1].value.append(node)
        elif pending_keys[-1] is None:
            pending_keys[-1] = node
        else:
            open_collections[-1].value.append((pending_keys[-1], node))
            pending_keys[-1] = None
        if isinstance(event, CollectionStartEvent):
            open_collections.append(node)
            pending_keys.append(None)
    loader.get_event()  # document end
    if not loader.check_event(StreamEndEvent):
        raise ComposerError(
            "expected a single document in the stream",
            root.start_mark,
            "but found another document",
            loader.get_event().start_mark,
        )
    return root


def _new_node(loader: _TopicsLoader, event: ScalarEvent | CollectionStartEvent) -> Node:
    """A scalar, or an empty sequence or mapping, with its tag resolved as PyYAML's composer does."""
    kind = (
        ScalarNode
        if isinstance(event, ScalarEvent)
        else MappingNode
        if isinstance(event, MappingStartEvent)
        else SequenceNode
    )
    tag = event.tag
    if tag is None or tag == "!":
        tag = loader.resolve(kind, event.value if kind is ScalarNode else None, event.implicit)
    if kind is ScalarNode:
        return ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
    return kind(tag, [], event.start_mark, None, flow_style=event.flow_style)


def topic_nodes(root: Node | None, path: Path) -> list[Node]:
    """The nodes of the topics: the list under ``topics:``, or a file that is only the list."""
    if root is None or (isinstance(root, ScalarNode) and root.tag == "tag:yaml.org,2002:null"):
        return []
    items: Node | None = root
    if isinstance(root, MappingNode):
        entries = [
            value for key, value in root.value if isinstance(key, ScalarNode) and key.value == "topics"
        ]
        if len(entries) > 1:
            raise TopicConfigError("<file>", "topics", f"is given {len(entries)} times; keep one list")
        items = entries[0] if entries else None
    if not isinstance(items, SequenceNode):
        raise TopicConfigError("<file>", str(path), "expected a list under 'topics:'")
    return list(items.value)


def node_name(node: Node) -> str | None:
    """The topic's ``name:``, read from its node, to name the topic in an error found before it is read."""
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == "name" and isinstance(value, ScalarNode):
                return value.value
    return None


def topic_value(node: Node, label: str, shapes: dict[int, Shape]) -> Any:
    """A topic's YAML as Python values, once its shape shows nothing unsafe to read (``structure_problem``).
    Each field is read alone first, so that a value the loader cannot read (``!!int abc``, a 5000-digit number)
    is named by its field; the topic as a whole is read last (merge keys, ``<<: *defaults``, need it whole)."""
    problem = structure_problem(node, shapes)
    if problem is not None:
        raise TopicConfigError(label, *problem)
    if isinstance(node, MappingNode):
        for key, value in node.value:
            _construct(value, label, str(key.value))
    return _construct(node, label, "<topic>")


def _construct(node: Node, label: str, field_name: str) -> Any:
    try:
        # a loader per call: a failed construction leaves state behind in the constructor
        return _TopicsLoader("").construct_document(node)
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise TopicConfigError(label, field_name, f"cannot be read: {' '.join(str(exc).split())}") from exc


@dataclass(frozen=True)
class Shape:
    """What a YAML node will be as a value: how many values (capped just past MAX_TOPIC_VALUES), how many
    nesting levels, and its first problem as (path inside the node, what is wrong)."""

    values: int
    levels: int
    problem: tuple[str, str] | None = None


#: the shape of a node met again inside itself (``&a [*a]``): its own value would be infinite
_CYCLE = Shape(MAX_TOPIC_VALUES + 1, 0, ("", "contains itself (a YAML alias inside its own anchor)"))


def structure_problem(node: Node, shapes: dict[int, Shape]) -> tuple[str, str] | None:
    """The first thing in a topic's YAML (as ``(field, problem)``) that would make reading or validating it
    unsafe, or None: a duplicate key, a tag the safe loader does not read, a key that is a list or mapping, a
    value containing itself, more than MAX_TOPIC_VALUES values or MAX_TOPIC_DEPTH levels. Values are counted
    as they will be once aliases are expanded (a "billion laughs", aliases of aliases each repeating the last
    ten times, is refused here, before anything expands it), yet each node is measured once (``shapes``)."""
    shape = _shape(node, shapes)
    fields = _children(node) if isinstance(node, MappingNode) else []
    if shape.problem is not None:
        where, problem = shape.problem
        return where.removeprefix(".") or "<topic>", problem
    if shape.values > MAX_TOPIC_VALUES:
        largest = [name for name, child in fields if shapes[id(child)].values > MAX_TOPIC_VALUES]
        field_name = largest[0].removeprefix(".") if largest else "<topic>"
        return field_name, f"holds more than {MAX_TOPIC_VALUES:,} values (YAML aliases repeating one?)"
    if shape.levels > MAX_TOPIC_DEPTH:
        deepest = [name for name, child in fields if shapes[id(child)].levels >= MAX_TOPIC_DEPTH]
        field_name = deepest[0].removeprefix(".") if deepest else "<topic>"
        return field_name, f"is nested more than {MAX_TOPIC_DEPTH} levels deep"
    return None


def _shape(node: Node, shapes: dict[int, Shape]) -> Shape:
    """The shape of ``node``, measured children first without recursion (a file may nest 1000 levels)."""
    on_path: set[int] = set()  # collections whose children are being measured
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, measured_children = stack.pop()
        if measured_children:
            on_path.discard(id(current))
            shapes[id(current)] = _combined_shape(current, shapes)
            continue
        if id(current) in shapes:
            continue
        if current.tag not in _READABLE_TAGS:
            shapes[id(current)] = Shape(
                1, 0, ("", f"has the YAML tag {shown.repr(current.tag)}, which is not read")
            )
        elif isinstance(current, ScalarNode):
            shapes[id(current)] = Shape(1, 0)
        else:
            on_path.add(id(current))
            stack.append((current, True))
            stack.extend(
                (child, False)
                for _, child in _children(current)
                if id(child) not in on_path and id(child) not in shapes
            )
    return shapes[id(node)]


def _combined_shape(node: Node, shapes: dict[int, Shape]) -> Shape:
    """A collection's shape from its children's (a child not measured is one of its own ancestors)."""
    problem = _keys_problem(node) if isinstance(node, MappingNode) else None
    values, levels = 1, 0
    for name, child in _children(node):
        shape = shapes.get(id(child), _CYCLE)
        values = min(values + shape.values, MAX_TOPIC_VALUES + 1)
        levels = max(levels, shape.levels + 1)
        if problem is None and shape.problem is not None:
            problem = (name + shape.problem[0], shape.problem[1])
    return Shape(values, levels, problem)


def _children(node: Node) -> list[tuple[str, Node]]:
    """A collection's values, each with its path from the collection (``[2]``, ``.name``)."""
    if isinstance(node, SequenceNode):
        return [(f"[{index}]", child) for index, child in enumerate(node.value)]
    if isinstance(node, MappingNode):
        return [(f".{_key_name(key)}", value) for key, value in node.value]
    return []


def _keys_problem(node: MappingNode) -> tuple[str, str] | None:
    """A key that is not a plain value, or given twice (YAML would keep the last value, silently)."""
    lines: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, ScalarNode) or key.tag not in _KEY_TAGS:
            return "", f"has a key on line {line} that is not a plain value"
        spot = (key.tag, key.value)
        if spot in lines:
            first = lines[spot]
            place = f"on line {line}" if first == line else f"on lines {first} and {line}"
            return f".{_key_name(key)}", f"is given twice ({place}); YAML would keep the last one silently"
        lines[spot] = line
    return None


def _key_name(key: Node) -> str:
    """A mapping key as a path names it: a plain key as written (cut short), any other as ``<key>``."""
    if not isinstance(key, ScalarNode):
        return "<key>"
    return key.value if len(key.value) <= 80 else f"{key.value[:77]}..."
