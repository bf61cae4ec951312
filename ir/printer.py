"""Text form of the IR: one line per item, sorted attributes, the source location at the end.

    dagc_ir 3
    graph @quickstart  # samples/quickstart.py:60:1-70:20
      root 'samples'
      module 'quickstart'
      modules {'pkg.data': 'pkg/data.py', 'quickstart': 'quickstart.py'}
      attr schedule.makespan = 12.5
      param %n : int = 512  # samples/quickstart.py:60:17
      %make_data#0 : Tensor, %make_data#1 = make_data: task @quickstart:make_data(%n, seed=0) {cost=1s}  # …
      %train = task @quickstart:train(%make_data#0, [%a, 3], lr=0.1) {gpus=1} [partition.device=3] after(prep)  # …
      return {'loss': %train}

Region nodes (`cond`, `loop`, `map`, `try`; docs/ir.md) print their bodies as indented blocks under their
line, each ending in what it yields (the node's payload, dagc.ir.payload):

      %cond = cond: cond @if(%compare, %m)  # train.py:20:5-22:20
        then:
          %cond.then.deploy = task @train:deploy(%m)  # train.py:21:9
          yield %cond.then.deploy
        else:
          yield None

A loop's block names its carried values and its items, and may hold its early exit:

      %loop#0, %loop#1 = loop: loop @for(0, None, %data)  # train.py:30:5-33:18
        body(%loop@epoch, %loop@model) over [0, 1, 2]:
          %loop.step = task @train:step(%loop@model, %data)  # train.py:31:9
          break if %loop.step yield %loop@epoch, %loop.step
          yield %loop@epoch, %loop.step

A map's block names its item (`body(%x):`); a `try` region prints `body:` and `finally:`; a fused group
prints its tasks in `members:`.

The text loses nothing: `parse_graph` (ir/parser.py) reads it back to an equal graph, and the
grammar is documented there. Names print bare when they only use letters, digits and `_ . # @ -`
(with balanced `[...]`, as in `train[3]`), else as quoted strings; constants print as Python
literals (`repr` for floats and strings, so both read back exactly).
"""

from __future__ import annotations

import json
import math
import re

from dagc import units

from .core import REGION_BODIES, Graph, Node, Param, body_names
from .location import SourceSpan
from .types import Const, Map, Operand, Ref, Seq, TaskOptions

__all__ = ["print_graph", "print_node", "format_operand", "format_span", "VERSION_LINE"]

VERSION_LINE = "dagc_ir 4"

# Shared with the parser, which scans exactly these forms.
NAME_RE = re.compile(r"(?:[\w.#@\-]|\[[\w.#@\-]*\])+")
IDENT_RE = re.compile(r"(?!\d)\w+")
TARGET_RE = re.compile(r"[\w.<>]+(?::[\w.<>]+)?")
ATTR_KEY_RE = re.compile(r"[\w.\-]+")
TYPE_HEAD_RE = re.compile(r"(?!\d)[\w.]+")
DURATION_RE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|us|ns|min|s|m|h|d))+")
SIZE_RE = re.compile(r"\d+(?:\.\d+)?(?:KiB|MiB|GiB|TiB)")
_SPAN_FILE_PLAIN = re.compile(r"[^'\"\s](?:.*\S)?", re.DOTALL)


def quote(text: str) -> str:
    return repr(text)


def format_name(name: str) -> str:
    return name if NAME_RE.fullmatch(name) else repr(name)


def _format_word(word: str, pattern: re.Pattern[str]) -> str:
    return word if pattern.fullmatch(word) else repr(word)


def scan_type(text: str, pos: int) -> int:
    """End of a bare type (`Tensor`, `list[int]`, `dict[str, list[int]]`) at `pos`, or -1."""
    match = TYPE_HEAD_RE.match(text, pos)
    if match is None:
        return -1
    end = match.end()
    if end < len(text) and text[end] == "[":
        depth = 0
        for i in range(end, len(text)):
            ch = text[i]
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif not (ch.isalnum() or ch in "_., "):
                return -1
        return -1
    return end


def format_type(type_: str) -> str:
    if scan_type(type_, 0) == len(type_):
        return type_
    return repr(type_)


