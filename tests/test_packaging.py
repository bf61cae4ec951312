"""Every package in the source tree is listed in pyproject.toml, so a wheel install is complete."""

from __future__ import annotations

import sys

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_package_is_installed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    listed = set(config["packages"])
    found = set()
    for package, directory in mapping.items():
        base = REPO / directory
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join((package, *rel)))
    assert found == listed, f"missing: {sorted(found - listed)}, stale: {sorted(listed - found)}"
    assert "dagc.ir" in listed and mapping["dagc.ir"] == "ir" and mapping["dagc.backends"] == "backends"
