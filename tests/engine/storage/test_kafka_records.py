"""The compiled walk of a Kafka batch's records (engine/storage/_kafka_records.pyx): built
by every install, and in step with aiokafka's reader, which it replaces where it is built
(tests/engine/storage/test_kafka_batches.py runs the engine's tests with each)."""

from __future__ import annotations

import random

from engine.storage import batch
from engine.storage import kafka_batch as kb
from tests.kafka_batches import T0, kafka_batch, with_crc


def test_the_compiled_walk_is_built():
    from engine.storage import _kafka_records  # built by `pip install -e .` (setup.py)

    assert _kafka_records.walk is not None


def _random_batch(rng: random.Random, n: int) -> list[tuple]:
    return [
        (
            None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 40)),
            None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 300)),
            T0 + rng.randrange(-5_000, 5_000),
            [
                (
                    rng.choice(["a", "trace-id", "ü", ""]),
                    None if rng.random() < 0.3 else rng.randbytes(5),
                )
                for _ in range(rng.randrange(0, 3))
            ]
            if rng.random() < 0.3
            else [],
        )
        for _ in range(n)
    ]


def _outcome(data: bytes) -> tuple:
    """What the engine makes of a batch: refused (how), or its payload in columns."""
    try:
        payload, summary = batch.from_kafka(data)
    except kb.NotStorable as exc:
        return ("not storable", str(exc))
    except Exception as exc:  # the record reader raises several kinds for a damaged batch
        assert kb.is_corrupt(exc), repr(exc)
        return ("corrupt", str(exc))
    return ("stored", summary, batch.plain(payload))


def test_the_compiled_walk_agrees_with_aiokafkas_reader_on_batches_sound_and_damaged(
    monkeypatch,
):
    """Random batches, then each with bytes flipped and its CRC made right again (so only
    the records' layout is wrong): both walks accept or refuse alike, and lay out what
    they accept byte for byte alike. One difference, on purpose: a record's attributes
    byte, unused, is read as one byte by Kafka and as a varint by aiokafka; the compiled
    walk refuses any but 0, so no reader reads such a record two ways."""
    rng = random.Random(28)
    agreed = refused = attributes = 0
    for _ in range(60):
        good = bytearray(kafka_batch(_random_batch(rng, rng.randrange(1, 40))))
        variants = [bytes(good)]
        for _ in range(5):
            bad = bytearray(good)
            for _ in range(rng.randrange(1, 3)):
                bad[rng.randrange(61, len(bad))] = rng.randrange(256)
            variants.append(with_crc(bad))
        for data in variants:
            compiled = _outcome(data)
            with monkeypatch.context() as m:
                m.setattr(kb, "_compiled", None)
                reference = _outcome(data)
            if compiled[0] == "corrupt" and "attributes" in compiled[1]:
                attributes += 1
                continue
            assert compiled[0] == reference[0], data.hex()
            if compiled[0] == "stored":
                assert compiled[1:] == reference[1:], data.hex()
            agreed += 1
            refused += compiled[0] == "corrupt"
    assert agreed + attributes == 360
    # a flip in a key or value leaves a sound batch; one in a length or a varint does not
    assert 10 <= refused and agreed > 300
