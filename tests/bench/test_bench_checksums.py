"""`python -m bench.checksums N`: the checksums' share of produce and consume CPU time."""

from __future__ import annotations

from bench import checksums
from engine.storage import batch


def test_the_checksum_code_is_timed_inside_produce_and_consume():
    real = (batch.payload_crc, batch.checksum, batch.intact)
    share = checksums.run(100, 2_000)
    assert share.messages == 2_000
    assert 0 < share.produce_checksum_s < share.produce_s
    assert 0 < share.consume_checksum_s < share.consume_s
    assert "checksums" in share.text()
    assert (batch.payload_crc, batch.checksum, batch.intact) == real  # put back
