"""Build steps pyproject.toml cannot declare: the native keccak.

- provider_agent._keccak (provider_agent/_keccak.c) is compiled by every install, editable
  ones included; without a C compiler and the Python headers the install fails, so the prover
  never hashes slowly without saying so.
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    ext_modules=[Extension("provider_agent._keccak", ["provider_agent/_keccak.c"],
                           extra_compile_args=["-O3"])],
)
