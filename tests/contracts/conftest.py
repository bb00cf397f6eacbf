"""Shared fixtures for the contract tests: accounts by role, the deployed Unchained set with its
roles granted, a helper that names the custom error a call must revert with, and `mine_blocks`.

Contracts are deployed once per module; `fn_isolation` snapshots the chain around every test.
Roles are granted once per contract (`wire`), so one module fixture deploys and wires the whole
set, naming the accounts that stand in for contracts (slasher, disputer, pog) beside the real
contracts.
"""

import gc
import inspect
import os
import threading
from collections.abc import Callable

import brownie
import pytest
from brownie.network.account import Account
from brownie.network.transaction import Status, TransactionReceipt
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import stateful
from hypothesis.strategies import SearchStrategy
from web3.exceptions import TransactionNotFound

WEEK = 7 * 24 * 3600
DAY = 24 * 3600
ETHER = 10**18
# Caps every invariant machine's examples when set: scripts/test.sh runs the full search on anvil
# and a few examples on Hardhat's node, whose pass is there to check a second EVM, not to search.
INVARIANT_EXAMPLES_ENV = "UNCHAINED_INVARIANT_EXAMPLES"

UNBONDING_DELAY = WEEK
SLASH_REWARD_BPS = 5_000
MIN_PROVIDER_STAKE = ETHER
CHALLENGE_WINDOW = DAY
PROTOCOL_FEE_BPS = 250
# JobEscrow requires UNBONDING_DELAY >= MAX_JOB_DURATION + CHALLENGE_WINDOW (a signed result's slash window).
MAX_JOB_DURATION = 6 * DAY
CANCEL_GRACE = 10 * 60
PRICE_PER_GPU_HOUR = 36 * 10**14  # 0.0036 ether an hour: 10**12 wei a second per GPU
PRICE_PER_JOB_UNIT = 10**12


@pytest.fixture(autouse=True)
def isolation(fn_isolation):
    """Every test starts from the state the module fixtures left.

    Brownie's revert after each test runs a full `gc.collect()` (to drop its dead weak references),
    which walked every object of the session: about 0.1 s a test, half of a module's time. Objects
    alive now stay alive through the test, so they are frozen out of the collector's walk; what the
    test creates is still collected.
    """
    gc.freeze()


