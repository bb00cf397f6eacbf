"""One line when a service a long-running party polls goes away, one when it is back: a backend
down for an hour costs its terminal two lines, not one (or a traceback) per poll."""

from __future__ import annotations

import logging


class Reachability:
    def __init__(self, what: str, retry_s: float, logger: logging.Logger) -> None:
        """`what`: the service and where, as a sentence's subject ("backend at http://...")."""
        self.what = what
        self.retry_s = retry_s
        self.logger = logger
        self.away = False

    def lost(self) -> None:
        if not self.away:
            self.away = True
            self.logger.warning("%s unreachable; retrying every %g s", self.what, self.retry_s)

    def answered(self) -> None:
        if self.away:
            self.away = False
            self.logger.warning("%s reachable again", self.what)


__all__ = ["Reachability"]
