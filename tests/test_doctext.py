"""The docs test's reading of a page: markers, commands, and how shown output matches printed output."""

from __future__ import annotations

import pytest

from tests.doctext import bash_commands, blocks, commands, match_output

PAGE = """Intro.

<!-- doctest: file a.py -->
```python
print(1)
```

<!-- doctest -->
```text
$ python a.py   # prints one
1

$ dagc check 'a b.py'
```

```text
$ not marked
```

<!-- doctest: run -->
```bash
dagc ir a.py \\
    -p 'verify,dce'   # the passes
```
"""


def test_marked_blocks_in_page_order() -> None:
    found = blocks(PAGE)
    assert [(b.kind, b.name) for b in found] == [("file", "a.py"), ("output", ""), ("run", "")]
    assert found[0].body == "print(1)\n"
    assert [(c.argv, c.shown) for c in commands(found[1])] == [(["python", "a.py"], ["1"]),
                                                               (["dagc", "check", "a b.py"], [])]
    assert bash_commands(found[2]) == [["dagc", "ir", "a.py", "-p", "verify,dce"]]


def test_unknown_marker_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown doctest marker"):
        blocks("<!-- doctest: maybe -->\n```text\n$ x\n```\n")


@pytest.mark.parametrize(("shown", "printed", "numbers", "matches"), [
    (["a", "b"], "a\nb\n\n", False, True),
    (["a", "b"], "a\nc\n", False, False),
    (["a"], "a\nb\n", False, False),
    (["wrote ... (IR)"], "wrote out/q.ir.json (IR)\n", False, True),
    (["wrote ... (IR)"], "wrote out/q.ir.json (IR)\nmore\n", False, False),
    (["first", "...", "last"], "first\nlast\n", False, True),
    (["first", "...", "last"], "first\n1\n2\nlast\n", False, True),
    (["first", "...", "last"], "first\n1\n2\n", False, False),
    (["{'accuracy': 0.876, 'epochs': 80}"], "{'accuracy': 0.874, 'epochs': 80}\n", True, True),
    (["{'accuracy': 0.876, 'epochs': 80}"], "{'accuracy': 0.876, 'epochs': 80}\n", False, True),
    (["{'accuracy': 0.876, 'epochs': 80}"], "{'accuracy': 0.874, 'epochs': 80}\n", False, False),
    (["{'accuracy': 0.876}"], "{'loss': 0.874}\n", True, False),
    (["a.b"], "axb\n", False, False),
])
def test_shown_output_matches(shown: list[str], printed: str, numbers: bool, matches: bool) -> None:
    assert match_output(shown, printed, numbers=numbers) is matches