class _HeldEvent:
    """A receipt's `_confirmed` event while its confirmation thread runs: brownie's `set()` there
    is held back, so that the sending thread wakes only when `_confirm_then_wake` is done."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def set(self) -> None:
        pass

    def is_set(self) -> bool:
        return self.event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.event.wait(timeout)


def _mined(txid: str) -> bool:
    try:
        return brownie.web3.eth.get_transaction_receipt(txid) is not None
    except TransactionNotFound:
        return False


def _confirm_then_wake(confirm: Callable) -> Callable:
    """Brownie confirms every transaction in a thread of its own, which wakes the sending thread
    as soon as it has a verdict. Two races of that thread failed CI runs with "Tx dropped without
    known replacement": after saying "confirmed" it still marks every *other* transaction in
    brownie's history with the same sender and nonce as dropped, and a revert (between tests,
    between a state machine's examples) hands those nonces out again, so a thread running late
    marked the next test's transaction; and a thread that read the sender's nonce past its
    transaction before the node served the receipt called a mined transaction dropped. Here the
    sender wakes only when the thread is done, and a transaction called dropped while the chain
    holds its receipt is confirmed again."""

    def confirmed_then_woken(receipt: TransactionReceipt, *args, **kwargs):
        confirmed = receipt._confirmed
        receipt._confirmed = _HeldEvent(confirmed)
        try:
            result = confirm(receipt, *args, **kwargs)
            if receipt.status == Status.Dropped and _mined(receipt.txid):
                receipt.status = Status.Pending
                result = confirm(receipt, *args, **kwargs)
            return result
        finally:
            receipt._confirmed = confirmed
            confirmed.set()

    return confirmed_then_woken


@pytest.fixture(scope="session", autouse=True)
def _tracked_confirmations():
    original = TransactionReceipt._await_confirmation
    TransactionReceipt._await_confirmation = _confirm_then_wake(original)
    yield
    TransactionReceipt._await_confirmation = original


@pytest.fixture(scope="module")
def admin(accounts) -> Account:
    return accounts[0]


@pytest.fixture(scope="module")
def treasury(accounts) -> Account:
    return accounts[1]


@pytest.fixture(scope="module")
def provider(accounts) -> Account:
    return accounts[2]


@pytest.fixture(scope="module")
def provider2(accounts) -> Account:
    return accounts[3]


@pytest.fixture(scope="module")
def renter(accounts) -> Account:
    return accounts[4]


@pytest.fixture(scope="module")
def verifier(accounts) -> Account:
    return accounts[5]


@pytest.fixture(scope="module")
def slasher(accounts) -> Account:
    """Stands in for the challenge/dispute contracts that hold SLASHER_ROLE."""
    return accounts[6]


@pytest.fixture(scope="module")
def disputer(accounts) -> Account:
    """Stands in for the dispute contract that holds DISPUTE_ROLE on JobEscrow."""
    return accounts[7]


@pytest.fixture(scope="module")
def pog(accounts) -> Account:
    """Stands in for the Proof-of-GPU contract that holds POG_ROLE on the registry."""
    return accounts[8]


@pytest.fixture(scope="module")
def stranger(accounts) -> Account:
    return accounts[9]


@pytest.fixture(scope="module")
def locker(accounts, admin) -> Account:
    """Stands in for the contracts that hold LOCKER_ROLE on Staking (JobEscrow, LeaseManager)."""
    account = accounts.add()
    admin.transfer(account, ETHER)
    return account


def job_of(escrow, job_id: int) -> tuple:
    """The Job JobEscrow's calls take (with its result once committed), rebuilt from the escrow's
    events and checked against its slot as every client does (client.escrow_jobs.read_job)."""
    # Imported here: brownie hashes the modules conftest imports at load and cannot read these.
    from client import contracts
    from client.escrow_jobs import read_job

    return read_job(contracts.bind(brownie.web3, escrow.address, escrow.abi), job_id).as_tuple()


def job_view(escrow, job_id: int) -> dict:
    """What a client knows of a job: its Job (job_of) by Solidity field names beside its slot's
    status, frozen flag and window end (committedAt derived as the escrow documents)."""
    from brownie.convert.datatypes import EthAddress  # compiled: brownie's conftest scan cannot read it

    job = dict(zip(_JOB_FIELDS, job_of(escrow, job_id)))
    for name in ("specHash", "outputRoot", "resultDigest"):
        job[name] = "0x" + bytes(job[name]).hex()
    for name in ("renter", "provider", "token"):
        job[name] = EthAddress(job[name])
    state = escrow.jobState(job_id)
    # endsAt is the window end once committed (the hash covers a result), a cancel's time before
    committed = job["itemCount"] != 0
    window_end = state["endsAt"] if committed else 0
    return {**job, "status": state["status"], "frozen": state["frozen"], "challengeWindowEnd": window_end,
            "committedAt": window_end - escrow.challengeWindow() if window_end else 0,
            "cancellableAt": 0 if committed else state["endsAt"]}


def cancel_job(escrow, job_id: int, renter):
    """The renter's honest cancel: requestCancel, the grace passes with no commit, cancel."""
    escrow.requestCancel(job_of(escrow, job_id), {"from": renter})
    brownie.chain.sleep(CANCEL_GRACE)
    return escrow.cancel(job_of(escrow, job_id), {"from": renter})


_JOB_FIELDS = ("id", "renter", "provider", "token", "price", "specHash", "deadline", "outputRoot", "itemCount",
               "resultDigest")


