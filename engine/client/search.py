"""Kept for one release: message search is `engine.client.message_search` now."""

from engine.client.message_search import *  # noqa: F403
