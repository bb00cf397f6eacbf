"""Verifier: Proof-of-GPU checking (and, from other modules, challenges and re-execution)."""


class VerifierError(Exception):
    """Root of every error raised by `verifier`."""


__all__ = ["VerifierError"]
