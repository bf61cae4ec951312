"""Reader of the IR text form written by `print_graph`.

Grammar (one item per line; blank lines and lines starting with `//` are skipped; `[x]` is
optional, `{x}` repeats, `|` separates choices, quoted text is literal):

    file     := "dagc_ir" INT NL  "graph" "@" name [span] NL  {item NL}
    item     := "root" STRING | "module" STRING | "modules" "{" [STRING ":" STRING {"," STRING ":" STRING}] "}"
              | "attr" key "=" JSON
              | "param" "%" name [":" type] "=" operand [span]
              | outputs "=" [name ":"] op "@" target "(" [args] ")"
                    ["{" option {"," option} "}"] ["[" key "=" JSON {"," key "=" JSON} "]"]
                    ["after" "(" name {"," name} ")"] [span]
              | "return" operand
              {header block}                           (a region's bodies, under its node, indented deeper)
    header   := IDENT ["(" "%" name {"," "%" name} ")"] ["over" operand] ["init" operand {"," operand}] ":"
                  (cond: then, else; loop: body(carried values) over its items; map: body(item) init lists;
                   try: body, finally; fused: members)
    block    := {node | "break if" operand "yield" [operands]} ["yield" [operands]]  (each indented deeper)
    outputs  := "()" | "%" name [":" type] {"," "%" name [":" type]}
    args     := operand {"," operand} {"," IDENT "=" operand}  |  IDENT "=" operand {"," ...}
    operand  := "%" name | INT | FLOAT | STRING | "None" | "True" | "False" | "inf" | "-inf" | "nan"
              | "[" [operand {"," operand} [","]] "]" | "(" ")" | "(" operand "," ")"
              | "(" operand "," operand {"," operand} [","] ")"
              | "{" [operand ":" operand {"," operand ":" operand} [","]] "}"
    option   := FIELD "=" (DURATION | SIZE | literal)     e.g. cost=2m30s, memory=16GiB, cpus=2
    span     := "#" (FILE | STRING) ":" LINE ":" COL ["-" LINE ":" COL]       (to the end of the line)

    name     := [A-Za-z0-9_.#@-] and balanced "[...]" groups (train[3], shard[2].tokenize) | STRING
    op       := IDENT | STRING        target := module[:qualname] of [A-Za-z0-9_.<>] | STRING
    key      := [A-Za-z0-9_.-]+ | STRING                type := ident["[" ... "]"] | STRING
    STRING   := a Python string literal ('...' or "...", with \\ \\' \\" \\n \\r \\t \\xhh \\uhhhh \\Uhhhhhhhh)

The node's name is its first output's name unless written before the op. Errors raise
`IRParseError(message, line, col)` with 1-based line and column.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from dagc import units

from .core import Graph, Node, Param
from .cursor import WORD_CHAR, WS, IRParseError, LineCursor
from .payload import Exit
from .printer import ATTR_KEY_RE, DURATION_RE, IDENT_RE, SIZE_RE, TARGET_RE, VERSION_LINE
from .serialize import READABLE_VERSIONS, IRFormatError, make_node, no_gc, upgrade_payload, upgrade_v1_node
from .types import Const, Map, Operand, Ref, Seq, TaskOptions, operand_to_python

__all__ = ["IRParseError", "parse_graph", "parse_operand"]


_SIMPLE_OPTIONS = re.compile(r"\{[^'\"\[\](){}]*\}")


_OPTION_FIELDS = tuple(f.name for f in fields(TaskOptions))


_DIRECTIVES = ("root", "module", "modules", "attr", "param", "return")


def _no_refs(operand: Operand, cursor: LineCursor, pos: int, what: str) -> None:
    if isinstance(operand, Ref):
        raise cursor.error(f"{what} must be a constant, not a value reference", pos)
    if isinstance(operand, Seq):
        for item in operand.items:
            _no_refs(item, cursor, pos, what)
    elif isinstance(operand, Map):
        for key, value in operand.items:
            _no_refs(key, cursor, pos, what)
            _no_refs(value, cursor, pos, what)


def _option_value(key: str, cursor: LineCursor) -> object:
    text, pos = cursor.text, cursor.pos
    pattern = DURATION_RE if key == "cost" else SIZE_RE if key in ("memory", "out_size") else None
    if pattern is not None:
        match = pattern.match(text, pos)
        if match is not None and text[match.end() : match.end() + 1] in ("", ",", "}", " ", "\t"):
            cursor.pos = match.end()
            return units.parse_duration(match.group()) if key == "cost" else units.parse_size(match.group())
    operand = cursor.operand()
    _no_refs(operand, cursor, pos, f"option {key!r}")
    if key == "resources" and isinstance(operand, Map):
        return tuple((operand_to_python(k), operand_to_python(v)) for k, v in operand.items)
    if key in ("resources", "reads", "writes", "readonly", "mutates") and isinstance(operand, Seq):
        return tuple(operand_to_python(item) for item in operand.items)
    return operand_to_python(operand)


_OPTIONS_CACHE: dict[str, TaskOptions] = {}


def _parse_options(cursor: LineCursor) -> TaskOptions:
    """`{key=value, ...}`; options without strings or brackets are cached (TaskOptions is frozen)."""
    match = _SIMPLE_OPTIONS.match(cursor.text, cursor.pos)
    if match is None:
        return _parse_options_text(cursor)
    cached = _OPTIONS_CACHE.get(match.group())
    if cached is None:
        cached = _parse_options_text(cursor)
        if len(_OPTIONS_CACHE) < 4096:
            _OPTIONS_CACHE[match.group()] = cached
    cursor.pos = match.end()
    return cached


def _parse_options_text(cursor: LineCursor) -> TaskOptions:
    cursor.pos += 1  # "{"
    values: dict[str, object] = {}
    cursor.ws()
    if cursor.peek() == "}":
        cursor.pos += 1
        return TaskOptions()
    while True:
        start = cursor.pos
        key = cursor.word(IDENT_RE, "a task option name")
        if key not in _OPTION_FIELDS:
            raise cursor.error(f"unknown task option {key!r}; options: {', '.join(_OPTION_FIELDS)}", start)
        if key in values:
            raise cursor.error(f"task option {key!r} given twice", start)
        cursor.ws()
        cursor.expect("=", f"'=' after option {key!r}")
        cursor.ws()
        values[key] = _option_value(key, cursor)
        cursor.ws()
        ch = cursor.peek()
        if ch == ",":
            cursor.pos += 1
            cursor.ws()
            continue
        if ch == "}":
            cursor.pos += 1
            return TaskOptions(**values)  # type: ignore[arg-type]
        raise cursor.error(f"expected ',' or '}}' in task options, found {cursor.found()}")


def _parse_attrs(cursor: LineCursor, close: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    cursor.ws()
    if cursor.peek() == close:
        cursor.pos += 1
        return attrs
    while True:
        start = cursor.pos
        key = cursor.word(ATTR_KEY_RE, "an attribute name such as partition.device")
        if key in attrs:
            raise cursor.error(f"attribute {key!r} given twice", start)
        cursor.ws()
        cursor.expect("=", f"'=' after attribute {key!r}")
        cursor.ws()
        attrs[key] = cursor.json_value()
        cursor.ws()
        ch = cursor.peek()
        if ch == ",":
            cursor.pos += 1
            cursor.ws()
            continue
        if ch == close:
            cursor.pos += 1
            return attrs
        raise cursor.error(f"expected ',' or {close!r} after an attribute, found {cursor.found()}")


def _parse_args(cursor: LineCursor) -> tuple[tuple[Operand, ...], tuple[tuple[str, Operand], ...]]:
    args: list[Operand] = []
    kwargs: list[tuple[str, Operand]] = []
    cursor.ws()
    if cursor.peek() == ")":
        cursor.pos += 1
        return (), ()
    text = cursor.text
    while True:
        start = cursor.pos
        key: str | None = None
        ch = text[start : start + 1]
        if ch == "'" or ch == '"':
            word = cursor.string()
            cursor.ws()
            if cursor.peek() == "=":
                key = word
            else:
                cursor.pos = start
        else:
            match = IDENT_RE.match(text, start)
            if match is not None:
                end = WS.match(text, match.end()).end()  # type: ignore[union-attr]
                if text[end : end + 1] == "=":
                    key = match.group()
                    cursor.pos = end
        if key is not None:
            cursor.pos += 1  # "="
            cursor.ws()
            kwargs.append((key, cursor.operand()))
        else:
            if kwargs:
                raise cursor.error("positional operand after keyword operands", start)
            args.append(cursor.operand())
        cursor.ws()
        ch = cursor.peek()
        if ch == ",":
            cursor.pos += 1
            cursor.ws()
            continue
        if ch == ")":
            cursor.pos += 1
            return tuple(args), tuple(kwargs)
        raise cursor.error(f"expected ',' or ')' in the argument list, found {cursor.found()}")


def _parse_node(cursor: LineCursor) -> Node:
    outputs: list[str] = []
    types: list[str | None] = []
    if cursor.peek() == "(":
        cursor.pos += 1
        cursor.ws()
        cursor.expect(")", "')' (a node without outputs is written '() = name: op ...')")
    else:
        while True:
            cursor.expect("%", "'%' before an output name")
            outputs.append(cursor.name("an output value name"))
            cursor.ws()
            if cursor.peek() == ":":
                cursor.pos += 1
                cursor.ws()
                types.append(cursor.type_())
                cursor.ws()
            else:
                types.append(None)
            if cursor.peek() != ",":
                break
            cursor.pos += 1
            cursor.ws()
    cursor.ws()
    cursor.expect("=", "'=' after the outputs")
    cursor.ws()
    start = cursor.pos
    first = cursor.name("the op (task, fused, transfer, glue) or the node name")
    cursor.ws()
    if cursor.peek() == ":":
        name = first
        cursor.pos += 1
        cursor.ws()
        op = cursor.word(IDENT_RE, "the op (task, fused, transfer, glue)")
        cursor.ws()
    else:
        if not outputs:
            raise cursor.error("a node without outputs must be named: '() = name: op @target(...)'", start)
        name, op = outputs[0], first
    cursor.expect("@", "'@' before the target")
    target = cursor.word(TARGET_RE, "a target such as module:function")
    cursor.expect("(", "'(' opening the argument list")
    args, kwargs = _parse_args(cursor)
    cursor.ws()
    options = TaskOptions()
    if cursor.peek() == "{":
        options = _parse_options(cursor)
        cursor.ws()
    attrs: dict[str, Any] = {}
    attrs_at = cursor.pos
    if cursor.peek() == "[":
        cursor.pos += 1
        attrs = _parse_attrs(cursor, "]")
        cursor.ws()
    deps: list[str] = []
    if cursor.text.startswith("after", cursor.pos):
        cursor.pos += 5
        cursor.ws()
        cursor.expect("(", "'(' after 'after'")
        cursor.ws()
        if cursor.peek() == ")":
            cursor.pos += 1
        else:
            while True:
                deps.append(cursor.name("a node name"))
                cursor.ws()
                if cursor.peek() == ",":
                    cursor.pos += 1
                    cursor.ws()
                    continue
                cursor.expect(")", "',' or ')' in after(...)")
                break
    span = cursor.span_or_end()
    try:
        return make_node(
            name, op, target, args, kwargs, tuple(outputs), tuple(types), options, span, tuple(deps), attrs
        )
    except IRFormatError as exc:  # a typed field of the wrong shape (`partition.device="gpu"`)
        raise cursor.error(f"node {name!r}: {exc}", attrs_at) from None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _operand_list(cursor: LineCursor) -> list[Operand]:
    items: list[Operand] = []
    cursor.ws()
    if cursor.at_end():
        return items
    while True:
        items.append(cursor.operand())
        cursor.ws()
        if cursor.peek() == ",":
            cursor.pos += 1
            cursor.ws()
            continue
        cursor.done()
        return items


def _parse_header(cursor: LineCursor, line: str, indent: int
                  ) -> tuple[str, tuple[str, ...] | None, Operand | None, tuple[Operand, ...] | None]:
    """A block header: `then:`, `body(%a, %b) over [0, 1]:`, `body(%x) init []:`, `members:`; returns (body
    name, its block arguments or None, the items it is over or None, the initial lists or None)."""
    match = IDENT_RE.match(line, indent)
    if match is None:
        raise cursor.error("expected a block header such as 'then:' or 'body over [items]:' (indented under its "
                           f"region), found {cursor.found()}")
    header = match.group()
    cursor.pos = match.end()
    args: tuple[str, ...] | None = None
    if cursor.peek() == "(":
        cursor.pos += 1
        names: list[str] = []
        cursor.ws()
        while cursor.peek() != ")":
            if names:
                cursor.expect(",", "',' or ')' in the block's arguments")
                cursor.ws()
            cursor.expect("%", "'%' before a block argument")
            names.append(cursor.name("a block argument"))
            cursor.ws()
        cursor.pos += 1
        args = tuple(names)
    over: Operand | None = None
    cursor.ws()
    if line.startswith("over", cursor.pos) and not WORD_CHAR.match(line, cursor.pos + 4):
        cursor.pos += 4
        cursor.ws()
        over = cursor.operand()
        cursor.ws()
    init: list[Operand] | None = None
    if line.startswith("init", cursor.pos) and not WORD_CHAR.match(line, cursor.pos + 4):
        cursor.pos += 4
        init = []
        while True:
            cursor.ws()
            init.append(cursor.operand())
            cursor.ws()
            if cursor.peek() != ",":
                break
            cursor.pos += 1
    cursor.expect(":", "':' at the end of the block header")
    cursor.done()
    return header, args, over, None if init is None else tuple(init)


def _parse_blocks(lines: list[tuple[int, str]], i: int, node: Node, base: int) -> int:
    """Read the blocks of `node` (whose line is indented `base`) starting at lines[i] into its bodies and,
    for a region, its payload (block arguments, items, `break if`, `yield`); return the first line after
    them."""
    while i < len(lines) and _indent(lines[i][1]) > base:
        number, line = lines[i]
        indent = _indent(line)
        cursor = LineCursor(line.rstrip(" \t"), number, indent)
        header, args, over, init = _parse_header(cursor, line.rstrip(" \t"), indent)
        if header in node.bodies:
            raise IRParseError(f"node {node.name!r} has two '{header}:' blocks", number, indent + 1)
        region = node.region
        if (args is not None or over is not None or init is not None) and region is None:
            raise IRParseError(f"only a region's blocks have arguments or items ({node.name!r} is a "
                               f"`{node.op}` node)", number, indent + 1)
        if region is not None:
            if args is not None:
                region.args[header] = args
            if over is not None:
                if node.op != "loop" or header != "body":
                    raise IRParseError("'over' names the items of a loop's body", number, indent + 1)
                region.iter = over
            if init is not None:
                if node.op != "map" or header != "body":
                    raise IRParseError("'init' names the initial lists of a map's body", number, indent + 1)
                region.init = init
        i += 1
        body: list[Node] = []
        yields: tuple[Operand, ...] | None = None
        while i < len(lines) and _indent(lines[i][1]) > indent:
            number, line = lines[i]
            cursor = LineCursor(line, number)
            cursor.ws()
            if yields is not None:
                raise cursor.error("'yield' ends a block: nothing may follow it")
            start = cursor.pos
            if line.startswith("yield", start) and not WORD_CHAR.match(line, start + 5):
                if region is None:
                    raise cursor.error("only a region's blocks yield values")
                cursor.pos += 5
                yields = tuple(_operand_list(cursor))
                i += 1
                continue
            if line.startswith("break", start) and not WORD_CHAR.match(line, start + 5):
                if region is None or node.op != "loop" or header != "body" or region.exit is not None:
                    raise cursor.error("'break if' is allowed once, in the body of a loop")
                cursor.pos += 5
                cursor.ws()
                cursor.expect("if", "'if' after 'break'")
                cursor.ws()
                cond = cursor.operand()
                cursor.ws()
                cursor.expect("yield", "'yield' after the break condition")
                region.exit = Exit(len(body), cond, tuple(_operand_list(cursor)))
                i += 1
                continue
            inner = _parse_node(cursor)
            i += 1
            i = _parse_blocks(lines, i, inner, _indent(line))
            body.append(inner)
        node.bodies[header] = body
        if yields is not None:
            assert region is not None
            region.yields[header] = yields
    return i


def _parse_param(cursor: LineCursor) -> Param:
    cursor.ws()
    cursor.expect("%", "'%' before the parameter name")
    name = cursor.name("a parameter name")
    cursor.ws()
    type_: str | None = None
    if cursor.peek() == ":":
        cursor.pos += 1
        cursor.ws()
        type_ = cursor.type_()
        cursor.ws()
    cursor.expect("=", "'=' and the parameter's value")
    cursor.ws()
    value = cursor.operand()
    return Param(name, value, type_, cursor.span_or_end())


def _significant_lines(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        stripped = line.strip(" \t")
        if stripped and not stripped.startswith("//"):
            out.append((number, line))
    return out


def parse_operand(text: str) -> Operand:
    """Read one operand written as `format_operand` writes it (e.g. `[%a, 3, 'x']`)."""
    cursor = LineCursor(text, 1)
    cursor.ws()
    operand = cursor.operand()
    cursor.done()
    return operand


def parse_graph(text: str) -> Graph:
    """Read the text form written by `print_graph`. Checks syntax, not invariants (see `verify`)."""
    with no_gc():
        return _parse_graph(text)


def _parse_graph(text: str) -> Graph:
    lines = _significant_lines(text)
    if not lines:
        raise IRParseError(f"empty input: expected the header '{VERSION_LINE}'", 1, 1)
    number, line = lines[0]
    cursor = LineCursor(line, number)
    cursor.ws()
    cursor.expect("dagc_ir", f"the header '{VERSION_LINE}'")
    cursor.ws()
    start = cursor.pos
    match = re.compile(r"\d+").match(line, start)
    if match is None:
        raise cursor.error(f"expected the IR version number, found {cursor.found()}")
    version = int(match.group())
    if version not in READABLE_VERSIONS:
        raise cursor.error(f"unsupported IR version {match.group()}: this dagc reads versions "
                           f"{', '.join(map(str, READABLE_VERSIONS))}", start)
    cursor.pos = match.end()
    cursor.done()

    if len(lines) < 2:
        raise IRParseError("expected a 'graph @name' line after the header", number + 1, 1)
    number, line = lines[1]
    cursor = LineCursor(line, number)
    cursor.ws()
    cursor.expect("graph", "'graph @name'")
    cursor.ws()
    cursor.expect("@", "'@' before the graph name")
    graph = Graph(cursor.name("the graph name"))
    graph.span = cursor.span_or_end()

    seen: set[str] = set()
    i = 2
    while i < len(lines):
        number, line = lines[i]
        i += 1
        cursor = LineCursor(line, number)
        cursor.ws()
        ch = cursor.peek()
        if ch == "%" or ch == "(":
            start, node_line = cursor.pos, number
            node = _parse_node(cursor)
            if node.name in graph:
                raise cursor.error(f"duplicate node name {node.name!r}", start)
            i = _parse_blocks(lines, i, node, _indent(line))
            if version == 1:
                upgrade_v1_node(node)
            if version < 3:  # its payload printed inline, as attributes (block arguments, fused members)
                try:
                    upgrade_payload(node)
                except IRFormatError as exc:
                    raise IRParseError(str(exc), node_line, 1) from None
            graph.add_node(node)
            continue
        start = cursor.pos
        match = IDENT_RE.match(line, start)
        word = match.group() if match else ""
        if word not in _DIRECTIVES:
            raise cursor.error(
                f"expected a node ('%name = op @target(...)') or one of {', '.join(_DIRECTIVES)}; "
                f"found {cursor.found()}"
            )
        cursor.pos = match.end()  # type: ignore[union-attr]
        if word != "param" and word != "attr":
            if word in seen:
                raise cursor.error(f"'{word}' given twice", start)
            seen.add(word)
        if word == "param":
            param = _parse_param(cursor)
            graph.params.append(param)
            continue
        cursor.ws()
        if word == "root" or word == "module":
            if cursor.peek() not in ("'", '"'):
                raise cursor.error(f"expected a quoted string after '{word}', found {cursor.found()}")
            setattr(graph, word, cursor.string())
        elif word == "modules":
            value_pos = cursor.pos
            operand = cursor.operand()
            if not isinstance(operand, Map) or not all(
                isinstance(k, Const) and isinstance(k.value, str) and isinstance(v, Const)
                and isinstance(v.value, str)
                for k, v in operand.items
            ):
                raise cursor.error("'modules' takes a dict of module name to file name strings", value_pos)
            for key, value in operand.items:
                if key.value in graph.modules:  # type: ignore[union-attr]
                    raise cursor.error(f"module {key.value!r} listed twice", value_pos)  # type: ignore[union-attr]
                graph.modules[key.value] = value.value  # type: ignore[union-attr]
        elif word == "attr":
            key_pos = cursor.pos
            key = cursor.word(ATTR_KEY_RE, "an attribute name")
            if key in graph.attrs:
                raise cursor.error(f"graph attribute {key!r} given twice", key_pos)
            cursor.ws()
            cursor.expect("=", f"'=' after attribute {key!r}")
            cursor.ws()
            graph.attrs[key] = cursor.json_value()
        else:  # return
            graph.returns = cursor.operand()
        cursor.done()
    return graph
