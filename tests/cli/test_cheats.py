"""The planted cheats (devtools.cheats): the format of UNCHAINED_CHEAT, the PoG cheat played
by the real PogService and judged by the real checker, the job cheat, the plant at start-up of a
process with the cheater's site on its path, and the provider's real Celery worker cheating in
its second round and slashed for it by an on-chain fraud proof."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest

import client.sandbox
import protocol.inference
import provider_agent.pog_service as pog_service
from protocol.enums import ChallengeKind, ChallengeStatus, RoundStatus
from protocol.errors import WrongElement
from protocol.merkle import keccak256, leaf_hash, verify_inclusion
from protocol.pog import check_chunk, decode_answers, gpu_seed, leaf_count, pog_round_seed, pog_secret_hash
from protocol.tasks import provider_queue
from provider_agent.agent import Agent
from provider_agent.gpus import Device
from tests.support.broker import signed_sender
from tests.support.provider_market import ETH, keystore, market, password_file, settings_for  # noqa: F401
from tests.support.worker import Worker
from devtools import cheats
from devtools.cheats import CheatPlan, CheatSpecError, PogCheat, SkippingProver, parse
from verifier.chain import VerifierChain
from verifier.links import CeleryProverLink
from verifier.pog_checker import PogChecker
from verifier.pog_onchain import ChallengeState, OnchainPog

N, K = 128, 32
PROVIDER = "0x" + "ab" * 20
CHEATER_SITE = Path(cheats.__file__).parent / "cheater_site"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, plan", [
    ("pog-from-round=2,job-every=5", CheatPlan(2, 5)),
    ("job-every=5", CheatPlan(None, 5)),
    (" pog-from-round = 1 ", CheatPlan(1, None)),
])
def test_parse_reads_the_named_cheats(text, plan):
    assert parse(text) == plan


@pytest.mark.parametrize("text, said", [
    ("pog-from-round", "is not name=value"),
    ("pog-from-round=2,", "is not name=value"),
    ("skip-everything=1", "unknown cheat 'skip-everything'"),
    ("job-every=5,job-every=3", "given twice"),
    ("job-every=0", "positive integer"),
    ("job-every=-1", "positive integer"),
    ("job-every=five", "positive integer"),
    ("pog-from-round=1.5", "positive integer"),
])
def test_parse_refuses_anything_else_and_says_why(text, said):
    with pytest.raises(CheatSpecError, match=said):
        parse(text)


def test_install_from_env_without_the_variable_plants_nothing():
    assert cheats.install_from_env({}) is None
    assert cheats.install_from_env({cheats.CHEAT_ENV: " "}) is None


class FakeRound(NamedTuple):
    """The IProofOfGpu.Round fields the provider's PoG service reads, by their Solidity names."""

    provider: str
    requestBlock: int
    n: int
    gpuCount: int
    status: int
    seed: bytes
    secretHash: bytes


class FakeChain:
    """What PogService reads from and sends to the chain, in memory: rounds requested for us,
    one challenge, and the response it gets."""

    address = PROVIDER

    def __init__(self) -> None:
        self.rounds: dict[int, FakeRound] = {}
        self.responses: dict[int, tuple[list[bytes], list[list[bytes]]]] = {}
        self.indices: list[int] = []

    def request_round(self, round_id: int) -> tuple[bytes, bytes]:
        """A round requested for us with a committed secret: (its seed, the secret)."""
        secret = keccak256(f"round-secret-{round_id}".encode())
        self.rounds[round_id] = FakeRound(provider=PROVIDER, requestBlock=round_id, n=N, gpuCount=1,
                                          status=RoundStatus.REQUESTED, seed=bytes(32),
                                          secretHash=pog_secret_hash(secret))
        return pog_round_seed(self.block_hash(round_id), secret, round_id, bytes.fromhex(PROVIDER[2:])), secret

    def block_hash(self, number: int) -> bytes:
        return keccak256(f"block-{number}".encode())

    def pog_round(self, round_id: int) -> FakeRound:
        return self.rounds[round_id]

    def challenge(self, challenge_id: int) -> SimpleNamespace:
        return SimpleNamespace(kind=ChallengeKind.POG, subject=challenge_id, gpuIndex=0)  # challenge i: round i

    def challenge_indices(self, challenge_id: int) -> list[int]:
        return self.indices

    def respond(self, challenge_id: int, leaves: list[bytes], proofs: list[list[bytes]]) -> dict[str, bytes]:
        self.responses[challenge_id] = (leaves, proofs)
        return {"transactionHash": b"\1" * 32}  # a receipt is read by key, as web3 types it


