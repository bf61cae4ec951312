"""dagc's benchmarks. Each module has `run(quick: bool) -> str`, returning a markdown section;
`python -m benchmarks [--quick]` runs them all, side by side, and regenerates docs/benchmarks.md."""
