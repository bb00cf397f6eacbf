"""Revert data decoded once, against the custom errors of every contract.

The selectors come from the packaged artifacts (protocol/artifacts: every contract of the
project, libraries and test contracts included) and from any ABI a caller adds (a deployment
file written by another version). A revert of one contract that bubbles up through another
(the escrow calling the staking contract) is named by whichever contract declares it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from eth_abi import decode
from eth_utils import keccak, to_checksum_address
from web3.exceptions import ContractCustomError, ContractLogicError

ARTIFACTS_PACKAGE, ARTIFACTS_FOLDER = "protocol", "artifacts"

# selector -> (error name, argument names, argument types)
ErrorTable = dict[bytes, tuple[str, tuple[str, ...], tuple[str, ...]]]


@dataclass(frozen=True)
class Revert:
    """A decoded revert: `error` None when no known ABI declares its selector."""

    error: str | None
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # `ErrorName(arg, ...)`, or what the node said


def error_table(abis: Iterable[list[dict[str, Any]]]) -> ErrorTable:
    table: ErrorTable = {}
    for abi in abis:
        for item in abi:
            if item.get("type") != "error":
                continue
            inputs = item.get("inputs", [])
            types = tuple(arg["type"] for arg in inputs)
            names = tuple(arg.get("name") or f"arg{i}" for i, arg in enumerate(inputs))
            table[keccak(text=f"{item['name']}({','.join(types)})")[:4]] = (item["name"], names, types)
    return table


@cache
def packaged_errors() -> ErrorTable:
    """The custom errors of every packaged contract artifact (empty when none are packaged)."""
    folder = resources.files(ARTIFACTS_PACKAGE) / ARTIFACTS_FOLDER
    if not folder.is_dir():
        return {}
    abis = [json.loads(entry.read_text()).get("abi", []) for entry in folder.iterdir()
            if entry.name.endswith(".json") and entry.name != "index.json"]
    return error_table(abis)


def _shown(value: Any) -> str:
    return "0x" + value.hex() if isinstance(value, bytes) else str(value)


def decode_revert(data: str | bytes, extra_abis: Iterable[list[dict[str, Any]]] = ()) -> Revert:
    """`data` (0x-hex or bytes, selector first) as the custom error it encodes."""
    raw = bytes.fromhex(data.removeprefix("0x")) if isinstance(data, str) else bytes(data)
    known = {**packaged_errors(), **error_table(extra_abis)}.get(raw[:4])
    if known is None:
        return Revert(None, {}, f"unknown revert 0x{raw.hex()}")
    name, names, types = known
    try:
        values = decode(list(types), raw[4:])
    except Exception:  # malformed arguments (eth_abi raises several types): the name still says what happened
        return Revert(name, {}, f"{name}(<undecodable arguments>)")
    values = tuple(to_checksum_address(v) if t == "address" else v for t, v in zip(types, values, strict=True))
    return Revert(name, dict(zip(names, values, strict=True)), f"{name}({', '.join(_shown(v) for v in values)})")


def revert_of(exc: ContractLogicError, extra_abis: Iterable[list[dict[str, Any]]] = ()) -> Revert:
    """The revert web3 raised (at an estimate or a call): decoded when it carries a custom error,
    else the node's text (a require string, a panic)."""
    if isinstance(exc, ContractCustomError):
        data = exc.data if isinstance(exc.data, str | bytes) else str(exc.data)
        return decode_revert(data, extra_abis)
    return Revert(None, {}, str(exc.message or exc))


def _eth(wei: Any) -> str:
    from client.units import eth

    return eth(int(wei))


