"""Provider agent: GPU detection, Proof-of-GPU prover, job runner, mining supervisor, Celery worker."""

import os

# torch's OpenMP workers spin after every parallel region by default; PoG hashes on a Python
# thread between and during matmuls, and spinning workers starve it (measured: a 64x64 round
# took 20 ms instead of 0.4 ms, and overlapped hashing slowed the matmul it overlapped).
# libgomp reads this once, when torch is first imported, so it is set before any import of it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class ProviderAgentError(Exception):
    """Root of every error raised by `provider_agent`."""


__all__ = ["ProviderAgentError"]
