"""Kept for one release: the old home of `Placement`, `Appender` and `chain_lock`, now in
engine.storage.placement, engine.storage.appender and engine.storage.chain_lock."""

from engine.storage.appender import MAX_ROLL_RETRIES, Appender
from engine.storage.chain_lock import CHAIN_LOCK_FILE, CHAIN_LOCK_TIMEOUT_S, chain_lock
from engine.storage.placement import HEAT_REFRESH_S, Placement
from engine.storage.volume import BatchWrite

__all__ = [
    "CHAIN_LOCK_FILE",
    "CHAIN_LOCK_TIMEOUT_S",
    "HEAT_REFRESH_S",
    "MAX_ROLL_RETRIES",
    "Appender",
    "BatchWrite",
    "Placement",
    "chain_lock",
]
