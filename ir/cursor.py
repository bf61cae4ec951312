"""A cursor over one line of the IR text form: blanks, words, names, string and number literals, operands,
spans; errors carry their line and column."""

from __future__ import annotations

import json
import re
from typing import Any

from .location import SourceSpan
from .printer import IDENT_RE, NAME_RE, scan_type
from .types import Const, Map, Operand, Ref, Seq

WS = re.compile(r"[ \t]*")


_BLANKS = (" ", "\t")


_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))")


_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t", "0": "\0",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


WORD_CHAR = re.compile(r"[\w.#@\-]")


_SPAN_PLAIN = re.compile(r"(.+):(\d+):(\d+)(?:-(\d+):(\d+))?", re.DOTALL)


_SPAN_TAIL = re.compile(r":(\d+):(\d+)(?:-(\d+):(\d+))?")


_KEYWORDS = {"None": None, "True": True, "False": False, "inf": float("inf"), "nan": float("nan")}


_DECODER = json.JSONDecoder()


class IRParseError(ValueError):
    """The text is not valid IR; `line` and `col` (1-based) point at the offending character."""

    def __init__(self, message: str, line: int, col: int) -> None:
        self.message = message
        self.line = line
        self.col = col
        super().__init__(f"{line}:{col}: {message}")