# The custom errors a renter's own commands can hit, as what they mean and what to do: the
# decoded `Name(args)` is for developers (--debug), never the one line a renter reads.
_SENTENCES: dict[str, Callable[[dict[str, Any]], str]] = {
    "ChallengeJobNotChallengeable": lambda a: (
        f"job {a['jobId']} cannot be challenged now: only a committed job inside its challenge window can "
        f"(`unchained job status {a['jobId']}` shows its status and window)"),
    "ChallengeJobAlreadyChallenged": lambda a: (
        f"job {a['jobId']} is already challenged (challenge {a['challengeId']}): wait for its outcome "
        f"(`unchained job status {a['jobId']}`)"),
    "ChallengeNotStakedVerifier": lambda a: (
        f"not your job: only its renter, or a verifier with at least {_eth(a['required'])} staked "
        f"({a['challenger']} has {_eth(a['stake'])}), may challenge it"),
    "ChallengeSelfChallenge": lambda a: "you are this job's provider: a provider cannot challenge its own work",
    "ChallengeBondTooSmall": lambda a: (
        f"the bond {_eth(a['bond'])} is below the minimum {_eth(a['minBond'])}: raise --bond, or leave it out "
        "to pay the minimum"),
    "ChallengeBadK": lambda a: f"--k {a['k']} is out of range: ask for between 1 and 64 items",
    "ChallengeNotChallenger": lambda a: f"challenge {a['challengeId']} is not yours: only its challenger may do that",
    "ChallengeUnknown": lambda a: f"challenge {a['challengeId']} does not exist",
    "ChallengeWrongStatus": lambda a: _challenge_status(a["challengeId"], int(a["status"])),
    "ChallengeWrongKind": lambda a: (
        f"challenge {a['challengeId']} is a Proof-of-GPU challenge: only a job challenge goes to the committee"),
    "ChallengeWindowClosed": lambda a: (
        f"challenge {a['challengeId']}'s window closed at {_utc(a['windowEnd'])}: too late for that"),
    "ChallengeWindowOpen": lambda a: (
        f"challenge {a['challengeId']}'s window is open until {_utc(a['windowEnd'])}: try again after it"),
    "ChallengeDeadlineNotPassed": lambda a: (
        f"challenge {a['challengeId']}'s provider may answer until {_utc(a['deadline'])}: wait for it"),
    "ChallengeDeadlinePassed": lambda a: (
        f"challenge {a['challengeId']}'s answer was due by {_utc(a['deadline'])}: too late"),
    "ChallengeNothingOwed": lambda a: "the challenge manager owes you nothing (`unchained balance` lists what is owed)",
    "StakingZeroAmount": lambda a: "nothing to do with an amount of zero: there is no stake to move",
    "StakingWorkOpen": lambda a: (
        f"{a['account']} still has {a['openWork']} open job(s) or lease(s) holding its stake: the stake can "
        "start unbonding once they are settled"),
    "StakingInsufficientStake": lambda a: (
        f"{a['account']} has {_eth(a['bonded'])} bonded, not the {_eth(a['requested'])} asked for"),
    "StakingNothingUnbonding": lambda a: f"{a['account']} has no stake unbonding (`unchained balance` shows it)",
    "StakingStillUnbonding": lambda a: (
        f"the stake of {a['account']} is still unbonding: withdrawable from {_utc(a['releaseAt'])}"),
    "StakingNothingOwed": lambda a: "the staking contract owes you nothing (`unchained balance` lists what is owed)",
    "JobEscrowUnknownJob": lambda a: f"job {a['jobId']} does not exist (`unchained job list` shows yours)",
    "JobEscrowNotRenter": lambda a: f"not your job: {a['caller']} is not its renter (`unchained job list` shows yours)",
    "JobEscrowFrozen": lambda a: (
        f"job {a['jobId']} is frozen by an open challenge: wait for its outcome (`unchained job status {a['jobId']}`)"),
    "JobEscrowWrongStatus": lambda a: (
        f"job {a['jobId']} is past that step (`unchained job status {a['jobId']}` shows where it is)"),
    "JobEscrowDeadlineNotPassed": lambda a: (
        f"job {a['jobId']} is not refundable before its deadline ({_utc(a['deadline'])})"),
    "JobEscrowWindowOpen": lambda a: (
        f"job {a['jobId']}'s challenge window is open until {_utc(a['challengeWindowEnd'])}: try again after it"),
    "JobEscrowWindowClosed": lambda a: (
        f"job {a['jobId']}'s challenge window closed at {_utc(a['challengeWindowEnd'])}: too late"),
    "JobEscrowCancelTooEarly": lambda a: (
        f"job {a['jobId']} can be cancelled from {_utc(a['cancellableAt'])} on: run the command again then"),
    "JobEscrowNothingOwed": lambda a: "the escrow owes you nothing (`unchained balance` lists what is owed)",
    "JobEscrowProviderInactive": lambda a: (
        f"provider {a['provider']} is not active: pick another (`unchained job submit` without --provider)"),
    "LeaseManagerUnknownLease": lambda a: f"lease {a['leaseId']} does not exist (`unchained lease list` shows yours)",
    "LeaseManagerNotActive": lambda a: (
        f"lease {a['leaseId']} has ended: nothing left to do on it (`unchained lease status {a['leaseId']}`)"),
    "LeaseManagerNotRenter": lambda a: (
        f"not your lease: only its renter may end it before {_utc(a['endsAt'])}"),
    "LeaseManagerNotLeaseRenter": lambda a: f"not your lease: its renter is {a['renter']}",
    "LeaseManagerAccessNotOffered": lambda a: (
        f"lease {a['leaseId']} has not been offered yet: wait for the provider (`unchained lease status {a['leaseId']}`)"),
    "LeaseManagerAlreadyConfirmed": lambda a: f"lease {a['leaseId']}'s delivery is confirmed already",
    "LeaseManagerProviderInactive": lambda a: f"provider {a['provider']} is not active: pick another provider",
    "LeaseManagerNotEnoughGpus": lambda a: (
        f"provider {a['provider']} has {a['available']} GPU(s) free, not {a['requested']}: ask for fewer with --gpus"),
    "LeaseManagerDurationTooLong": lambda a: (
        f"a lease lasts at most {int(a['maxDuration']) / 3600:g} hours: lower --hours"),
    "LeaseManagerNothingOwed": lambda a: "the lease manager owes you nothing",
}


def _challenge_status(challenge_id: int, status: int) -> str:
    """Why a challenge in `status` cannot take the step asked (escalate, settle, answer)."""
    from protocol.enums import ChallengeStatus

    try:
        name = ChallengeStatus(status)
    except ValueError:
        return f"challenge {challenge_id} is not in a state for that (status {status})"
    if name is ChallengeStatus.OPEN:
        return (f"challenge {challenge_id} is not answered yet: the provider has until its response deadline; "
                "if it never answers it is slashed (claim the timeout), else escalate after its answer")
    if name is ChallengeStatus.ESCALATED:
        return f"challenge {challenge_id} is escalated already: the committee's vote decides it"
    if name is ChallengeStatus.ANSWERED:
        return f"challenge {challenge_id} is answered: its escalation window is running"
    return f"challenge {challenge_id} is closed ({name.name.lower().replace('_', ' ')}): nothing left to do on it"


def _utc(unix_time: Any) -> str:
    from client.units import iso

    return iso(int(unix_time))


def sentence(revert: Revert) -> str | None:
    """What a renter's revert means and what to do, in one line; None for an error without one."""
    if revert.error is None or revert.error not in _SENTENCES:
        return None
    try:
        return _SENTENCES[revert.error](revert.args)
    except (KeyError, ValueError, TypeError):  # an ABI of another version with other arguments
        return None


__all__ = ["Revert", "decode_revert", "error_table", "packaged_errors", "revert_of", "sentence"]
