"""A consumer-group member run as its own process by test_groups.py.

Usage: group_worker.py CLUSTER GROUP TOPIC_OR_PATTERN STOP_FILE [--pattern]
Prints one JSON line per record ({"p": partition, "o": offset, "v": value, "t": topic})
and one {"assigned": [...]} line after every poll that changed the assignment; commits after each
poll that returned records, so a clean hand-over neither loses nor repeats a message.
"""

from __future__ import annotations

import json
import os
import sys

from engine import Cluster, Consumer


class Listener:
    def on_partitions_revoked(self, revoked):
        print(json.dumps({"revoked": sorted([t, p] for t, p in revoked)}), flush=True)

    def on_partitions_assigned(self, assigned):
        print(json.dumps({"added": sorted([t, p] for t, p in assigned)}), flush=True)


def main() -> None:
    path, group, topic, stop_file = sys.argv[1:5]
    pattern = "--pattern" in sys.argv
    with Cluster.open(path) as cluster:
        consumer = Consumer(
            cluster,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=2000,
            heartbeat_interval_ms=200,
        )
        if pattern:
            consumer.subscribe(pattern=topic, listener=Listener())
        else:
            consumer.subscribe([topic], listener=Listener())
        print(json.dumps({"ready": os.getpid()}), flush=True)
        shown = None
        while not os.path.exists(stop_file):
            batch = consumer.poll(timeout_ms=100)
            now = sorted([t, p] for t, p in consumer.assignment())
            if now != shown:  # after revocations too, which add nothing
                print(json.dumps({"assigned": now}), flush=True)
                shown = now
            for tp, records in batch.items():
                for r in records:
                    print(
                        json.dumps(
                            {"t": tp.topic, "p": r.partition, "o": r.offset, "v": r.value.decode()}
                        ),
                        flush=True,
                    )
            if batch:
                consumer.commit()
        consumer.close()


if __name__ == "__main__":
    main()
