"""The cluster model: nodes, devices, and the links between them.

A `Cluster` is a list of `Device`s (ids dense 0..D-1), each on a node, plus two links: one between
devices of the same node (intra-node) and one between nodes (inter-node). Passes read it through
`PassContext.cluster`; `None` there means `Cluster.local()`, one local device.

Ways to build one (see docs/cluster.md):

    parse_cluster_spec("4")          one node with 4 devices
    parse_cluster_spec("2x4")        2 nodes × 4 devices
    parse_cluster_spec("c.toml")     a cluster file with full detail
    load_cluster_file(path)          the same, explicitly
    cluster_from_pyproject(path)     `[tool.dagc]` defaults: cluster / cluster-file / link settings

Bad input raises `ClusterError(message, hint)`; the command line turns it into diagnostic DAGC301.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from dagc.units import UnitError, format_size, parse_bandwidth, parse_duration, parse_size

__all__ = [
    "DEFAULT_FLOPS",
    "DEFAULT_INTER_LINK",
    "DEFAULT_INTRA_LINK",
    "Cluster",
    "ClusterError",
    "Device",
    "Link",
    "apply_link_overrides",
    "find_pyproject",
    "resolve_cluster",
    "cluster_from_pyproject",
    "cluster_from_toml",
    "load_cluster_file",
    "parse_cluster_spec",
]



def _toml() -> Any:
    """tomllib, imported when a TOML file is read (it costs a tenth of `dagc check`'s start-up)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


SPEC_FORMS = '"N" (one node with N devices), "MxN" (M nodes with N devices each), or a path to a .toml file'

# FLOP/s of a device of speed 1.0, by kind (a task that gives only `flops` runs for flops / rate).
DEFAULT_FLOPS: dict[str, float] = {"gpu": 100e12, "cpu": 1e12}
# Watts a device draws idle and busy, by kind, where the cluster does not say (`idle_watts`, `busy_watts`): a
# data-centre GPU of the A100/H100 class (about 60 W idle, 300 W under a training load, against 400-700 W
# board limits) and a CPU device of a few cores with their share of the package and DRAM.
DEFAULT_POWER: dict[str, tuple[float, float]] = {"gpu": (60.0, 300.0), "cpu": (10.0, 45.0)}
KINDS = ("gpu", "cpu")


class ClusterError(ValueError):
    """A cluster description could not be read. `hint` names the accepted form."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Link:
    """A link class: `bandwidth` in bytes/s, `latency` in seconds."""

    bandwidth: float
    latency: float

    def time(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


# Defaults: a fast intra-node interconnect and a 10 Gbit/s network between nodes.
DEFAULT_INTRA_LINK = Link(bandwidth=50e9, latency=10e-6)
DEFAULT_INTER_LINK = Link(bandwidth=1.25e9, latency=50e-6)


@dataclass(frozen=True)
class Device:
    """One device. `memory` in bytes (None = unlimited); `speed` relative to 1.0; `gpus` it provides."""

    id: int
    node: int
    kind: str = "gpu"
    memory: int | None = None
    speed: float = 1.0
    gpus: int = 1
    flops: float | None = None  # FLOP/s; None = DEFAULT_FLOPS[kind] × speed
    # what the device's node offers a task besides its devices: CPU cores (None = not stated: no
    # limit) and custom resources (Ray's); a task needing more than its node has cannot run there
    cpus: float | None = None
    resources: tuple[tuple[str, float], ...] = ()
    idle_watts: float | None = None  # None = DEFAULT_POWER[kind]
    busy_watts: float | None = None

    @property
    def idle_power(self) -> float:
        return self.idle_watts if self.idle_watts is not None else DEFAULT_POWER.get(self.kind, DEFAULT_POWER["cpu"])[0]

    @property
    def busy_power(self) -> float:
        return self.busy_watts if self.busy_watts is not None else DEFAULT_POWER.get(self.kind, DEFAULT_POWER["cpu"])[1]

    @property
    def flops_rate(self) -> float:
        if self.flops is not None:
            return self.flops
        return DEFAULT_FLOPS.get(self.kind, DEFAULT_FLOPS["cpu"]) * self.speed

    def describe(self) -> str:
        mem = format_size(self.memory) if self.memory is not None else "unlimited"
        offer = "".join([f", node CPUs {self.cpus:g}" if self.cpus is not None else "",
                         *(f", {key} {amount:g}" for key, amount in self.resources)])
        return f"device {self.id} (node {self.node}, {self.kind}, memory {mem}, speed {self.speed:g}{offer})"


@dataclass(frozen=True)
class Cluster:
    """Devices grouped into nodes, and the intra-/inter-node links.

    `implicit` marks the default local cluster (no cluster given): there, resource demands are
    not checked at compile time, because the local machine's devices are not described.
    """

    devices: tuple[Device, ...]
    intra: Link = DEFAULT_INTRA_LINK
    inter: Link = DEFAULT_INTER_LINK
    node_names: tuple[str, ...] = ()
    implicit: bool = False
    source: str = field(default="", compare=False)
    # False for `--cluster N` / `NxM`: the shorthand says how many devices, not what they are (they are
    # costed as GPUs), so names and descriptions say "device", never "gpu"
    kinds_stated: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        if not self.devices:
            raise ClusterError("a cluster needs at least one device", hint=SPEC_FORMS)
        for i, dev in enumerate(self.devices):
            if dev.id != i:
                raise ClusterError(f"device ids must be dense 0..{len(self.devices) - 1}; got {dev.id} at {i}")
        if not self.node_names:
            object.__setattr__(self, "node_names", tuple(f"node{i}" for i in range(self.n_nodes)))

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def local(cls) -> Cluster:
        """One local device; resource demands are not enforced (see `implicit`)."""
        return cls((Device(0, 0, kind="cpu", gpus=0),), implicit=True, source="local")

    @classmethod
    def uniform(
        cls,
        nodes: int,
        per_node: int,
        *,
        kind: str = "gpu",
        memory: int | None = None,
        speed: float = 1.0,
        intra: Link = DEFAULT_INTRA_LINK,
        inter: Link = DEFAULT_INTER_LINK,
        kinds_stated: bool = True,
    ) -> Cluster:
        gpus = 1 if kind == "gpu" else 0
        devices = tuple(
            Device(n * per_node + i, n, kind=kind, memory=memory, speed=speed, gpus=gpus)
            for n in range(nodes)
            for i in range(per_node)
        )
        return cls(devices, intra=intra, inter=inter, source=f"{nodes}x{per_node}", kinds_stated=kinds_stated)

    def first(self, count: int) -> Cluster:
        """The cluster of its first `count` devices (a plan that uses fewer: `dagc plan --objective`)."""
        return Cluster(self.devices[:count], intra=self.intra, inter=self.inter, node_names=self.node_names,
                       implicit=self.implicit, source=f"{self.source}[:{count}]", kinds_stated=self.kinds_stated)

    def with_links(self, bandwidth: float | None = None, latency: float | None = None) -> Cluster:
        """Every link (intra and inter) given this bandwidth and/or latency."""
        intra, inter = self.intra, self.inter
        if bandwidth is not None:
            intra, inter = replace(intra, bandwidth=bandwidth), replace(inter, bandwidth=bandwidth)
        if latency is not None:
            intra, inter = replace(intra, latency=latency), replace(inter, latency=latency)
        return replace(self, intra=intra, inter=inter)

    # ---- queries -----------------------------------------------------------------------------
    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def n_nodes(self) -> int:
        return max(d.node for d in self.devices) + 1

    def node_devices(self, node: int) -> list[Device]:
        return [d for d in self.devices if d.node == node]

    def link(self, a: int, b: int) -> Link | None:
        """The link between two devices; None for the same device."""
        if a == b:
            return None
        return self.intra if self.devices[a].node == self.devices[b].node else self.inter

    def transfer_time(self, nbytes: float, a: int, b: int) -> float:
        link = self.link(a, b)
        return 0.0 if link is None else link.time(nbytes)

    def device_name(self, device: int) -> str:
        """`gpu 3`, `cpu 0`: a device named by the kind the cluster states (`device 3` where it states none)."""
        if self.kinds_stated and 0 <= device < self.n_devices:
            return f"{self.devices[device].kind} {device}"
        return f"device {device}"

    def describe(self) -> str:
        if not self.kinds_stated:
            return f"{self.n_nodes} node(s), {self.n_devices} device(s) (kind not stated; costed as GPUs)"
        kinds: dict[str, int] = {}
        for d in self.devices:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        return f"{self.n_nodes} node(s), {self.n_devices} device(s) ({what})"


# ---- parsers ---------------------------------------------------------------------------------
_SPEC_RE = re.compile(r"^\s*(?:(\d+)\s*[xX×]\s*)?(\d+)\s*$")


def parse_cluster_spec(
    spec: str | None,
    *,
    link_bandwidth: str | float | None = None,
    link_latency: str | float | None = None,
    base_dir: str = ".",
) -> Cluster:
    """`"4"`, `"2x4"` or a `.toml` path → Cluster; `None`/`""`/`"local"` → `Cluster.local()`.

    `link_bandwidth`/`link_latency` (strings with units, as on the command line) override every link.
    """
    if spec is None or str(spec).strip() in ("", "local"):
        cluster = Cluster.local()
    else:
        text = str(spec).strip()
        match = _SPEC_RE.match(text)
        if match:
            nodes = int(match.group(1)) if match.group(1) else 1
            per_node = int(match.group(2))
            if nodes < 1 or per_node < 1:
                raise ClusterError(f"cluster {text!r} has no devices", hint=f"write {SPEC_FORMS}")
            cluster = Cluster.uniform(nodes, per_node, kinds_stated=False)
        elif text.endswith(".toml") or os.path.exists(os.path.join(base_dir, text)):
            cluster = load_cluster_file(os.path.join(base_dir, text))
        else:
            raise ClusterError(f"cannot read cluster {text!r}", hint=f"write {SPEC_FORMS}")
    return apply_link_overrides(cluster, link_bandwidth, link_latency)


def apply_link_overrides(cluster: Cluster, bandwidth: Any, latency: Any) -> Cluster:
    bw = _quantity(bandwidth, parse_bandwidth, "link bandwidth") if bandwidth is not None else None
    lat = _quantity(latency, parse_duration, "link latency") if latency is not None else None
    if bw is not None and bw <= 0:
        raise ClusterError("link bandwidth must be positive", hint='e.g. "10Gbit/s" or "25GB/s"')
    if bw is None and lat is None:
        return cluster
    return cluster.with_links(bw, lat)


def _quantity(value: Any, parser: Any, what: str) -> Any:
    try:
        return parser(value)
    except UnitError as exc:
        raise ClusterError(f"bad {what}: {exc}", hint=str(exc).split("expected ")[-1]) from None


def load_cluster_file(path: str) -> Cluster:
    """Read a cluster TOML file (format in docs/cluster.md)."""
    tomllib = _toml()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ClusterError(f"cluster file {path!r} not found", hint="give an existing .toml file") from None
    except OSError as exc:
        raise ClusterError(f"cannot read cluster file {path!r}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ClusterError(f"cluster file {path!r} is not valid TOML: {exc}") from None
    return cluster_from_toml(data, source=path)


_LINK_KEYS = {"bandwidth", "latency"}
_DEVICE_KEYS = {"kind", "memory", "speed", "gpus", "flops", "count", "idle_watts", "busy_watts"}
_NODE_KEYS = {"name", "devices", "count", "cpus", "resources"} | _DEVICE_KEYS - {"count"}
_TOP_KEYS = {"links", "device", "nodes", "intra", "inter"}


def _check_keys(table: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ClusterError(f"{where} must be a table", hint="see docs/cluster.md")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ClusterError(
            f"unknown key {unknown[0]!r} in {where}", hint=f"accepted keys: {', '.join(sorted(allowed))}"
        )
    return table


def _link(table: Any, default: Link, where: str) -> Link:
    table = _check_keys(table, _LINK_KEYS, where)
    bw = _quantity(table["bandwidth"], parse_bandwidth, f"{where}.bandwidth") if "bandwidth" in table else None
    lat = _quantity(table["latency"], parse_duration, f"{where}.latency") if "latency" in table else None
    if bw is not None and bw <= 0:
        raise ClusterError(f"{where}.bandwidth must be positive", hint='e.g. "10Gbit/s"')
    return Link(bw if bw is not None else default.bandwidth, lat if lat is not None else default.latency)


def _device_fields(table: dict[str, Any], base: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(base)
    if "kind" in table:
        if table["kind"] not in KINDS:
            raise ClusterError(f"{where}.kind must be one of {', '.join(KINDS)}; got {table['kind']!r}")
        out["kind"] = table["kind"]
    if "memory" in table:
        out["memory"] = _quantity(table["memory"], parse_size, f"{where}.memory")
    if "speed" in table:
        speed = table["speed"]
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0:
            raise ClusterError(f"{where}.speed must be a positive number; got {speed!r}", hint="e.g. speed = 1.5")
        out["speed"] = float(speed)
    if "gpus" in table:
        gpus = table["gpus"]
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
            raise ClusterError(f"{where}.gpus must be a non-negative integer; got {gpus!r}")
        out["gpus"] = gpus
    if "flops" in table:
        flops = table["flops"]
        if isinstance(flops, str):
            try:
                flops = float(flops)
            except ValueError:
                raise ClusterError(f"{where}.flops must be a number of FLOP/s; got {flops!r}") from None
        if isinstance(flops, bool) or not isinstance(flops, (int, float)) or not flops > 0:
            raise ClusterError(f"{where}.flops must be a positive number of FLOP/s; got {flops!r}")
        out["flops"] = float(flops)
    for key in ("idle_watts", "busy_watts"):
        if key in table:
            watts = table[key]
            if isinstance(watts, bool) or not isinstance(watts, (int, float)) or watts < 0:
                raise ClusterError(f"{where}.{key} must be a non-negative number of watts; got {watts!r}",
                                   hint=f"e.g. {key} = {300 if key == 'busy_watts' else 60}")
            out[key] = float(watts)
    return out


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClusterError(f"{where} must be a positive integer; got {value!r}")
    return value


def cluster_from_toml(data: dict[str, Any], source: str = "<toml>") -> Cluster:
    """Build a Cluster from the parsed TOML table of a cluster file."""
    _check_keys(data, _TOP_KEYS, "the cluster file")
    links = _check_keys(data.get("links", {}), {"intra", "inter"}, "[links]")
    intra = _link(links.get("intra", data.get("intra", {})), DEFAULT_INTRA_LINK, "links.intra")
    inter = _link(links.get("inter", data.get("inter", {})), DEFAULT_INTER_LINK, "links.inter")
    defaults = _device_fields(
        _check_keys(data.get("device", {}), _DEVICE_KEYS - {"count"}, "[device]"),
        {"kind": "gpu", "memory": None, "speed": 1.0},
        "device",
    )
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise ClusterError(
            f"cluster file {source!r} lists no nodes", hint="add [[nodes]] tables, e.g. [[nodes]] devices = 4"
        )
    devices: list[Device] = []
    names: list[str] = []
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        node = _check_keys(node, _NODE_KEYS, where)
        node_base = _device_fields(node, defaults, where)
        repeat = _count(node.get("count", 1), f"{where}.count")
        spec = node.get("devices", 1)
        groups: list[tuple[dict[str, Any], int]] = []
        if isinstance(spec, int) and not isinstance(spec, bool):
            groups.append((node_base, _count(spec, f"{where}.devices")))
        elif isinstance(spec, list) and spec:
            for j, dev in enumerate(spec):
                dwhere = f"{where}.devices[{j}]"
                dev = _check_keys(dev, _DEVICE_KEYS, dwhere)
                groups.append((_device_fields(dev, node_base, dwhere), _count(dev.get("count", 1), f"{dwhere}.count")))
        else:
            raise ClusterError(
                f"{where}.devices must be a device count or a list of device tables; got {spec!r}",
                hint='e.g. devices = 4, or devices = [{kind = "gpu", memory = "80GiB", count = 8}]',
            )
        cpus, resources = _node_offer(node, where)
        for r in range(repeat):
            node_index = len(names)
            base_name = node.get("name", f"node{node_index}")
            if not isinstance(base_name, str):
                raise ClusterError(f"{where}.name must be a string")
            names.append(base_name if repeat == 1 else f"{base_name}{r}")
            for fields_, count in groups:
                kind = fields_["kind"]
                gpus = fields_.get("gpus", 1 if kind == "gpu" else 0)
                for _ in range(count):
                    devices.append(
                        Device(
                            id=len(devices),
                            node=node_index,
                            kind=kind,
                            memory=fields_.get("memory"),
                            speed=fields_.get("speed", 1.0),
                            gpus=gpus,
                            flops=fields_.get("flops"),
                            cpus=cpus,
                            resources=resources,
                            idle_watts=fields_.get("idle_watts"),
                            busy_watts=fields_.get("busy_watts"),
                        )
                    )
    if len(set(names)) != len(names):
        raise ClusterError(f"node names in {source!r} are not unique", hint="give each [[nodes]] its own name")
    return Cluster(tuple(devices), intra=intra, inter=inter, node_names=tuple(names), source=source)


def _node_offer(node: dict[str, Any], where: str) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """A node's `cpus` (cores: a number or "500m") and `resources` (a table of name = amount)."""
    from dagc.units import UnitError, parse_cpus

    cpus = None
    if "cpus" in node:
        try:
            cpus = parse_cpus(node["cpus"])
        except UnitError as exc:
            raise ClusterError(f"{where}.cpus: {exc}", hint='e.g. cpus = 32, or cpus = "500m"') from None
    table = node.get("resources", {})
    if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in table.items()):
        raise ClusterError(f"{where}.resources must be a table of name = amount (amounts ≥ 0); got {table!r}",
                           hint='e.g. resources = { tpu = 4, "accelerator_type:A100" = 1 }')
    return cpus, tuple(sorted((k, float(v)) for k, v in table.items()))


