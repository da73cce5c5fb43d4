"""Placement: which volume takes a new partitionlet.

A partition is a chain of partitionlets spread over the volume files; each new one (a
topic's first, or a successor when the active one rolls) goes to the coolest volume, so
writes and reads spread over the disks (engine.storage.appender asks, engine.ops.balance
moves what is already placed).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping

from engine.clock import SYSTEM_CLOCK, Clock
from engine.storage.volume import Volume

# How long the volumes' heat figures are trusted before they are read again.
HEAT_REFRESH_S = 1.0


class Placement:
    """Chooses the volume of a new partitionlet among `volumes` (fixed for its life): the
    one with the least recent heat (bytes written and read in the last five minutes).

    Heat is read from the volumes at most once a second of `clock`'s monotonic time;
    between two reads, placements are spread round-robin, coolest first, so a burst of new
    partitions does not pile onto one volume. Any thread may call it (one lock).
    """

    def __init__(self, volumes: Mapping[int, Volume], clock: Clock = SYSTEM_CLOCK) -> None:
        self._volumes = volumes
        self._clock = clock
        self._lock = threading.Lock()
        self._heat: dict[int, int] = {}
        self._placed: dict[int, int] = {}
        self._read_at = 0.0

    def choose(self) -> int:
        return self.choose_many(1)[0]

    def choose_many(self, count: int) -> list[int]:
        """Volumes for `count` new partitionlets, coolest first, spread round-robin."""
        with self._lock:
            now = self._clock.monotonic()
            if now - self._read_at > HEAT_REFRESH_S or not self._heat:
                self._heat = {vid: sum(vol.recent_bytes()) for vid, vol in self._volumes.items()}
                self._placed = dict.fromkeys(self._heat, 0)
                self._read_at = now
            chosen: list[int] = []
            order = sorted(
                self._heat, key=lambda v: (self._placed[v], self._heat[v], random.random())
            )
            while len(chosen) < count:
                # each round gives one to every volume, least placed and coolest first
                for volume_id in order[: count - len(chosen)]:
                    self._placed[volume_id] += 1
                    chosen.append(volume_id)
            return chosen
