"""Thin helpers that emitted programs import: task context, run store, event log, progress."""
