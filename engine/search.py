"""Kept for one release: topic-name search is `engine.name_search` now."""

from engine.name_search import *  # noqa: F403
