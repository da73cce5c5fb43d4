"""The compiled modules, built by Cython (everything else is in pyproject.toml):

- engine/storage/_kafka_records.pyx: Kafka record batches walked in C;
- engine/client/accumulator.py: what `Producer.send` does per message, and
  engine/client/partitioner.py: Kafka's murmur2 of a key; Python modules that run as they
  are where they were not built (their C types are in the .pxd beside each).
"""

from Cython.Build import cythonize
from setuptools import setup

setup(
    ext_modules=cythonize(
        [
            "engine/storage/_kafka_records.pyx",
            "engine/client/accumulator.py",
            "engine/client/partitioner.py",
        ],
        language_level=3,
    )
)