@pytest.fixture
def restore_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test plants is taken out again after it."""
    monkeypatch.setattr(pog_service, "PogProver", pog_service.PogProver)
    monkeypatch.setattr(protocol.inference, "run_batches", protocol.inference.run_batches)
    # Imported before any plant, so a plant patches it now (and is undone) rather than waiting
    # for a later import: a leftover cheat would make every later test's model child cheat.
    monkeypatch.setattr(client.sandbox, "child_environment", client.sandbox.child_environment)
    monkeypatch.setattr(client.sandbox, "SANDBOX_PACKAGES", client.sandbox.SANDBOX_PACKAGES)


def play_round(service: pog_service.PogService, chain: FakeChain, device: Device, round_id: int):
    """The verifier's side of one round (the real checker) against the agent's PogService."""
    seed, round_secret = chain.request_round(round_id)
    checker = PogChecker(k=K, dtype="fp32", answer_window_s=60)
    checker.open_round(seed, [PogChecker.claim(device.uuid_hash, device.name, n=N)])
    checker.receive_commitment(service.compute(round_id, "0x" + round_secret.hex()).encode())
    chain.rounds[round_id] = chain.rounds[round_id]._replace(seed=seed)  # the verifier's fixSeed mined
    secret = keccak256(f"secret-{round_id}".encode())
    checker.reveal(secret)
    raw = service.answer(round_id, "0x" + secret.hex(), K).encode()
    return checker.judge(raw), decode_answers(raw, 1, K).gpus[0].answers


def test_pog_cheat_is_honest_first_then_answers_off_and_on_chain_from_one_fake(restore_targets):
    assert cheats.install_from_env({cheats.CHEAT_ENV: "pog-from-round=2"}) == CheatPlan(2, None)
    assert isinstance(pog_service.PogProver, PogCheat)
    chain, device = FakeChain(), Device("cpu", "cpu test", "CPU-cheater", 0)
    service = pog_service.PogService(chain, [device])  # the agent's own service, as get_agent builds it

    first, _ = play_round(service, chain, device, 1)
    assert first.passed

    second, offchain = play_round(service, chain, device, 2)
    assert not second.passed and isinstance(second.gpus[0].error, WrongElement)

    # The verifier escalates on-chain; the agent's answer to challenge 2 comes from the same fake.
    chain.indices = [a.index for a in offchain[:8]]
    service.answer_challenge(2)
    leaves, proofs = chain.responses[2]
    assert leaves == [a.data for a in offchain[:8]]
    seed, root = chain.rounds[2].seed, service._provers[2].work[0].tree.root
    for index, data, siblings in zip(chain.indices, leaves, proofs):
        verify_inclusion(leaf_hash(data), index, leaf_count(N), siblings, root)  # a valid proof...
        with pytest.raises(WrongElement):  # ...of a wrong element: what proveFraud slashes
            check_chunk(gpu_seed(seed, 0, device.uuid_hash), N, root, index, data, siblings)


def test_skipping_prover_fakes_are_fixed_by_the_seed():
    """A restarted cheater answers from the fake it committed before."""
    uuid_hash = keccak256(b"GPU-skipper")
    one, two = SkippingProver(uuid_hash), SkippingProver(uuid_hash)
    assert one.commit_round(keccak256(b"a"), N) == two.commit_round(keccak256(b"a"), N)
    assert one.work[0].answer([3, 70]) == two.work[0].answer([3, 70])
    assert one.commit_round(keccak256(b"b"), N).gpus[0].root != two.work[0].tree.root


def identity(batch: np.ndarray) -> np.ndarray:
    return batch


def run_like_the_model_child(items: list[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """client.sandbox_child's loop: chunks of batch_size items, each with its first index."""
    outputs = []
    for start in range(0, len(items), batch_size):
        outputs += protocol.inference.run_batches(identity, items[start:start + batch_size], batch_size,
                                                  first_index=start)
    return outputs


def test_job_cheat_corrupts_exactly_every_fifth_item(restore_targets):
    items = [np.full(3, i, dtype=np.float32) for i in range(23)]
    cheats.install_from_env({cheats.CHEAT_ENV: "job-every=5"})
    cheats.install_from_env({cheats.CHEAT_ENV: "job-every=5"})  # planted twice: still +1, not +2
    outputs = run_like_the_model_child(items, batch_size=4)
    wrong = [i for i, (got, item) in enumerate(zip(outputs, items)) if not np.array_equal(got, item)]
    assert wrong == [0, 5, 10, 15, 20]
    assert all(np.array_equal(outputs[i], items[i] + 1) and outputs[i].dtype == np.float32 for i in wrong)


