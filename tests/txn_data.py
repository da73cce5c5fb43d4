"""Transactions for the consoles' tests (issue 25): one committed, one aborted, one left
open, in partition 0 of a topic."""

from __future__ import annotations

from engine import Producer


def three_transactions(cluster, topic: str) -> dict[str, Producer]:
    """c1 c2 committed (offsets 0 1), x1 aborted (2), COMMIT marker 3, ABORT marker 4, o1
    in a transaction left open (5): the LSO is 5, the log end 6. The producers by
    transactional id ("c", "x", "o"); the caller closes them."""
    producers = {tid: Producer(cluster, transactional_id=tid) for tid in ("c", "x", "o")}
    for producer in producers.values():
        producer.init_transactions()
    c, x, o = producers["c"], producers["x"], producers["o"]
    for producer, values in ((c, [b"c1", b"c2"]), (x, [b"x1"])):
        producer.begin_transaction()
        for v in values:
            producer.send(topic, v, partition=0)
        producer.flush()
    c.commit_transaction()
    x.abort_transaction()
    o.begin_transaction()
    o.send(topic, b"o1", partition=0)
    o.flush()
    return producers
