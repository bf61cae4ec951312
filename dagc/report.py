"""`dagc report RUN_DIR`: one self-contained HTML page about a run (no network access needed).

The page holds: a summary (pipeline, run, status, measured and estimated makespan); each map
region's measured width (the items it listed in the run, how many of them were resumed, beside the
width it was planned for); the partitioned graph (inline SVG drawn by Graphviz or graphviz-pure); the measured timeline with the estimated one
beside it on the same time axis; a task table (planned device, where it ran, estimated and
measured time, output size, retries, status) that sorts by any column when its header is clicked
(it starts sorted by measured time, longest first); and every failure with its traceback.

The graph comes from `graph` (compiled by the caller, e.g. from `--ir` and `--cluster`), else
from an IR file in the run directory (`RUN_DIR/ir.json` or `RUN_DIR/*.ir.json`); without one the
page shows the run alone.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from dagc.ir.core import Graph
from dagc.profile import RunRecord, load_run

__all__ = ["build_report", "write_report", "find_run_graph"]

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
.summary td { padding: 2px 14px 2px 0; } .ok { color: #2e7d32; } .failed { color: #c62828; }
.figure { overflow-x: auto; border: 1px solid #eee; padding: 8px; }
.figure svg { max-width: 100%; height: auto; }
table.tasks { border-collapse: collapse; font-size: 13px; }
table.tasks th, table.tasks td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }
table.tasks th { cursor: pointer; background: #f5f5f5; user-select: none; position: sticky; top: 0; }
table.tasks th.sorted-asc::after { content: " \\25B2"; } table.tasks th.sorted-desc::after { content: " \\25BC"; }
table.tasks td.name, table.tasks th.name { text-align: left; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
pre.traceback { background: #fff5f5; border: 1px solid #f3c0c0; padding: 10px; overflow-x: auto; font-size: 12px; }
.muted { color: #777; }
"""

# Sorts the task table by a column (numbers by their data-value); starts by measured time, longest first.
_SCRIPT = """
(function () {
  var table = document.getElementById("tasks");
  if (!table) return;
  var heads = table.tHead.rows[0].cells;
  function sortBy(index, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = heads[index].getAttribute("data-type") === "number";
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute("data-value"), y = b.cells[index].getAttribute("data-value");
      var c;
      if (numeric) { x = x === "" ? -Infinity : parseFloat(x); y = y === "" ? -Infinity : parseFloat(y); c = x - y; }
      else { c = x < y ? -1 : x > y ? 1 : 0; }
      if (c === 0) c = a.rowIndex - b.rowIndex;
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) heads[i].className = heads[i].className.replace(/ ?sorted-(asc|desc)/, "");
    heads[index].className += descending ? " sorted-desc" : " sorted-asc";
    table.setAttribute("data-sorted", heads[index].getAttribute("data-key") + (descending ? "-desc" : "-asc"));
  }
  for (var i = 0; i < heads.length; i++) {
    (function (k) {
      heads[k].addEventListener("click", function () {
        sortBy(k, heads[k].className.indexOf("sorted-desc") < 0 && heads[k].getAttribute("data-type") === "number"
               ? true : heads[k].className.indexOf("sorted-asc") >= 0);
      });
    })(i);
  }
  var start = table.getAttribute("data-initial-sort");
  for (var j = 0; j < heads.length; j++) if (heads[j].getAttribute("data-key") === start) sortBy(j, true);
})();
"""


def find_run_graph(run_dir: Path) -> Graph | None:
    """The IR saved in the run directory, if any (`ir.json`, else the first `*.ir.json`)."""
    from dagc.ir.serialize import loads

    candidates = [run_dir / "ir.json", *sorted(run_dir.glob("*.ir.json"))]
    for path in candidates:
        if path.is_file():
            try:
                return loads(path.read_text(encoding="utf-8"))
            except (ValueError, KeyError, TypeError):
                continue
    return None


def _svg_body(svg: str) -> str:
    """An SVG document without its XML prolog and doctype, for inlining in HTML."""
    return re.sub(r"^.*?(?=<svg)", "", svg, count=1, flags=re.S)


