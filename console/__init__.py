"""Partitionlet's terminal console (`plet tui`): a Textual app over the engine.

It talks to `engine` and to `spark_tasks.jobs` (submit, status, cancel) only; see
`console.app.ConsoleApp` and docs/TUI.md.
"""