def find_pyproject(path: str | os.PathLike[str]) -> str | None:
    """The nearest pyproject.toml at or above `path`'s directory (the user's project settings)."""
    here = os.path.dirname(os.path.abspath(path))
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def resolve_cluster(
    spec: str | None,
    *,
    link_bandwidth: str | float | None = None,
    link_latency: str | float | None = None,
    near: str | os.PathLike[str] | None = None,
) -> Cluster | None:
    """The cluster a command line asks for: `--cluster`/`--link-*` when given, else the `[tool.dagc]`
    defaults of the pyproject.toml nearest to `near` (the user's script), else None (one local device)."""
    if spec is None and near is not None:
        pyproject = find_pyproject(near)
        cluster = cluster_from_pyproject(pyproject) if pyproject is not None else None
        if cluster is not None:
            return apply_link_overrides(cluster, link_bandwidth, link_latency)
    if spec is None and link_bandwidth is None and link_latency is None:
        return None
    return parse_cluster_spec(spec, link_bandwidth=link_bandwidth, link_latency=link_latency)


def cluster_from_pyproject(path: str) -> Cluster | None:
    """The `[tool.dagc]` cluster defaults of a pyproject.toml, or None when it sets none.

    Keys: `cluster = "2x4"` or `cluster-file = "cluster.toml"` (relative to the pyproject's folder),
    `link-bandwidth = "10Gbit/s"`, `link-latency = "20us"`.
    """
    tomllib = _toml()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ClusterError(f"cannot read {path!r}: {exc}") from None
    table = data.get("tool", {}).get("dagc", {})
    if not isinstance(table, dict):
        raise ClusterError(f"[tool.dagc] in {path!r} must be a table")
    base_dir = os.path.dirname(os.path.abspath(path))
    spec, cfile = table.get("cluster"), table.get("cluster-file")
    bw, lat = table.get("link-bandwidth"), table.get("link-latency")
    if spec is not None and cfile is not None:
        raise ClusterError(
            f"[tool.dagc] in {path!r} sets both cluster and cluster-file", hint="keep one of the two"
        )
    if spec is None and cfile is None:
        if bw is None and lat is None:
            return None
        return apply_link_overrides(Cluster.local(), bw, lat)
    if cfile is not None:
        if not isinstance(cfile, str):
            raise ClusterError("[tool.dagc] cluster-file must be a string path")
        cluster = load_cluster_file(os.path.join(base_dir, cfile))
        return apply_link_overrides(cluster, bw, lat)
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = str(spec)
    if not isinstance(spec, str):
        raise ClusterError(f"[tool.dagc] cluster must be a string; got {spec!r}", hint=f"write {SPEC_FORMS}")
    return parse_cluster_spec(spec, link_bandwidth=bw, link_latency=lat, base_dir=base_dir)
