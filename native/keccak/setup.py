"""The extension module `unchained_keccak` (unchained_keccak.c): pyproject.toml cannot declare it.

A distribution of its own so that only a provider (the `provider` extra of `unchained`)
compiles C: without a C compiler and the Python headers this install fails, so the prover
never hashes slowly without saying so.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("unchained_keccak", ["unchained_keccak.c"], extra_compile_args=["-O3"])])