def mine_blocks(count: int) -> None:
    """Mines `count` blocks at once on anvil (anvil_mine) or Hardhat (hardhat_mine), one second
    apart, and brings brownie's clock to the last one. Use it instead of a client's own RPC."""
    if count > 1:
        method = "hardhat_mine" if "hardhat" in brownie.web3.client_version.lower() else "anvil_mine"
        response = brownie.web3.provider.make_request(method, [hex(count - 1)])
        if "error" in response:
            raise RuntimeError(f"{method} failed: {response['error']}")
    if count > 0:
        brownie.chain.mine()  # the last block through brownie, which re-reads the chain's time


@pytest.fixture(scope="module")
def unchained(
    Staking, ProviderRegistry, JobEscrow, LeaseManager, ProofOfGpu, DisputeCommittee, ChallengeManager,
    admin, treasury, slasher, disputer, pog, locker,
) -> dict:
    """The whole contract set, wired as the deploy script wires it, plus the accounts that stand
    in for contracts: `slasher` holds SLASHER_ROLE, `locker` LOCKER_ROLE, `disputer` DISPUTE_ROLE
    and `pog` POG_ROLE beside the contracts that hold them."""
    sender = {"from": admin}
    staking = Staking.deploy(UNBONDING_DELAY, SLASH_REWARD_BPS, treasury, sender)
    registry = ProviderRegistry.deploy(staking, MIN_PROVIDER_STAKE, sender)
    escrow = JobEscrow.deploy(registry, treasury, CHALLENGE_WINDOW, PROTOCOL_FEE_BPS, MAX_JOB_DURATION, CANCEL_GRACE,
                              sender)
    leases = LeaseManager.deploy(registry, sender)
    proof_of_gpu = ProofOfGpu.deploy(
        staking, registry, MIN_VERIFIER_STAKE, POG_COMMIT_WINDOW, ROOT_CHALLENGE_PERIOD, sender
    )
    committee = DisputeCommittee.deploy(staking, MIN_VOTER_STAKE, QUORUM_WEIGHT, VOTE_WINDOW, sender)
    config = (
        staking, proof_of_gpu, escrow, committee, treasury, MIN_BOND, MIN_VERIFIER_STAKE,
        PROVIDER_SLASH, FALSE_CLAIM_SLASH, BOND_FEE_BPS, RESPONSE_WINDOW, FRAUD_WINDOW, ESCALATION_WINDOW,
    )
    challenges = ChallengeManager.deploy(config, sender)
    staking.wire([challenges, escrow, slasher], [escrow, leases, locker], [escrow], sender)
    escrow.wire([challenges, disputer], sender)
    registry.wire([proof_of_gpu, pog], escrow, sender)
    committee.wire([challenges], sender)
    return {
        "staking": staking, "registry": registry, "escrow": escrow, "leases": leases,
        "proof_of_gpu": proof_of_gpu, "dispute_committee": committee, "challenge_manager": challenges,
    }


@pytest.fixture(scope="module")
def staking(unchained):
    return unchained["staking"]


@pytest.fixture(scope="module")
def registry(unchained):
    return unchained["registry"]


@pytest.fixture(scope="module")
def escrow(unchained):
    return unchained["escrow"]


@pytest.fixture(scope="module")
def leases(unchained):
    return unchained["leases"]


@pytest.fixture(scope="module")
def stablecoin(TestStablecoin, admin):
    return TestStablecoin.deploy({"from": admin})


@pytest.fixture(scope="module")
def attacker(ReentrantWithdrawer, stranger):
    return ReentrantWithdrawer.deploy({"from": stranger})


@pytest.fixture(scope="module")
def register_provider(staking, registry) -> Callable[..., None]:
    """Stakes the minimum for `account` and registers it with `gpus` GPUs."""

    def register(account: Account, gpus: int = 4, price_per_gpu_hour: int = PRICE_PER_GPU_HOUR) -> None:
        staking.stake({"from": account, "value": MIN_PROVIDER_STAKE})
        registry.register(
            brownie.convert.to_bytes(b"H100-SXM".hex(), "bytes32"),
            [brownie.web3.keccak(text=f"{account.address}-GPU-{i}") for i in range(gpus)],
            price_per_gpu_hour,
            PRICE_PER_JOB_UNIT,
            "ipfs://provider-metadata",
            {"from": account},
        )

    return register


