"""A sub-pipeline that returns a NamedTuple of task results, read by field, by index (known now, or a task's
result) and unpacked."""

from typing import NamedTuple

import dagc


class Split(NamedTuple):
    train: list
    test: list
    note: str = "held out"


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


@dagc.task
def pick(n: int) -> int:
    return n % 2


@dagc.task
def describe(split: Split) -> str:
    return f"{type(split).__name__}: {len(split.train)} train, {len(split.test)} test, {split.note}"


@dagc.pipeline
def prepare(n: int) -> Split:
    return Split(train=load(n), test=load(n // 2))


@dagc.pipeline
def main(n: int = 10) -> list:
    parts = prepare(n)
    train, test, note = prepare(n + 2)
    return [total(parts.train), total(parts[1]), total(train), total(test), note, describe(parts),
            total(parts[pick(n)])]


@dagc.pipeline
def whole(n: int = 4) -> Split:
    return prepare(n)
