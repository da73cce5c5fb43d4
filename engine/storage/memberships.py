"""Kept for one release: the group tables moved to engine.storage.groups (`GroupStore`)."""

from engine.storage.groups import WIRE_PREFIX, GroupStore, TopicPart

Memberships = GroupStore

__all__ = ["WIRE_PREFIX", "GroupStore", "Memberships", "TopicPart"]