@pytest.fixture(scope="module")
def active_provider(register_provider, provider) -> Account:
    """`provider`, staked and registered with 4 GPUs."""
    register_provider(provider)
    return provider


@pytest.fixture(scope="session")
def custom_error() -> Callable[..., str]:
    """The revert message brownie 1.22 decodes from a custom error on anvil, for
    `brownie.reverts(custom_error("StakingNothingOwed", account))`: `Name: arg, arg` with
    addresses in lower case, bytes32 as Python bytes and enums as integers."""

    def message(name: str, *args: object) -> str:
        return f"{name}: {', '.join(_abi_str(a) for a in args)}"

    return message


@pytest.fixture(scope="session")
def deploy_revert() -> Callable[..., str]:
    """Why deploying `container` with `args` from `sender` reverts, in `custom_error`'s format
    (`deploy_revert(Staking, 0, 1, treasury, sender=admin) == custom_error(...)`); '' when it
    would not revert. The creation code runs in eth_call, which anvil and Hardhat answer alike
    (brownie 1.22 cannot decode a reverted deployment transaction on Hardhat)."""
    from brownie.exceptions import decode_typed_error

    def run(container, *args: object, sender: Account) -> str:
        data = container.deploy.encode_input(*args)
        try:
            brownie.web3.eth.call({"from": sender.address, "data": data})
        except ValueError as exc:
            return decode_typed_error(_revert_data(exc))
        return ""

    return run


def _revert_data(exc: ValueError) -> str:
    """The revert data of a failed eth_call: anvil sends it as `data`, Hardhat as the `reason`
    of the one entry of a `data` object."""
    payload = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    data = payload.get("data", getattr(exc, "data", None))
    if isinstance(data, dict) and len(data) == 1:
        data = next(iter(data.values())).get("reason")
    if not isinstance(data, str) or not data.startswith("0x"):
        raise exc
    return data


def _abi_str(value: object) -> str:
    if hasattr(value, "address"):  # an account or a contract
        return str(value.address).lower()
    if isinstance(value, str) and value.startswith("0x") and len(value) == 42:
        return value.lower()
    if isinstance(value, (bytes, bytearray)):
        return str(bytes(value))
    return str(value)


@pytest.fixture(scope="session")
def chain_state_machine() -> Callable[..., None]:
    """Runs a brownie-style rules class (`st_*` strategies, `setup`, `rule_*`, `invariant_*`,
    and an `__init__(cls, ...)` run once on the class) as a hypothesis state machine, reverting
    the chain to a snapshot before every example.

    Why not brownie's own `state_machine` fixture: brownie 1.22 ships `brownie/test/stateful.py`
    compiled with mypyc, and its `@final` base class makes every generated machine fail with
    "TypeError: _BrownieStateMachine object expected". This mirrors its documented behaviour,
    and unlike it leaves the test's isolation snapshot in place.
    """

    def run(rules: type, *args: object, settings: dict | None = None) -> None:
        settings = dict(settings or {})
        # Every step talks to the chain, so examples are slow by hypothesis' standards, and a
        # stateful run's step sequences now and then overrun its buffer while it explores (CI saw
        # 20 overruns in 28 tries once): both checks assume pure-Python examples.
        settings.setdefault("suppress_health_check", [HealthCheck.too_slow, HealthCheck.data_too_large])
        cap = os.environ.get(INVARIANT_EXAMPLES_ENV, "").strip()
        if cap:
            settings["max_examples"] = min(int(cap), settings.get("max_examples", 100))
        strategies = {k: v for k, v in inspect.getmembers(rules) if isinstance(v, SearchStrategy)}

        class Machine(rules, stateful.RuleBasedStateMachine):
            def __init__(self) -> None:
                brownie.chain.revert()
                stateful.RuleBasedStateMachine.__init__(self)
                if hasattr(self, "setup"):
                    self.setup()

        for name, fn in inspect.getmembers(rules, inspect.isfunction):
            if name.startswith("rule"):
                params = list(inspect.signature(fn).parameters.values())[1:]
                given = {
                    p.name: strategies[p.default if isinstance(p.default, str) else p.name] for p in params
                }
                setattr(Machine, name, stateful.rule(**given)(fn))
            elif name.startswith("invariant"):
                setattr(Machine, name, stateful.invariant()(fn))

        rules.__init__(Machine, *args)
        # brownie keeps one snapshot; remember fn_isolation's so that its teardown still returns
        # to the state before the test (anvil keeps older snapshots valid).
        outer_snapshot = brownie.chain._snapshot_id
        brownie.chain.snapshot()
        try:
            stateful.run_state_machine_as_test(Machine, settings=hypothesis_settings(**settings))
        finally:
            brownie.chain._snapshot_id = outer_snapshot

    return run


