"""The commands of the `dagc` command line, grouped by job; `dagc.cli` builds the parser and dispatches.

- `common`: exit statuses and what every command shares (compiling the input, printing diagnostics);
- `compiling`: `check`, `compile`, `ir`, `emit`;
- `views`: `viz`, `timeline`, `report` (pictures and pages of a pipeline or a run);
- `running`: `run`, `runs`, `gc` (programs and their run directories);
- `fixing`: `fix` (the edits a diagnostic's fix makes, applied to the user's files).
"""
