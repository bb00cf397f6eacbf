"""ProofOfGpu rounds on anvil with the real Staking and ProviderRegistry: request with a committed
secret, the verifier's reveal fixing the seed, per-GPU commitments, attestation into the
registry, failure after the commit deadline, and a round voided when the secret never came."""

import brownie
import pytest
from brownie import chain
from protocol.enums import RoundStatus
from conftest import MIN_VERIFIER_STAKE, POG_COMMIT_WINDOW
from eth_utils import keccak

import proofs_support as ref

H100 = brownie.convert.to_bytes(b"H100-SXM".hex(), "bytes32")


@pytest.fixture(scope="module", autouse=True)
def setup(active_provider, staked_verifier):
    """An active provider with 4 GPUs and a staked verifier."""


def _request(proof_of_gpu, provider, verifier, n=64, fix=True):
    """A requested round, its seed fixed by the verifier's reveal unless fix=False."""
    return ref.request_round(proof_of_gpu, provider, verifier, n, fix=fix)


def _secret(proof_of_gpu, round_id):
    return ref.secret_for(round_id)


def test_request_records_round_and_snapshots_gpus(proof_of_gpu, registry, provider, verifier):
    tx = proof_of_gpu.requestRound(provider, 128, keccak(b"secret"), {"from": verifier})
    round_id = tx.events["RoundRequested"]["roundId"]
    r = proof_of_gpu.round(round_id)
    assert (r["provider"], r["verifier"], r["n"], r["gpuCount"]) == (provider, verifier, 128, 4)
    assert bytes(r["secretHash"]) == keccak(b"secret") and bytes(r["seed"]) == bytes(32)
    assert r["requestBlock"] == tx.block_number
    assert r["commitDeadline"] == chain[tx.block_number].timestamp + POG_COMMIT_WINDOW
    assert r["status"] == RoundStatus.REQUESTED
    for g in range(4):
        assert proof_of_gpu.uuidHashOf(round_id, g) == registry.uuidHashOf(provider, g)


def test_request_reverts_for_unstaked_verifier(proof_of_gpu, provider, stranger, custom_error):
    with brownie.reverts(custom_error("ProofOfGpuVerifierNotStaked", stranger, 0, MIN_VERIFIER_STAKE)):
        proof_of_gpu.requestRound(provider, 64, keccak(b"s"), {"from": stranger})


def test_provider_cannot_request_its_own_round(proof_of_gpu, staking, provider, custom_error):
    staking.stake({"from": provider, "value": MIN_VERIFIER_STAKE})
    with brownie.reverts(custom_error("ProofOfGpuSelfRequest", provider)):
        proof_of_gpu.requestRound(provider, 64, keccak(b"s"), {"from": provider})


@pytest.mark.parametrize("n", [0, 32, 65, 96 + 1, 65536 + 64])
def test_request_reverts_for_bad_n(proof_of_gpu, provider, verifier, custom_error, n):
    with brownie.reverts(custom_error("ProofOfGpuBadN", n)):
        proof_of_gpu.requestRound(provider, n, keccak(b"s"), {"from": verifier})


def test_request_reverts_for_inactive_provider(proof_of_gpu, provider2, verifier, custom_error):
    with brownie.reverts(custom_error("ProofOfGpuProviderNotActive", provider2)):
        proof_of_gpu.requestRound(provider2, 64, keccak(b"s"), {"from": verifier})


def test_zero_secret_hash_is_refused(proof_of_gpu, provider, verifier, custom_error):
    with brownie.reverts(custom_error("ProofOfGpuZeroSecretHash")):
        proof_of_gpu.requestRound(provider, 64, bytes(32), {"from": verifier})


def test_seed_mixes_request_block_hash_with_the_revealed_secret(proof_of_gpu, provider, verifier, custom_error):
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    request_block = proof_of_gpu.round(round_id)["requestBlock"]
    secret = _secret(proof_of_gpu, round_id)
    # The very next transaction reveals: no block has to be mined in between.
    tx = proof_of_gpu.fixSeed(round_id, secret, {"from": verifier})
    assert tx.block_number == request_block + 1
    expected = ref.expected_seed(bytes(chain[request_block].hash), secret, round_id, provider.address)
    assert bytes(proof_of_gpu.round(round_id)["seed"]) == expected
    assert bytes(tx.events["RoundSeedFixed"]["seed"]) == expected
    uuid = bytes(proof_of_gpu.uuidHashOf(round_id, 2))
    assert bytes(proof_of_gpu.gpuSeedOf(round_id, 2)) == ref.gpu_seed(expected, 2, uuid)
    with brownie.reverts(custom_error("ProofOfGpuSeedAlreadyFixed", round_id)):
        proof_of_gpu.fixSeed(round_id, secret, {"from": verifier})