class LineCursor:
    """A cursor over one line of text."""

    __slots__ = ("text", "pos", "lineno")

    def __init__(self, text: str, lineno: int, pos: int = 0) -> None:
        self.text = text
        self.pos = pos
        self.lineno = lineno

    # ---- basics ------------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> IRParseError:
        return IRParseError(message, self.lineno, (self.pos if pos is None else pos) + 1)

    def ws(self) -> None:
        if self.text[self.pos : self.pos + 1] in _BLANKS:
            self.pos = WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def found(self) -> str:
        rest = self.text[self.pos :]
        if not rest:
            return "end of line"
        match = WORD_CHAR.match(rest)
        token = re.match(r"[\w.#@\-]+", rest).group() if match else rest[0]  # type: ignore[union-attr]
        return repr(token)

    def expect(self, ch: str, what: str | None = None) -> None:
        if not self.text.startswith(ch, self.pos):
            raise self.error(f"expected {what or repr(ch)}, found {self.found()}")
        self.pos += len(ch)

    def string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self.error("unterminated string (strings are written on one line; use \\n for a newline)")
        start = self.pos
        self.pos = match.end()
        body = match.group()[1:-1]
        if "\\" not in body:
            return body
        return _unescape(body, self, start + 1)

    def name(self, what: str) -> str:
        if self.peek() in ("'", '"'):
            return self.string()
        match = NAME_RE.match(self.text, self.pos)
        if match is None:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = match.end()
        return match.group()

    def word(self, pattern: re.Pattern[str], what: str) -> str:
        if self.peek() in ("'", '"'):
            return self.string()
        match = pattern.match(self.text, self.pos)
        if match is None:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = match.end()
        return match.group()

    def type_(self) -> str:
        if self.peek() in ("'", '"'):
            return self.string()
        end = scan_type(self.text, self.pos)
        if end < 0:
            raise self.error(f"expected a type (e.g. Tensor, list[int], or a quoted string), found {self.found()}")
        start, self.pos = self.pos, end
        return self.text[start:end]

    def at_end(self) -> bool:
        self.ws()
        return self.pos >= len(self.text)

    def span_or_end(self) -> SourceSpan:
        """An optional trailing `# file:line:col[-line:col]`, then the end of the line."""
        self.ws()
        if self.pos >= len(self.text):
            return SourceSpan("<unknown>", 0, 0)
        if self.peek() != "#":
            raise self.error(f"expected '# file:line:col' or the end of the line, found {self.found()}")
        self.pos += 1
        self.ws()
        start = self.pos
        text = self.text.rstrip(" \t")
        if self.peek() in ("'", '"'):
            file = self.string()
            match = _SPAN_TAIL.fullmatch(text, self.pos)
        else:
            file = None
            match = _SPAN_PLAIN.fullmatch(text, self.pos)
        if match is None:
            raise self.error("malformed source location: expected file:line:col or file:line:col-line:col", start)
        self.pos = len(self.text)
        groups = match.groups()
        if file is None:
            file, groups = groups[0], groups[1:]
        line, col, end_line, end_col = (int(g) if g is not None else 0 for g in groups)
        return SourceSpan(file, line, col, end_line, end_col)

    def done(self) -> None:
        if not self.at_end():
            raise self.error(f"unexpected {self.found()} at the end of the line")

    # ---- operands ----------------------------------------------------------------------------
    def operand(self) -> Operand:
        text, pos = self.text, self.pos
        ch = text[pos : pos + 1]
        if ch == "%":
            self.pos += 1
            return Ref(self.name("a value name after '%'"))
        if ch == "'" or ch == '"':
            return Const(self.string())
        if ch == "[":
            self.pos += 1
            items, _ = self._items("]")
            return Seq("list", tuple(items))
        if ch == "(":
            self.pos += 1
            items, trailing = self._items(")")
            if len(items) == 1 and not trailing:
                raise self.error("a one-item tuple needs a trailing comma: (x,)", pos)
            return Seq("tuple", tuple(items))
        if ch == "{":
            self.pos += 1
            return self._map()
        if text.startswith("-inf", pos) and not WORD_CHAR.match(text, pos + 4):
            self.pos += 4
            return Const(float("-inf"))
        match = _NUMBER.match(text, pos)
        if match is not None:
            end = match.end()
            if WORD_CHAR.match(text, end):
                raise self.error(f"malformed number {self.found()}")
            token = match.group()
            self.pos = end
            if "." in token or "e" in token or "E" in token:
                return Const(float(token))
            return Const(int(token))
        match = IDENT_RE.match(text, pos)
        if match is not None and match.group() in _KEYWORDS:
            self.pos = match.end()
            return Const(_KEYWORDS[match.group()])
        raise self.error(
            f"expected an operand (%name, a number, a string, None, True, False, [..], (..), {{..}}), "
            f"found {self.found()}"
        )

    def _items(self, close: str) -> tuple[list[Operand], bool]:
        items: list[Operand] = []
        self.ws()
        if self.peek() == close:
            self.pos += 1
            return items, False
        while True:
            items.append(self.operand())
            self.ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.ws()
                if self.peek() == close:
                    self.pos += 1
                    return items, True
                continue
            if ch == close:
                self.pos += 1
                return items, False
            raise self.error(f"expected ',' or {close!r}, found {self.found()}")

    def _map(self) -> Map:
        items: list[tuple[Operand, Operand]] = []
        self.ws()
        if self.peek() == "}":
            self.pos += 1
            return Map(())
        while True:
            key = self.operand()
            self.ws()
            self.expect(":", "':' after a dict key")
            self.ws()
            items.append((key, self.operand()))
            self.ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.ws()
                if self.peek() == "}":
                    self.pos += 1
                    return Map(tuple(items))
                continue
            if ch == "}":
                self.pos += 1
                return Map(tuple(items))
            raise self.error(f"expected ',' or '}}', found {self.found()}")

    def json_value(self) -> Any:
        try:
            value, end = _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.error(f"bad JSON value: {exc.msg}", exc.pos) from None
        self.pos = end
        return value


def _unescape(body: str, cursor: LineCursor, offset: int) -> str:
    def replace(match: re.Match[str]) -> str:
        hex_value = match.group(1) or match.group(2) or match.group(3)
        if hex_value:
            return chr(int(hex_value, 16))
        simple = _SIMPLE_ESCAPES.get(match.group(4))
        if simple is None:
            raise cursor.error(f"unknown escape sequence {match.group()!r} in string", offset + match.start())
        return simple

    try:
        return _ESCAPE.sub(replace, body)
    except ValueError as exc:  # chr() of a code point beyond U+10FFFF
        if isinstance(exc, IRParseError):
            raise
        raise cursor.error(f"bad escape in string: {exc}", offset) from None
