"""The compiled modules, built by Cython (everything else is in pyproject.toml):

- engine/storage/_kafka_records.pyx: Kafka record batches walked in C;
- engine/storage/_columns.pyx: the engine's own batches laid out in C from the producer's
  lists (engine.storage.batch's `encode` runs in Python where it is not built);
- engine/client/accumulator.py: what `Producer.send` does per message, and
  engine/client/partitioner.py: Kafka's murmur2 of a key; Python modules that run as they
  are where they were not built (their C types are in the .pxd beside each);
- engine/_arena_cache.pyx: freed pymalloc arenas kept for the next large poll (engine.bulk
  reads as before where it is not built).
"""

from Cython.Build import cythonize
from setuptools import setup

setup(
    ext_modules=cythonize(
        [
            "engine/storage/_kafka_records.pyx",
            "engine/storage/_columns.pyx",
            "engine/client/accumulator.py",
            "engine/client/partitioner.py",
            "engine/_arena_cache.pyx",
        ],
        language_level=3,
    )
)