def test_a_wrong_secret_is_refused(proof_of_gpu, provider, verifier, custom_error):
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    with brownie.reverts(custom_error("ProofOfGpuWrongSecret", round_id)):
        proof_of_gpu.fixSeed(round_id, keccak(b"guess"), {"from": verifier})


def test_commit_deadline_runs_from_the_seed_fix(proof_of_gpu, provider, verifier):
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    chain.sleep(POG_COMMIT_WINDOW // 2)
    tx = proof_of_gpu.fixSeed(round_id, _secret(proof_of_gpu, round_id), {"from": verifier})
    deadline = chain[tx.block_number].timestamp + POG_COMMIT_WINDOW
    assert proof_of_gpu.round(round_id)["commitDeadline"] == deadline
    assert tx.events["RoundSeedFixed"]["commitDeadline"] == deadline
    chain.sleep(POG_COMMIT_WINDOW - 60)  # past the request's window, inside the seed's
    chain.mine()
    proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})


def test_provider_cannot_front_run_the_seed(proof_of_gpu, provider, verifier, stranger, custom_error):
    """The attack: the provider commits (which used to fix the seed itself) or fixes the seed
    before the verifier, starting its clock before the verifier's. Both are refused, and the
    verifier's reveal still goes through."""
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    secret = _secret(proof_of_gpu, round_id)
    with brownie.reverts(custom_error("ProofOfGpuSeedNotFixed", round_id)):
        proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})
    for caller in (provider, stranger):  # even with the secret, seen in the mempool
        with brownie.reverts(custom_error("ProofOfGpuNotVerifier", round_id, caller)):
            proof_of_gpu.fixSeed(round_id, secret, {"from": caller})
    proof_of_gpu.fixSeed(round_id, secret, {"from": verifier})
    proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})


def test_seed_cannot_be_fixed_after_256_blocks_and_the_round_is_voided(
    proof_of_gpu, registry, provider, verifier, stranger, custom_error
):
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    request_block = proof_of_gpu.round(round_id)["requestBlock"]
    chain.mine(260)
    with brownie.reverts(custom_error("BlockRandomnessExpired", request_block, chain.height + 1)):
        proof_of_gpu.fixSeed(round_id, _secret(proof_of_gpu, round_id), {"from": verifier})
    before = registry.pogStatusOf(provider)
    chain.sleep(POG_COMMIT_WINDOW + 1)
    chain.mine()
    tx = proof_of_gpu.markFailed(round_id, {"from": stranger})
    assert tx.events["RoundVoided"]["roundId"] == round_id and "RoundFailed" not in tx.events
    assert proof_of_gpu.round(round_id)["status"] == RoundStatus.VOIDED
    assert registry.pogStatusOf(provider) == before  # nothing recorded against the provider


def test_seed_deadline_passed_refuses_a_late_reveal(proof_of_gpu, provider, verifier, custom_error):
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    deadline = proof_of_gpu.round(round_id)["commitDeadline"]
    chain.sleep(POG_COMMIT_WINDOW + 1)
    chain.mine()
    with brownie.reverts(custom_error("ProofOfGpuSeedDeadlinePassed", round_id, deadline)):
        proof_of_gpu.fixSeed(round_id, _secret(proof_of_gpu, round_id), {"from": verifier})


def test_commit_stores_one_root_per_gpu(proof_of_gpu, provider, verifier):
    round_id = _request(proof_of_gpu, provider, verifier)
    roots = [keccak(text=f"root-{g}") for g in range(4)]
    tx = proof_of_gpu.commitRoots(round_id, roots, {"from": provider})
    assert "RootsCommitted" in tx.events
    r = proof_of_gpu.round(round_id)
    assert r["status"] == RoundStatus.COMMITTED and r["committedAt"] == chain[tx.block_number].timestamp
    assert [bytes(proof_of_gpu.rootOf(round_id, g)) for g in range(4)] == roots


def test_commit_reverts_for_other_caller_wrong_count_zero_root_and_twice(
    proof_of_gpu, provider, verifier, stranger, custom_error
):
    round_id = _request(proof_of_gpu, provider, verifier)
    roots = [keccak(text=f"root-{g}") for g in range(4)]
    with brownie.reverts(custom_error("ProofOfGpuNotProvider", round_id, stranger)):
        proof_of_gpu.commitRoots(round_id, roots, {"from": stranger})
    with brownie.reverts(custom_error("ProofOfGpuWrongRootCount", round_id, 3, 4)):
        proof_of_gpu.commitRoots(round_id, roots[:3], {"from": provider})
    with brownie.reverts(custom_error("ProofOfGpuZeroRoot", round_id, 1)):
        proof_of_gpu.commitRoots(round_id, [roots[0], bytes(32)] + roots[2:], {"from": provider})
    proof_of_gpu.commitRoots(round_id, roots, {"from": provider})
    with brownie.reverts(custom_error("ProofOfGpuWrongStatus", round_id, 2)):
        proof_of_gpu.commitRoots(round_id, roots, {"from": provider})


