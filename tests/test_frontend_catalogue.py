"""docs/diagnostics.md and dagc.diagnostics.CODES stay in sync, and every example gives its code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagc.diagnostics import CODES
from dagc.frontend import compile_source
from tests.conftest import REPO

DOC = (REPO / "docs" / "diagnostics.md").read_text(encoding="utf-8")
_SECTION = re.compile(r"^### (DAGC\d{3}) — (.+)$", re.M)
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)


def _sections() -> dict[str, str]:
    heads = list(_SECTION.finditer(DOC))
    out = {}
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(DOC)
        out[m.group(1)] = DOC[m.end():end]
    return out


SECTIONS = _sections()
PRELUDE = _PYTHON.search(DOC[: DOC.index("## ")]).group(1)  # type: ignore[union-attr]


def test_every_code_is_documented_once_and_nothing_else() -> None:
    documented = _SECTION.findall(DOC)
    assert [c for c, _ in documented] == sorted(CODES), "sections must list every code, in order"
    for code, title in documented:
        assert title == CODES[code], f"{code}: title differs from CODES"
        assert "**Fix:**" in SECTIONS[code], f"{code} has no fix"


@pytest.mark.parametrize("code", [c for c in sorted(CODES) if "*Not from a script:*" not in SECTIONS.get(c, "")])
def test_documented_example_produces_its_code(tmp_path: Path, code: str) -> None:
    example = _PYTHON.search(SECTIONS[code])
    assert example is not None, f"{code} has no example"
    (tmp_path / "example.py").write_text(PRELUDE + "\n\n" + example.group(1), encoding="utf-8")
    result = compile_source(tmp_path / "example.py")
    codes = [d.code for d in result.sink.diagnostics]
    assert code in codes, f"{code}: the example gives {codes}"


@pytest.mark.parametrize("code", [c for c in sorted(CODES) if "*Not from a script:*" in SECTIONS.get(c, "")])
def test_codes_not_from_scripts_are_still_emitted(code: str) -> None:
    sources = [p for d in ("dagc", "ir", "backends") for p in (REPO / d).rglob("*.py")]
    assert any(f'"{code}"' in p.read_text(encoding="utf-8") for p in sources
               if p.name != "diagnostics.py"), f"{code} is documented but nothing emits it"
