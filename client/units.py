"""How amounts and times are shown to people, the same way by every command (pure: no I/O).

Amounts are wei on the chain and on the wire; people read ether, exactly (no float rounding:
the last wei is shown when there is one). Times are unix seconds on the chain; people read an
ISO 8601 date with its zone and how far away it is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
WEI_PER_ETH = 10**18


def eth(wei: int | str | None, *, places: int | None = None) -> str:
    """`1.5 ETH` for 1.5e18 wei; exact unless `places` asks for rounding; '-' for None."""
    if wei is None:
        return "-"
    value = Decimal(int(wei)) / WEI_PER_ETH
    if places is not None:
        return f"{value:,.{places}f} ETH"
    text = format(value.normalize(), "f") if value else "0"
    return f"{text} ETH"


def amount(wei: int | str | None, *, in_wei: bool = False) -> str:
    """ETH by default; wei when the user asked for it (`--wei`)."""
    if wei is None:
        return "-"
    return f"{int(wei)} wei" if in_wei else eth(wei)


def duration(seconds: float) -> str:
    """`2 h 5 min`, `45 s`, `3 d 4 h`: the two largest units."""
    seconds = int(abs(seconds))
    if seconds < 60:
        return f"{seconds} s"
    parts: list[tuple[int, str]] = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count or parts:
            parts.append((count, unit))
    shown = [f"{c} {u}" for c, u in parts[:2] if c]
    return " ".join(shown) or "0 s"


def iso(timestamp: int | float) -> str:
    """ISO 8601 in UTC with its zone, to the second: `2026-11-23T02:11:00+00:00`."""
    return datetime.fromtimestamp(int(timestamp), UTC).isoformat()


def when(timestamp: int | float | None, now: int | float) -> str:
    """`2026-11-23T03:11:00+00:00 (in 1 h)` or `(... 5 min ago)`; '-' for None or 0."""
    if not timestamp:
        return "-"
    delta = int(timestamp) - int(now)
    relative = "now" if delta == 0 else f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"
    return f"{iso(timestamp)} ({relative})"


__all__ = ["WEI_PER_ETH", "amount", "duration", "eth", "iso", "when"]
