"""Kept for one release: the console's Textual events are `console.events` now."""

from console.events import *  # noqa: F403
