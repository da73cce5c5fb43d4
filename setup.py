"""The one compiled module (engine/storage/_kafka_records.pyx, Cython): everything else is
in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import setup

setup(ext_modules=cythonize(["engine/storage/_kafka_records.pyx"], language_level=3))
