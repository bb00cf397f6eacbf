"""When a renter can count on a provider: one rule, in one set of sentences, for every party that
says so (`unchained provider list` from the chain, the backend's /providers and its matcher from
its index). Pure: callers gather the facts, this judges them.

A provider is available when it is active on-chain (registered, not deactivated, bonded stake at
least the registry's minimum), its last Proof of GPU round passed and it was not slashed since
(a lost PoG challenge or job dispute slashes it without touching its PoG status: it is trusted
again once a new round passes), and its agent is not silent (a crashed provider is not).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal


@dataclass(frozen=True)
class ProviderFacts:
    """What is known of one provider; amounts in wei."""

    registered: bool
    deactivated: bool
    stake: int  # bonded
    minimum: int | None  # the registry's minimum stake (None: not known, not judged)
    slashed: int  # wei its stake lost to slashes, all told
    pog_round_id: int | None
    pog_passed: bool | None  # None: never ran a round
    # The blocks of its last PoG record and of its latest slash (block numbers: two blocks can share
    # a second); a slash in the record's own block counts as after it.
    pog_at: int | None
    slashed_at: int | None
    silent_since: int | None = None  # the agent's last heartbeat (unix s) once it is silent past the bound


def below_minimum(f: ProviderFacts) -> bool:
    return f.minimum is not None and f.stake < f.minimum


def active(f: ProviderFacts) -> bool:
    """What ProviderRegistry.isActive says: registered, not deactivated, enough stake."""
    return f.registered and not f.deactivated and not below_minimum(f)


def slashed_since_pog(f: ProviderFacts) -> bool:
    """Slashed at or after its last passed Proof of GPU: not trusted before a new round passes."""
    return bool(f.pog_passed) and f.pog_at is not None and f.slashed_at is not None and f.slashed_at >= f.pog_at


def why_not(f: ProviderFacts) -> list[str]:
    """Why a renter cannot count on the provider now, in words (empty: it is available)."""
    if not f.registered:
        return ["not registered on-chain"]
    why = []
    if f.deactivated:
        why.append("deactivated by its owner")
    if below_minimum(f):
        cause = f"slashed {_eth(f.slashed)}: " if f.slashed else ""
        why.append(f"{cause}stake {_eth(f.stake)} below the minimum {_eth(f.minimum or 0)}")
    if f.pog_passed is None:
        why.append("never passed a Proof of GPU round")
    elif not f.pog_passed:
        why.append(f"failed its last Proof of GPU (round {f.pog_round_id})")
    elif slashed_since_pog(f) and not below_minimum(f):  # below the minimum, the stake's sentence says it
        why.append(f"slashed after its last passed Proof of GPU (round {f.pog_round_id}): "
                   "not trusted again before it passes a new one")
    if f.silent_since is not None and active(f):  # inactive, the chain's reason above says more
        when = datetime.fromtimestamp(f.silent_since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        why.append(f"its agent has not sent a heartbeat since {when} (crashed or stopped)")
    return why


def _eth(wei: int) -> str:
    """As client.units.eth writes it (exact ether), which protocol/ may not import."""
    value = Decimal(wei) / 10**18
    return f"{format(value.normalize(), 'f') if value else '0'} ETH"


__all__ = ["ProviderFacts", "active", "below_minimum", "slashed_since_pog", "why_not"]
