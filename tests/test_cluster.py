"""Cluster model and its parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.cluster import Cluster, ClusterError, cluster_from_pyproject, load_cluster_file, parse_cluster_spec


def test_spec_single_node():
    c = parse_cluster_spec("4")
    assert c.n_devices == 4 and c.n_nodes == 1
    assert [d.id for d in c.devices] == [0, 1, 2, 3]
    assert all(d.kind == "gpu" and d.gpus == 1 and d.memory is None and d.speed == 1.0 for d in c.devices)


def test_spec_nodes_by_devices():
    c = parse_cluster_spec("2x4")
    assert c.n_devices == 8 and c.n_nodes == 2
    assert [d.node for d in c.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert c.link(0, 1) is c.intra and c.link(0, 4) is c.inter and c.link(3, 3) is None
    assert c.transfer_time(1e9, 2, 2) == 0.0


def test_no_cluster_is_one_local_device():
    c = parse_cluster_spec(None)
    assert c.n_devices == 1 and c.implicit
    assert Cluster.local() == c


def test_link_overrides_with_units():
    c = parse_cluster_spec("2x2", link_bandwidth="10Gbit/s", link_latency="20us")
    assert c.intra.bandwidth == c.inter.bandwidth == pytest.approx(1.25e9)
    assert c.inter.latency == pytest.approx(20e-6)
    assert c.transfer_time(1.25e9, 0, 3) == pytest.approx(1 + 20e-6)


@pytest.mark.parametrize("spec", ["0", "x4", "2x0", "four", "2x4x8", "-1"])
def test_bad_specs(spec):
    with pytest.raises(ClusterError) as info:
        parse_cluster_spec(spec)
    assert info.value.hint


def test_bad_link_units():
    with pytest.raises(ClusterError, match="bandwidth"):
        parse_cluster_spec("4", link_bandwidth="fast")
    with pytest.raises(ClusterError, match="latency"):
        parse_cluster_spec("4", link_latency="soon")


CLUSTER_TOML = """
[links.intra]
bandwidth = "300GB/s"
latency = "5us"
[links.inter]
bandwidth = "25Gbit/s"
latency = "30us"

[device]
kind = "gpu"
memory = "80GiB"

[[nodes]]
name = "big"
devices = [{ kind = "gpu", memory = "80GiB", speed = 2.0, count = 2 }, { kind = "cpu", count = 1 }]

[[nodes]]
name = "small"
count = 2
devices = 2
memory = "16GiB"
"""


def test_cluster_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CLUSTER_TOML)
    c = load_cluster_file(str(path))
    assert c.n_devices == 7 and c.n_nodes == 3
    assert c.node_names == ("big", "small0", "small1")
    big = c.node_devices(0)
    assert [d.kind for d in big] == ["gpu", "gpu", "cpu"]
    assert big[0].speed == 2.0 and big[0].memory == 80 * 2**30 and big[2].gpus == 0
    assert c.devices[3].memory == 16 * 2**30 and c.devices[3].node == 1
    assert c.intra.bandwidth == 300e9 and c.inter.bandwidth == pytest.approx(25e9 / 8)
    assert c.inter.latency == pytest.approx(30e-6)
    assert parse_cluster_spec(str(path)) == c


@pytest.mark.parametrize(
    "text, match",
    [
        ("[[nodes]]\ndevices = 0\n", "positive"),
        ("[[nodes]]\ndevices = 2\nkind = 'tpu'\n", "kind"),
        ("[[nodes]]\ndevices = 2\nspeed = -1\n", "speed"),
        ("[[nodes]]\ndevices = 2\nmemory = 'lots'\n", "memory"),
        ("[[nodes]]\ndevices = 2\ncolour = 'red'\n", "colour"),
        ("[links.inter]\nbandwidth = 'x'\n[[nodes]]\ndevices=1\n", "bandwidth"),
        ("[device]\nkind='gpu'\n", "no nodes"),
        ("this is = = not toml", "TOML"),
    ],
)
def test_bad_cluster_files(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ClusterError, match=match):
        load_cluster_file(str(path))


def test_missing_cluster_file():
    with pytest.raises(ClusterError, match="not found"):
        parse_cluster_spec("nope/cluster.toml")


def test_pyproject_defaults(tmp_path):
    py = tmp_path / "pyproject.toml"
    py.write_text('[tool.dagc]\ncluster = "2x4"\nlink-bandwidth = "100Gbit/s"\n')
    c = cluster_from_pyproject(str(py))
    assert c is not None and c.n_devices == 8 and c.inter.bandwidth == pytest.approx(12.5e9)
    (tmp_path / "c.toml").write_text(CLUSTER_TOML)
    py.write_text('[tool.dagc]\ncluster-file = "c.toml"\n')
    c = cluster_from_pyproject(str(py))
    assert c is not None and c.n_devices == 7
    py.write_text("[project]\nname = 'x'\n")
    assert cluster_from_pyproject(str(py)) is None
    assert cluster_from_pyproject(str(tmp_path / "absent.toml")) is None
    py.write_text('[tool.dagc]\ncluster = "2x4"\ncluster-file = "c.toml"\n')
    with pytest.raises(ClusterError, match="both"):
        cluster_from_pyproject(str(py))


# ---- CPUs and custom resources of nodes (cluster files) -------------------------------------------------
OFFERS_CLUSTER = """
[device]
kind = "cpu"