def _num(value: float | None, digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _size(nbytes: int) -> str:
    """A size for people: three significant figures and a space (`70.5 KiB`, not `70.531KiB`)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.3g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.3g} TiB"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    from dagc.backends.graphviz.labels import short_time

    return short_time(value)


def build_report(run: RunRecord, graph: Graph | None = None, cluster: Any = None, cost_model: Any = None) -> str:
    """The report page's HTML text."""
    from dagc.backends import timeline
    from dagc.backends.graphviz import device_colour, to_dot
    from dagc.renderer import RenderError, render_dot

    if cost_model is None:
        from dagc.cost import CostModel

        cost_model = CostModel()
    esc = html.escape
    title = f"dagc report: {run.pipeline or (graph.name if graph is not None else 'run')} — run {run.run_id}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{esc(title)}</title>", f"<style>{_CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    estimate = graph.attrs.get("schedule.makespan") if graph is not None else None
    failures = run.failures
    rows = [("run directory", esc(str(run.run_dir))),
            ("status", f'<span class="{"ok" if run.status == "ok" else "failed"}">{esc(run.status)}</span>'
             + (f" — {esc(run.error)}" if run.error else "")),
            ("tasks", f"{sum(1 for t in run.tasks.values() if t.status == 'ok')} finished, "
             f"{sum(1 for t in run.tasks.values() if t.status == 'skipped')} skipped, {len(failures)} failure(s)"),
            *([("preemptions", f"{run.preemptions} (tasks stopped by a task of higher priority, then run again); "
                f"{_seconds(sum(t.waited for t in run.tasks.values()))} waited in the cluster's queue in all")]
              if run.queued else []),
            ("measured makespan", esc(_seconds(run.makespan))),
            ("run duration", esc(_seconds(run.duration)))]
    if isinstance(estimate, (int, float)):
        ratio = f" (measured / estimated = {run.makespan / estimate:.3g})" if estimate > 0 else ""
        rows.append(("estimated makespan", esc(_seconds(float(estimate))) + ratio))
    measured_energy = [t.energy for t in run.tasks.values() if t.energy is not None]
    # measured where the machine had counters; never a figure in a measurement's place (dagc.runtime.energy)
    rows.append(("energy", f"{sum(measured_energy):,.1f} J measured over {len(measured_energy)} task(s)"
                 if measured_energy else "not measured: no energy counter was readable where the tasks ran (NVML "
                 'or AMD SMI GPUs, RAPL CPU packages, through Zeus: pip install "dagc[energy]")'))
    if graph is not None and graph.attrs.get("profile.run"):
        rows.append(("costs from", f"profile of run {esc(str(graph.attrs['profile.run']))}"))
    parts.append('<table class="summary">' + "".join(f"<tr><td class=muted>{k}</td><td>{v}</td></tr>"
                                                     for k, v in rows) + "</table>")
    maps = _maps_table(run, graph)
    if maps:
        parts.append('<h2 id="maps">Map widths</h2>')
        parts.append(maps)

    if graph is not None:
        parts.append('<h2 id="graph">Partitioned graph</h2>')
        try:
            svg = render_dot(to_dot(graph, cluster=cluster, cost_model=cost_model), "svg").decode("utf-8")
            parts.append(f'<div class="figure">{_svg_body(svg)}</div>')
        except RenderError as exc:
            parts.append(f'<p class="muted">{esc(str(exc))}</p>')

    parts.append('<h2 id="timeline">Timeline</h2>')
    charts = [timeline.measured(run, graph)]
    if graph is not None:
        try:
            charts.append(timeline.estimated(graph, cluster, cost_model))
        except ValueError as exc:
            parts.append(f'<p class="muted">{esc(str(exc))}</p>')
    parts.append(f'<div class="figure">{timeline.to_svg(charts)}</div>')

    parts.append('<h2 id="task-table">Tasks</h2>')
    parts.append(_table(run, graph, cost_model, cluster, device_colour))

    parts.append('<h2 id="failures">Failures</h2>')
    if not failures:
        parts.append('<p class="muted">none</p>')
    for name, failure in failures:
        parts.append(f"<h3>{esc(name)} — attempt {esc(str(failure.get('attempt')))}: "
                     f"{esc(str(failure.get('error', '')))}</h3>")
        parts.append(f'<pre class="traceback">{esc(str(failure.get("traceback") or ""))}</pre>')
    parts.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"


def _maps_table(run: RunRecord, graph: Graph | None) -> str:
    """One row per map region (of the graph, nested ones too, then any other the run listed): the
    width it was planned for and the width measured in the run; "" when there is none."""
    from dagc.ir.regions import WIDTH_ATTR, walk

    esc = html.escape
    planned: dict[str, Any] = {}
    where: dict[str, str] = {}
    if graph is not None:
        for top in graph:
            for node in (top, *walk(top)):
                if node.op == "map":
                    planned[node.name] = node.attrs.get(WIDTH_ATTR)
                    where[node.name] = f"{node.span.file}:{node.span.line}" if node.span else ""
    names = list(planned) + [n for n in run.maps if n not in planned]
    if not names:
        return ""
    head = "".join(f"<th{' class=name' if i < 2 else ''}>{h}</th>" for i, h in enumerate(
        ("map", "loop at", "expected width", "measured width", "items run", "resumed", "listings", "ranks")))
    body = []
    for name in names:
        found = run.maps.get(name)
        expected = planned.get(name)
        cells = [f'<td class="name">{esc(name)}</td>', f'<td class="name">{esc(Path(where.get(name, "")).name)}</td>',
                 f"<td>{'—' if expected is None else esc(f'{expected:g}')}</td>"]
        if found is None:
            record = run.tasks.get(name)
            why = ("resumed whole: its output was stored" if record is not None and record.status == "skipped"
                   else "not listed in this run")
            cells.append(f'<td class="muted">{why}</td>' + "<td></td>" * 4)
        else:
            cells += [f"<td>{found.items:,}</td>", f"<td>{found.ran:,}</td>", f"<td>{found.resumed:,}</td>",
                      f"<td>{found.runs}</td>", f"<td>{found.ranks}</td>"]
        body.append(f'<tr data-map="{esc(name)}" data-width="{"" if found is None else found.items}">'
                    + "".join(cells) + "</tr>")
    return (f'<table class="tasks maps" id="maps-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _table(run: RunRecord, graph: Graph | None, cost_model: Any, cluster: Any, device_colour: Any) -> str:
    from dagc.backends.graphviz.model import node_devices, node_duration

    esc = html.escape
    names = list(run.tasks)
    if graph is not None:
        in_graph = [n.name for n in graph if n.op not in ("transfer", "glue")]
        names = in_graph + [n for n in names if n not in set(in_graph)]
    columns = [("task", "text", "name"), ("planned device", "number", ""), ("ran on", "text", ""),
               ("estimated", "number", ""), ("measured", "number", ""), ("measured / estimated", "number", ""),
               ("output", "number", ""), ("retries", "number", ""), ("status", "text", "")]
    keys = ["task", "device", "lane", "estimated", "measured", "ratio", "output", "retries", "status"]
    if any(t.energy is not None for t in run.tasks.values()):
        columns.insert(6, ("energy (J)", "number", ""))
        keys.insert(6, "energy")
    queued = run.queued  # a shared cluster's queue held tasks back: say how long, and what it stopped
    if queued:
        columns[-1:-1] = [("waited", "number", ""), ("preempted", "number", "")]
        keys[-1:-1] = ["waited", "preempted"]
    head = "".join(f'<th data-key="{k}" data-type="{t}" class="{c}">{esc(label)}</th>'
                   for k, (label, t, c) in zip(keys, columns))
    body = []
    for name in names:
        record = run.tasks.get(name)
        node = graph.node(name) if graph is not None and name in graph else None
        devices = node_devices(node) if node is not None else ()
        est = node_duration(node, cost_model, cluster) if node is not None else None
        measured = record.duration if record is not None else None
        ratio = measured / est if measured is not None and est else None
        out = record.bytes if record is not None else None
        retries = max(0, record.attempts - 1) if record is not None else 0
        status = record.status if record is not None else "not run"
        device_cell = ("" if not devices else
                       f'<span class="swatch" style="background:{device_colour(devices[0])}"></span>'
                       + esc(", ".join(map(str, devices))))
        cells = [
            (name, f'<td class="name" data-value="{esc(name)}">{esc(name)}</td>'),
            (None, f'<td data-value="{devices[0] if devices else ""}">{device_cell}</td>'),
            (None, f'<td data-value="{esc(record.lane if record else "")}">{esc(record.lane if record else "")}</td>'),
            (None, f'<td data-value="{_num(est)}">{esc(_seconds(est))}</td>'),
            (None, f'<td data-value="{_num(measured)}">{esc(_seconds(measured))}</td>'),
            (None, f'<td data-value="{_num(ratio)}">{"" if ratio is None else f"{ratio:.2f}"}</td>'),
            (None, f'<td data-value="{"" if out is None else out}">{"" if out is None else _size(out)}</td>'),
            (None, f'<td data-value="{retries}">{retries}</td>'),
            (None, f'<td data-value="{esc(status)}" class="{"failed" if status == "failed" else ""}">'
                   f"{esc(status)}</td>"),
        ]
        if "energy" in keys:
            joules = record.energy if record is not None else None
            cells.insert(6, (None, f'<td data-value="{_num(joules)}">{"" if joules is None else f"{joules:,.1f}"}</td>'))
        if queued:
            waited = record.waited if record is not None else 0.0
            stopped = len(record.preemptions) if record is not None else 0
            cells[-1:-1] = [(None, f'<td data-value="{waited:.6g}">{esc(_seconds(waited))}</td>'),
                            (None, f'<td data-value="{stopped}">{stopped}</td>')]
        body.append(f'<tr data-task="{esc(name)}">' + "".join(c for _, c in cells) + "</tr>")
    return (f'<table class="tasks" id="tasks" data-initial-sort="measured"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def write_report(run_dir: str | Path, out: str | Path | None = None, *, graph: Graph | None = None,
                 cluster: Any = None, cost_model: Any = None, run: str | None = None) -> Path:
    """Write the report of `run_dir` (default file: RUN_DIR/report.html); returns its path."""
    record = load_run(run_dir, run)
    if graph is None:
        graph = find_run_graph(record.run_dir)
    path = Path(out) if out is not None else record.run_dir / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report(record, graph, cluster, cost_model), encoding="utf-8")
    return path