# --- Proof contracts (ProofOfGpu, DisputeCommittee, ChallengeManager), added by "proofs" ---

import proofs_support  # noqa: E402  (Merkle and PoG helpers of the proof tests)

MIN_VERIFIER_STAKE = ETHER
POG_COMMIT_WINDOW = 600
ROOT_CHALLENGE_PERIOD = DAY
MIN_BOND = 10**17
PROVIDER_SLASH = ETHER
FALSE_CLAIM_SLASH = ETHER // 2
BOND_FEE_BPS = 500
RESPONSE_WINDOW = 3600
FRAUD_WINDOW = 3600
ESCALATION_WINDOW = 3600
MIN_VOTER_STAKE = ETHER
QUORUM_WEIGHT = 2 * ETHER
VOTE_WINDOW = DAY
JOB_PRICE = 10**16


@pytest.fixture(scope="module")
def proof_of_gpu(unchained):
    """ProofOfGpu holding POG_ROLE on the registry."""
    return unchained["proof_of_gpu"]


@pytest.fixture(scope="module")
def dispute_committee(unchained):
    return unchained["dispute_committee"]


@pytest.fixture(scope="module")
def challenge_manager(unchained):
    """ChallengeManager wired as the deploy script wires it: SLASHER_ROLE on Staking,
    DISPUTE_ROLE on JobEscrow, OPENER_ROLE on the committee."""
    return unchained["challenge_manager"]


@pytest.fixture(scope="module")
def staked_verifier(staking, verifier) -> Account:
    """`verifier` with the minimum verifier stake bonded."""
    staking.stake({"from": verifier, "value": MIN_VERIFIER_STAKE})
    return verifier


@pytest.fixture(scope="module")
def voters(accounts, staking, admin) -> list[Account]:
    """Three fresh accounts, each with MIN_VOTER_STAKE bonded (committee members)."""
    members = []
    for _ in range(3):
        member = accounts.add()
        admin.transfer(member, 3 * ETHER)
        staking.stake({"from": member, "value": MIN_VOTER_STAKE})
        members.append(member)
    return members


@pytest.fixture(scope="module")
def committed_job(escrow, active_provider, renter):
    """A committed ETH job of 10 items: (jobId, the commitment of its output digests)."""
    keccak = brownie.web3.keccak
    digests = [bytes(keccak(text=f"output-{i}")) for i in range(10)]
    commitment = proofs_support.commit(digests)
    job_id = escrow.createJob(
        active_provider, keccak(text="spec"), JOB_PRICE, brownie.chain.time() + 3600,
        {"from": renter, "value": JOB_PRICE},
    ).events["JobCreated"]["jobId"]
    escrow.commitResult(job_of(escrow, job_id), commitment.root, len(digests), keccak(text="result"), {"from": active_provider})
    return job_id, commitment