[[nodes]]
name = "small"
devices = 2
cpus = 4

[[nodes]]
name = "tpu"
devices = 2
cpus = "16"
resources = { tpu = 4 }
"""

OFFERS_PIPELINE = """
import dagc

@dagc.task(cpus={cpus!r}, resources={resources!r}, cost="1s")
def work(x: int) -> int:
    return x + 1

@dagc.task(cost="1s")
def other(x: int) -> int:
    return x * 2

@dagc.pipeline
def p():
    return work(1), other(2), other(3), other(4)
"""


def _offers_project(write_project, cpus: object, resources: dict[str, float]) -> tuple[Path, Path]:
    root = write_project({"p.py": OFFERS_PIPELINE.format(cpus=cpus, resources=resources),
                          "cluster.toml": OFFERS_CLUSTER})
    return root / "p.py", root / "cluster.toml"


def test_node_cpus_and_resources_are_read_from_the_cluster_file(tmp_path: Path, write_project) -> None:
    _, cluster_file = _offers_project(write_project, 1, {})
    cluster = parse_cluster_spec(str(cluster_file))
    assert [(d.node, d.cpus, d.resources) for d in cluster.devices] == [
        (0, 4.0, ()), (0, 4.0, ()), (1, 16.0, (("tpu", 4.0),)), (1, 16.0, (("tpu", 4.0),))]
    assert "node CPUs 16, tpu 4" in cluster.devices[2].describe()


@pytest.mark.parametrize("cpus, resources", [(8, {}), ("8000m", {}), (1, {"tpu": 2})])
def test_tasks_go_only_where_their_cpus_and_resources_are(write_project, cpus: object,
                                                          resources: dict[str, float]) -> None:
    from dagc.driver import compile_file

    script, cluster_file = _offers_project(write_project, cpus, resources)
    graph = compile_file(script, cluster=parse_cluster_spec(str(cluster_file)))
    assert graph.node("work").attributes()["partition.device"] in (2, 3)  # only the second node has them


@pytest.mark.parametrize("cpus, resources, text", [
    (32, {}, "it needs 32 CPU(s) and the largest node has 16"),
    (1, {"tpu": 8}, "it needs 8 of the custom resource `tpu` and the most a node has is 4"),
    (1, {"fpga": 1}, "it needs 1 of the custom resource `fpga` and no node has it"),
])
def test_cpus_or_resources_no_node_has_are_dagc302(write_project, cpus: object, resources: dict[str, float],
                                                   text: str) -> None:
    from dagc.diagnostics import CompileError
    from dagc.driver import compile_file

    script, cluster_file = _offers_project(write_project, cpus, resources)
    with pytest.raises(CompileError) as caught:
        compile_file(script, cluster=parse_cluster_spec(str(cluster_file)))
    (diag,) = caught.value.diagnostics
    assert diag.code == "DAGC302" and text in diag.message
    assert script.read_text().splitlines()[diag.span.line - 1].strip().startswith("return work(1)")


def test_custom_resources_are_not_checked_on_a_cluster_that_states_none(write_project) -> None:
    from dagc.driver import compile_file

    script, _ = _offers_project(write_project, 2, {"tpu": 1})
    graph = compile_file(script, cluster=parse_cluster_spec("2"))  # "2" says nothing of CPUs or resources
    assert graph.node("work").attributes()["partition.device"] in (0, 1)