def cheater_env(cheat: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{CHEATER_SITE}{os.pathsep}{REPO}", cheats.CHEAT_ENV: cheat}


def cheater_process(cheat: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=cheater_env(cheat), capture_output=True, text=True,
                          timeout=60)


def test_a_process_with_the_cheater_site_plays_the_cheat_from_start_up():
    code = ("import sys, numpy as np; assert 'protocol.inference' not in sys.modules\n"
            "from protocol.inference import run_batches\n"
            "print([int(o[0]) for o in run_batches(lambda b: b, [np.zeros(1)] * 7, 7)])")
    done = cheater_process("job-every=3", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 0, 0, 1, 0, 0, 1]"


def test_a_process_with_a_bad_cheat_refuses_to_start():
    done = cheater_process("job-every=zero", "print('ran honestly')")
    assert done.returncode != 0 and "ran honestly" not in done.stdout
    assert "UNCHAINED_CHEAT: job-every='zero': the value must be a positive integer" in done.stderr


def test_real_worker_passes_round_one_cheats_in_round_two_and_is_slashed_by_a_fraud_proof(
        settings_for, market, redis_url, tmp_path):  # noqa: F811  (fixtures)
    settings = settings_for(broker_url=redis_url, gpu_model="CPU")
    Agent.build(settings).register()
    s = market.session
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    verifier = VerifierChain.connect(market.chain.rpc_url, s.deployment, unlocked_sender=market.verifier)
    client = signed_sender(redis_url, market, 4)  # the verifier's key: it requests the rounds
    queue, log = provider_queue(market.provider), tmp_path / "worker.log"
    worker = Worker(settings, queue, log, cheat="pog-from-round=2")
    try:
        link = CeleryProverLink(client, market.provider, commit_timeout_s=120, answer_timeout_s=60)
        assert OnchainPog(verifier, link, dtype="fp32", n=N).run_round(market.provider).passed, log.read_text()

        pog = OnchainPog(verifier, link, dtype="fp32", n=N)
        stake = s.contract("Staking").functions.stakeOf(market.provider).call()
        second = pog.run_round(market.provider)
        assert not second.passed and isinstance(second.verdict.gpus[0].error, WrongElement)
        [challenge_id] = second.challenge_ids
        # The wrong element it revealed off-chain is proven on-chain at once, whatever the draw.
        status = s.contract("ChallengeManager").functions.challenge(challenge_id).call().status
        assert status == ChallengeStatus.PROVIDER_FAULTED
        assert pog.follow_up(challenge_id) is ChallengeState.CLOSED
    finally:
        worker.stop()
    assert s.contract("Staking").functions.stakeOf(market.provider).call() < stake
    assert "PoG round 2 of this process commits random values" in log.read_text()


def test_the_cheating_agent_hands_its_job_cheat_to_its_model_child(restore_targets, monkeypatch, tmp_path):
    """Model children get an allowlisted environment, so the cheater's agent passes its site and
    plan on itself: the real runner's child corrupts exactly the planned items."""
    import torch

    import client.sandbox
    from protocol.jobs import decode_output, encode_output
    from provider_agent.runner import Limits, run_inference

    monkeypatch.setattr(client.sandbox, "child_environment", client.sandbox.child_environment)
    monkeypatch.setattr(client.sandbox, "SANDBOX_PACKAGES", client.sandbox.SANDBOX_PACKAGES)
    cheats.install(CheatPlan(None, 3))
    env = client.sandbox.child_environment(1, tmp_path)
    assert env[cheats.CHEAT_ENV] == "job-every=3" and env["PYTHONPATH"].startswith(str(CHEATER_SITE))
    model = tmp_path / "identity.pt"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(model))
    items = [np.full(4, i, dtype=np.float32) for i in range(7)]
    inputs = []
    for i, item in enumerate(items):
        inputs.append(tmp_path / f"{i}.in")
        inputs[-1].write_bytes(encode_output(item))
    # The planted environment differs from an honest one, so no honest warm template is reused.
    run = run_inference(1, model, "torchscript", inputs, 4, Limits(3 << 30, 60.0))
    outputs = [decode_output(o) for o in run.outputs]
    assert [i for i, (o, item) in enumerate(zip(outputs, items)) if not np.array_equal(o, item)] == [0, 3, 6]