def test_commit_after_deadline_reverts_and_round_can_be_failed(
    proof_of_gpu, registry, provider, verifier, stranger, custom_error
):
    round_id = _request(proof_of_gpu, provider, verifier)
    deadline = proof_of_gpu.round(round_id)["commitDeadline"]
    with brownie.reverts(custom_error("ProofOfGpuCommitDeadlineNotPassed", round_id, deadline)):
        proof_of_gpu.markFailed(round_id, {"from": stranger})
    chain.sleep(POG_COMMIT_WINDOW + 1)
    chain.mine()
    with brownie.reverts(custom_error("ProofOfGpuCommitDeadlinePassed", round_id, deadline)):
        proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})
    tx = proof_of_gpu.markFailed(round_id, {"from": stranger})
    assert tx.events["RoundFailed"]["roundId"] == round_id
    status = registry.pogStatusOf(provider)
    assert status["roundId"] == round_id and not status["passed"]
    assert proof_of_gpu.round(round_id)["status"] == RoundStatus.FAILED


def test_attest_records_result_in_registry(proof_of_gpu, registry, provider, verifier, stranger, custom_error):
    round_id = _request(proof_of_gpu, provider, verifier)
    with brownie.reverts(custom_error("ProofOfGpuWrongStatus", round_id, 1)):
        proof_of_gpu.attest(round_id, 1234, H100, 61_000_000, True, {"from": verifier})
    chain.mine()
    proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})
    with brownie.reverts(custom_error("ProofOfGpuNotVerifier", round_id, stranger)):
        proof_of_gpu.attest(round_id, 1234, H100, 61_000_000, True, {"from": stranger})
    tx = proof_of_gpu.attest(round_id, 1234, H100, 61_000_000, True, {"from": verifier})
    assert tx.events["RoundAttested"]["measuredMillis"] == 1234
    status = registry.pogStatusOf(provider)
    assert (status["roundId"], bytes(status["gpuClass"]), status["tflopsMilli"], status["passed"]) == (
        round_id, H100, 61_000_000, True
    )
    with brownie.reverts(custom_error("ProofOfGpuWrongStatus", round_id, 3)):
        proof_of_gpu.attest(round_id, 1234, H100, 61_000_000, True, {"from": verifier})


def test_failed_attestation_records_no_class(proof_of_gpu, registry, provider, verifier):
    round_id = _request(proof_of_gpu, provider, verifier)
    proof_of_gpu.commitRoots(round_id, [keccak(text="r")] * 4, {"from": provider})
    proof_of_gpu.attest(round_id, 99_999, H100, 1_000, False, {"from": verifier})
    status = registry.pogStatusOf(provider)
    assert bytes(status["gpuClass"]) == bytes(32) and not status["passed"]


def test_views_revert_for_unknown_round_and_gpu_out_of_range(proof_of_gpu, provider, verifier, custom_error):
    with brownie.reverts(custom_error("ProofOfGpuUnknownRound", 99)):
        proof_of_gpu.round(99)
    round_id = _request(proof_of_gpu, provider, verifier, fix=False)
    with brownie.reverts(custom_error("ProofOfGpuSeedNotFixed", round_id)):
        proof_of_gpu.gpuSeedOf(round_id, 0)
    with brownie.reverts(custom_error("ProofOfGpuWrongStatus", round_id, 1)):
        proof_of_gpu.rootOf(round_id, 0)
    with brownie.reverts(custom_error("ProofOfGpuGpuIndexOutOfRange", round_id, 4, 4)):
        proof_of_gpu.uuidHashOf(round_id, 4)


def test_honest_roots_commit_and_gas_of_one_gpu_round(
    proof_of_gpu, staking, registry, provider2, verifier, register_provider
):
    register_provider(provider2, gpus=1)
    round_id, commitments = ref.commit_honest_round(proof_of_gpu, provider2, verifier)
    assert bytes(proof_of_gpu.rootOf(round_id, 0)) == commitments[0].root
    secret = ref.secret_for("gas")
    request = proof_of_gpu.requestRound(provider2, 64, keccak(secret), {"from": verifier})
    round_id = request.events["RoundRequested"]["roundId"]
    fix = proof_of_gpu.fixSeed(round_id, secret, {"from": verifier})
    commit = proof_of_gpu.commitRoots(round_id, [commitments[0].root], {"from": provider2})
    print(f"\nGAS PoG requestRound, 1 GPU: {request.gas_used}; fixSeed: {fix.gas_used}; "
          f"commitRoots: {commit.gas_used}")
