"""Parsing and formatting of the quantities users write: durations, byte sizes, bandwidths.

Every parser returns a float/int in base units (seconds, bytes, bytes per second) or raises
`UnitError` with a message that names the accepted forms, so callers can turn it into a diagnostic.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "UnitError",
    "parse_duration",
    "parse_size",
    "parse_cpus",
    "CPU_FORMS",
    "parse_bandwidth",
    "format_duration",
    "format_size",
    "DURATION_FORMS",
    "SIZE_FORMS",
]


class UnitError(ValueError):
    """A quantity could not be parsed; the message says what is accepted."""


DURATION_FORMS = 'a number of seconds, or a string such as "90s", "2m30s", "1h", "500ms", "1.5h"'
SIZE_FORMS = 'a number of bytes, or a string such as "512MiB", "16GiB", "2GB", "64KiB", "500Mi", "2Gi"'
CPU_FORMS = 'a number of cores, or a Kubernetes quantity such as "500m" (half a core) or "2"'
BANDWIDTH_FORMS = 'bytes per second (e.g. 1250000000 or 1.25e9), or a string such as "10Gbit/s", "25GB/s", "100MiB/s"'

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|min|s|m|h|d)\s*")

_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    # Kubernetes quantities ("500Mi", "2Gi", "1.5G"), as people write them in pod specs
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
# a number (an exponent allowed: "1.5e3MB/s") and a unit per second
_BANDWIDTH_RE = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*(?:/\s*s|ps)\s*$")


def _check_number(value: object, what: str, forms: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnitError(f"{what} must be {forms}; got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise UnitError(f"{what} must be a finite, non-negative number; got {value!r}")
    return float(value)


def parse_duration(value: object) -> float:
    """`"2m30s"` → 150.0; a bare number is seconds."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return _check_number(float(text), "a duration", DURATION_FORMS)
        except ValueError:
            pass
        pos, total, parts = 0, 0.0, 0
        while pos < len(text):
            match = _DURATION_PART.match(text, pos)
            if match is None or match.end() == pos:
                raise UnitError(f"cannot read duration {value!r}: expected {DURATION_FORMS}")
            total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            pos, parts = match.end(), parts + 1
        if parts == 0:
            raise UnitError(f"cannot read duration {value!r}: expected {DURATION_FORMS}")
        return total
    return _check_number(value, "a duration", DURATION_FORMS)


def parse_size(value: object) -> int:
    """`"512MiB"` → 536870912; a bare number is bytes."""
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or (unit and unit not in _SIZE_UNITS):
            raise UnitError(f"cannot read size {value!r}: expected {SIZE_FORMS}")
        return int(round(float(match.group(1)) * _SIZE_UNITS[unit or "b"]))
    return int(round(_check_number(value, "a size", SIZE_FORMS)))


_CPU_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(m?)\s*$")


def parse_cpus(value: object) -> float:
    """`"500m"` → 0.5 (Kubernetes millicores), `"2"` → 2.0; a bare number is cores."""
    if isinstance(value, str):
        match = _CPU_RE.match(value)
        if match is None:
            raise UnitError(f"cannot read CPU amount {value!r}: expected {CPU_FORMS}")
        return float(match.group(1)) / (1000.0 if match.group(2) else 1.0)
    return _check_number(value, "a CPU amount", CPU_FORMS)


def parse_bandwidth(value: object) -> float:
    """`"10Gbit/s"` → 1.25e9 bytes per second; a bare number (`1e9`, `"1250000000"`) is bytes per second."""
    if isinstance(value, str):
        if re.fullmatch(r"\s*(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*", value):
            return _check_number(float(value), "a bandwidth", BANDWIDTH_FORMS)
        match = _BANDWIDTH_RE.match(value)
        if match is None:
            raise UnitError(f"cannot read bandwidth {value!r}: expected {BANDWIDTH_FORMS}")
        number, unit = float(match.group(1)), match.group(2)
        low = unit.lower()
        if low.endswith("bit") or low.endswith("bits") or low.endswith("bps") or (unit and unit[-1] == "b"):
            prefix = re.sub(r"(bits?|bps|b)$", "", low)
            scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}.get(prefix)
            if scale is None:
                raise UnitError(f"cannot read bandwidth {value!r}: expected {BANDWIDTH_FORMS}")
            return number * scale / 8
        scale = _SIZE_UNITS.get(low or "b")
        if scale is None:
            raise UnitError(f"cannot read bandwidth {value!r}: expected {BANDWIDTH_FORMS}")
        return number * scale
    return _check_number(value, "a bandwidth", BANDWIDTH_FORMS)


def format_duration(seconds: float) -> str:
    """Short, exact-enough display: 150 → "2m30s", 0.5 → "500ms", 7.25 → "7.25s"."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}us"
    if seconds < 60 or seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs:
        out += f"{secs}s"
    return out


def format_size(nbytes: float) -> str:
    """Binary units, at most three significant decimals: 536870912 → "512MiB"."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            text = f"{value:.3f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
        value /= 1024
    raise AssertionError("unreachable")