def format_scalar(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    raise ValueError(f"not an IR constant: {value!r} ({type(value).__name__})")


def format_operand(operand: Operand) -> str:
    """`%name`, `3`, `'s'`, `None`, `[a, b]`, `(a,)`, `{k: v}`."""
    if isinstance(operand, Ref):
        return "%" + format_name(operand.name)
    if isinstance(operand, Const):
        return format_scalar(operand.value)
    if isinstance(operand, Seq):
        items = ", ".join([format_operand(item) for item in operand.items])
        if operand.kind == "list":
            return f"[{items}]"
        if operand.kind == "tuple":
            return f"({items},)" if len(operand.items) == 1 else f"({items})"
        raise ValueError(f"sequence kind must be 'list' or 'tuple', got {operand.kind!r}")
    if isinstance(operand, Map):
        return "{" + ", ".join([f"{format_operand(k)}: {format_operand(v)}" for k, v in operand.items]) + "}"
    raise ValueError(f"not an operand: {operand!r}")


def format_json(value: object) -> str:
    """Compact one-line JSON with sorted keys; characters that are not printable are escaped."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
    return "".join(out)


def format_span(span: SourceSpan) -> str:
    """`file:line:col` or `file:line:col-end_line:end_col`; an odd file name is quoted."""
    file = span.file
    if not (_SPAN_FILE_PLAIN.fullmatch(file) and file.isprintable()):
        file = repr(file)
    if span.end_line == 0 and span.end_col == 0:
        return f"{file}:{span.line}:{span.col}"
    return f"{file}:{span.line}:{span.col}-{span.end_line}:{span.end_col}"


def _duration_form(value: object) -> str | None:
    if type(value) is not float or not math.isfinite(value) or value < 0:
        return None
    try:
        text = units.format_duration(value)
        back = units.parse_duration(text)
    except (ValueError, OverflowError, ArithmeticError):
        return None
    if DURATION_RE.fullmatch(text) and type(back) is float and repr(back) == repr(value):
        return text
    return None


def _size_form(value: object) -> str | None:
    if type(value) is not int or value < 1024:
        return None
    try:
        text = units.format_size(value)
        back = units.parse_size(text)
    except (ValueError, OverflowError, ArithmeticError):
        return None
    if SIZE_RE.fullmatch(text) and back == value:
        return text
    return None


def _format_python(value: object) -> str:
    if isinstance(value, (list, tuple)):
        items = ", ".join([_format_python(item) for item in value])
        if isinstance(value, list):
            return f"[{items}]"
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, dict):
        return "{" + ", ".join([f"{_format_python(k)}: {_format_python(v)}" for k, v in value.items()]) + "}"
    return format_scalar(value)


def format_option(key: str, value: object) -> str:
    """`cost=2m30s`, `memory=16GiB`, `resources={'tpu': 1}`, `reads=['a.txt']`, `cpus=2`."""
    if key == "cost":
        text = _duration_form(value)
        if text is not None:
            return text
    elif key in ("memory", "out_size"):
        text = _size_form(value)
        if text is not None:
            return text
    elif key == "resources" and isinstance(value, tuple) and all(
        isinstance(pair, tuple) and len(pair) == 2 for pair in value
    ):
        return "{" + ", ".join([f"{_format_python(k)}: {_format_python(v)}" for k, v in value]) + "}"
    elif key in ("reads", "writes", "readonly", "mutates") and isinstance(value, tuple):
        return _format_python(list(value))
    return _format_python(value)


def format_options(options: TaskOptions) -> str:
    changed = options.non_default()
    if not changed:
        return ""
    return "{" + ", ".join([f"{key}={format_option(key, value)}" for key, value in changed.items()]) + "}"


def format_attrs(attrs: dict[str, object]) -> str:
    return ", ".join(
        [f"{_format_word(key, ATTR_KEY_RE)}={format_json(attrs[key])}" for key in sorted(attrs)]
    )


def has_blocks(node: Node) -> bool:
    """Whether `node` prints indented blocks under its line (every region node does, and a fused group)."""
    return node.op in REGION_BODIES or bool(node.bodies)


def _block_header(node: Node, key: str) -> str:
    """`then:`, `body(%i, %acc) over [0, 1, 2]:` (a loop: its carried values, its items),
    `body(%x) init []:` (a map: its item, its initial lists), `members:` (a fused group)."""
    region = node.region
    head = _format_word(key, IDENT_RE)
    if region is None:
        return head + ":"
    args = region.args.get(key)
    if args is not None:
        head += "(" + ", ".join("%" + format_name(a) for a in args) + ")"
    if node.op == "loop" and key == "body" and region.iter is not None:
        head += " over " + format_operand(region.iter)
    if node.op == "map" and key == "body" and region.init:
        head += " init " + ", ".join(format_operand(o) for o in region.init)
    return head + ":"


def _operand_line(head: str, operands: tuple[Operand, ...]) -> str:
    items = ", ".join(format_operand(o) for o in operands)
    return f"{head} {items}" if items else head


def _print_region(node: Node, indent: str, lines: list[str]) -> None:
    region = node.region
    for key in body_names(node):
        body = node.bodies.get(key, [])
        lines.append(f"{indent}  {_block_header(node, key)}")
        exit_ = region.exit if region is not None and node.op == "loop" and key == "body" else None
        exit_line = "" if exit_ is None else (
            indent + "    " + _operand_line(f"break if {format_operand(exit_.cond)} yield", exit_.values))
        for position, inner in enumerate(body):
            if exit_ is not None and exit_.at == position:
                lines.append(exit_line)
            lines.append(indent + "    " + print_node(inner))
            if has_blocks(inner):
                _print_region(inner, indent + "    ", lines)
        if exit_ is not None and not 0 <= exit_.at < len(body):  # at the end (or out of range: the verifier says)
            lines.append(exit_line)
        if region is not None and key in region.yields:
            lines.append(indent + "    " + _operand_line("yield", region.yields[key]))


def print_node(node: Node) -> str:
    """One node as its line of text, without indentation (a region's bodies follow on their own lines,
    see `print_graph`)."""
    types = node.types
    outs = []
    for i, value in enumerate(node.outputs):
        type_ = types[i] if i < len(types) else None
        out = "%" + format_name(value)
        outs.append(out if type_ is None else f"{out} : {format_type(type_)}")
    parts = [", ".join(outs) if outs else "()", " = "]
    if not node.outputs or node.name != node.outputs[0]:
        parts.append(format_name(node.name) + ": ")
    parts.append(_format_word(node.op, IDENT_RE))
    parts.append(" @")
    parts.append(_format_word(node.target, TARGET_RE))
    args = [format_operand(a) for a in node.args]
    args.extend([f"{_format_word(k, IDENT_RE)}={format_operand(v)}" for k, v in node.kwargs])
    parts.append("(" + ", ".join(args) + ")")
    options = format_options(node.options)
    if options:
        parts.append(" " + options)
    # the typed records print among the attributes, by their keys (dagc.ir.facts)
    attrs = node.attributes()
    if attrs:
        parts.append(" [" + format_attrs(attrs) + "]")
    if node.deps:
        parts.append(" after(" + ", ".join([format_name(d) for d in node.deps]) + ")")
    parts.append("  # ")
    parts.append(format_span(node.span))
    return "".join(parts)


def _print_param(param: Param) -> str:
    head = "param %" + format_name(param.name)
    if param.type is not None:
        head += " : " + format_type(param.type)
    return f"{head} = {format_operand(param.value)}  # {format_span(param.span)}"


def print_graph(graph: Graph) -> str:
    """The whole graph as text, ending in a newline; `parse_graph` reads it back exactly."""
    lines = [VERSION_LINE, f"graph @{format_name(graph.name)}  # {format_span(graph.span)}"]
    if graph.root != ".":
        lines.append(f"  root {quote(graph.root)}")
    if graph.module != "":
        lines.append(f"  module {quote(graph.module)}")
    if graph.modules:
        items = ", ".join([f"{quote(k)}: {quote(graph.modules[k])}" for k in sorted(graph.modules)])
        lines.append(f"  modules {{{items}}}")
    for key in sorted(graph.attrs):
        lines.append(f"  attr {_format_word(key, ATTR_KEY_RE)} = {format_json(graph.attrs[key])}")
    for param in graph.params:
        lines.append("  " + _print_param(param))
    for node in graph:
        lines.append("  " + print_node(node))
        if has_blocks(node):
            _print_region(node, "  ", lines)
    if graph.returns is not None:
        lines.append("  return " + format_operand(graph.returns))
    lines.append("")
    return "\n".join(lines)
