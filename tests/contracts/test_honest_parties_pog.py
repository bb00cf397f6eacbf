"""Issue 32, "Honest parties never lose", Proof-of-GPU part: each attack performed on anvil
against the deployed set, then the defence.

- a challenged provider re-drawing its indices by letting them expire (the old re-anchor);
- a wrong chunk already revealed off-chain, proven while the challenge is still open;
- a committed round its verifier never attests, ended by anyone after the challenge period;
- one device registered behind two accounts.
"""

import brownie
import pytest
from brownie import chain
from eth_abi import encode
from eth_utils import function_signature_to_4byte_selector, keccak

import proofs_support as ref
from conftest import (
    MIN_BOND,
    MIN_PROVIDER_STAKE,
    PRICE_PER_GPU_HOUR,
    PRICE_PER_JOB_UNIT,
    PROVIDER_SLASH,
    ROOT_CHALLENGE_PERIOD,
    mine_blocks,
)
from protocol.enums import ChallengeStatus, RoundStatus

BOND = MIN_BOND
N = 64
LEAVES = N * N // 64


def _forged_round(proof_of_gpu, provider, verifier, wrong: set[int]):
    """A round whose GPU 0 root holds a wrong element in each chunk of `wrong`, the other GPUs
    honest. Returns (round_id, forged commitment of GPU 0)."""
    round_id = ref.request_round(proof_of_gpu, provider, verifier)
    honest = [ref.honest_pog_commitment(bytes(proof_of_gpu.gpuSeedOf(round_id, g)), N) for g in range(4)]
    leaves = list(honest[0].leaves)
    for i in wrong:
        leaves[i] = ref.with_element(leaves[i], 5, ref.element_of_chunk(leaves[i], 5) + 1)
    forged = ref.commit(leaves)
    proof_of_gpu.commitRoots(round_id, [forged.root] + [c.root for c in honest[1:]], {"from": provider})
    return round_id, forged


def _challenge(cm, round_id, verifier, gpu=0, k=32):
    return cm.challengePog(round_id, gpu, k, {"from": verifier, "value": BOND}).events["PogChallenged"]["challengeId"]


def _call_fix_randomness(cm, challenge_id, sender) -> bool:
    """What a provider used to call to move an expired anchor: fixRandomness(uint256), sent as raw
    calldata so the attack runs whether or not the contract still has the function."""
    data = function_signature_to_4byte_selector("fixRandomness(uint256)") + encode(["uint256"], [challenge_id])
    try:
        sender.transfer(cm, 0, data="0x" + data.hex())
        return True
    except (brownie.exceptions.VirtualMachineError, ValueError):
        return False


def test_a_challenged_provider_cannot_redraw_its_indices_by_letting_them_expire(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier, stranger
):
    """The attack: half the chunks are wrong. Nobody stores R; the provider waits out the EVM's
    256-block horizon, re-anchors with fixRandomness itself and repeats until a draw misses every
    wrong chunk, then answers and earns the bond. R must be fixed once, at the opening."""
    wrong = set(range(0, LEAVES, 2))
    round_id, forged = _forged_round(proof_of_gpu, active_provider, staked_verifier, wrong)
    challenge_id = _challenge(challenge_manager, round_id, staked_verifier)
    mine_blocks(2)
    first = ref.indices_of(challenge_manager, challenge_id)  # as the provider reads them
    assert wrong & set(first)  # the draw hits a wrong chunk (with probability 1 - 2^-32)
    for _ in range(8):  # waiting is free for the provider: more than enough draws to escape
        mine_blocks(300)
        _call_fix_randomness(challenge_manager, challenge_id, active_provider)
        mine_blocks(2)
        indices = ref.indices_of(challenge_manager, challenge_id)
        if not wrong & set(indices):
            break
    assert list(challenge_manager.challengeIndices(challenge_id)) == first  # the draw never moved
    assert wrong & set(ref.indices_of(challenge_manager, challenge_id))
    # The honest-looking answer it can give is for the original draw, and it holds wrong chunks.
    leaves, proofs = forged.answer(first)
    challenge_manager.respond(challenge_id, leaves, proofs, {"from": active_provider})
    bad = next(i for i in first if i in wrong)
    tx = challenge_manager.proveFraud(challenge_id, bad, forged.leaves[bad], forged.tree.siblings(bad), 5,
                                      {"from": stranger})
    assert tx.events["ChallengeClosed"]["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH


def test_randomness_is_stored_at_the_opening_and_answerable_however_late(
    challenge_manager, pog_round_honest, staked_verifier, provider
):
    """The defence leaves an honest provider nothing to fear from a fast chain: R is stored in
    the opening transaction, from the previous block's hash and the challenge id, and stays
    answerable after any number of blocks."""
    round_id, commitments = pog_round_honest
    tx = challenge_manager.challengePog(round_id, 1, 32, {"from": staked_verifier, "value": BOND})
    challenge_id = tx.events["PogChallenged"]["challengeId"]
    expected = keccak(encode(["bytes32", "uint256"], [bytes(chain[tx.block_number - 1].hash), challenge_id]))
    assert bytes(challenge_manager.challenge(challenge_id)["randomness"]) == expected
    assert bytes(tx.events["ChallengeRandomnessFixed"]["randomness"]) == expected
    mine_blocks(600)
    leaves, proofs = ref.answer(challenge_manager, challenge_id, commitments[1])
    challenge_manager.respond(challenge_id, leaves, proofs, {"from": provider})
    assert challenge_manager.challenge(challenge_id)["status"] == ChallengeStatus.ANSWERED


@pytest.fixture(scope="module")
def pog_round_honest(active_provider, staked_verifier, proof_of_gpu, challenge_manager):
    return ref.commit_honest_round(proof_of_gpu, active_provider, staked_verifier)


def test_a_wrong_chunk_revealed_off_chain_is_proven_while_the_challenge_is_open(
    challenge_manager, proof_of_gpu, staking, active_provider, staked_verifier
):
    """The attack: one wrong chunk, already revealed to the verifier off-chain behind a valid
    inclusion proof. The verifier escalates; the fresh on-chain draw misses that chunk (most
    draws do), the provider answers it cleanly and the challenge settles in its favour. The
    evidence in hand must settle it: a fraud proof is accepted while the challenge is open."""
    round_id, forged = _forged_round(proof_of_gpu, active_provider, staked_verifier, {41})
    challenge_id = _challenge(challenge_manager, round_id, staked_verifier)
    tx = challenge_manager.proveFraud(challenge_id, 41, forged.leaves[41], forged.tree.siblings(41), 5,
                                      {"from": staked_verifier})
    assert tx.events["ChallengeClosed"]["status"] == ChallengeStatus.PROVIDER_FAULTED
    assert staking.stakeOf(active_provider) == MIN_PROVIDER_STAKE - PROVIDER_SLASH
    assert challenge_manager.owedTo(staked_verifier) == BOND


def test_a_correct_chunk_is_no_fraud_while_open_either(
    challenge_manager, pog_round_honest, staked_verifier, stranger, custom_error
):
    round_id, commitments = pog_round_honest
    challenge_id = _challenge(challenge_manager, round_id, staked_verifier, gpu=2)
    leaf = commitments[2].leaves[7]
    with brownie.reverts(custom_error("ChallengeNoFraud", 7, 5, ref.element_of_chunk(leaf, 5))):
        challenge_manager.proveFraud(challenge_id, 7, leaf, commitments[2].tree.siblings(7), 5, {"from": stranger})
    assert challenge_manager.challenge(challenge_id)["status"] == ChallengeStatus.OPEN


def test_a_committed_round_never_attested_is_ended_after_the_challenge_period(
    proof_of_gpu, registry, active_provider, staked_verifier, stranger, custom_error
):
    """The attack: the provider keeps its roots from the verifier (the round fails off-chain
    while still Requested) and commits garbage on-chain afterwards: the round sat Committed
    forever and markFailed reverted. Now anyone ends it once the challenge period is over
    (Voided: the contract cannot judge roots nobody attested; the verifier's sweep attests)."""
    round_id = ref.request_round(proof_of_gpu, active_provider, staked_verifier)
    proof_of_gpu.commitRoots(round_id, [keccak(text=f"garbage-{g}") for g in range(4)], {"from": active_provider})
    committed_at = proof_of_gpu.round(round_id)["committedAt"]
    end = committed_at + ROOT_CHALLENGE_PERIOD
    with brownie.reverts(custom_error("ProofOfGpuAttestWindowOpen", round_id, end)):
        proof_of_gpu.markFailed(round_id, {"from": stranger})
    before = registry.pogStatusOf(active_provider)
    chain.sleep(ROOT_CHALLENGE_PERIOD + 1)
    chain.mine()
    tx = proof_of_gpu.markFailed(round_id, {"from": stranger})
    assert tx.events["RoundVoided"]["roundId"] == round_id
    assert proof_of_gpu.round(round_id)["status"] == RoundStatus.VOIDED
    assert registry.pogStatusOf(active_provider) == before
    with brownie.reverts(custom_error("ProofOfGpuWrongStatus", round_id, RoundStatus.VOIDED)):
        proof_of_gpu.attest(round_id, 1, bytes(32), 0, False, {"from": staked_verifier})


def _register(registry, staking, account, uuid_hashes):
    staking.stake({"from": account, "value": MIN_PROVIDER_STAKE})
    return registry.register(brownie.convert.to_bytes(b"H100-SXM".hex(), "bytes32"), uuid_hashes,
                             PRICE_PER_GPU_HOUR, PRICE_PER_JOB_UNIT, "ipfs://x", {"from": account})


def test_one_device_cannot_pass_for_two_accounts(registry, staking, accounts, admin, custom_error):
    """The attack: one GPU registered under two provider accounts (same UUID hash) passes both
    accounts' rounds. The registry now refuses a device another account holds, until that
    account deactivates; the first cannot come back while the second holds it."""
    provider, provider2 = accounts.add(), accounts.add()
    for account in (provider, provider2):
        admin.transfer(account, 2 * MIN_PROVIDER_STAKE)
    device = keccak(text="GPU-shared")
    _register(registry, staking, provider, [keccak(text="GPU-own"), device])
    staking.stake({"from": provider2, "value": MIN_PROVIDER_STAKE})
    with brownie.reverts(custom_error("ProviderRegistryDeviceClaimed", device, provider.address)):
        registry.register(bytes(32), [device], PRICE_PER_GPU_HOUR, PRICE_PER_JOB_UNIT, "", {"from": provider2})
    assert not registry.isRegistered(provider2)
    assert registry.deviceHolderOf(device) == provider

    registry.deactivate({"from": provider})  # the device changes hands: released
    assert registry.deviceHolderOf(device) == brownie.ZERO_ADDRESS
    registry.register(bytes(32), [device], PRICE_PER_GPU_HOUR, PRICE_PER_JOB_UNIT, "", {"from": provider2})
    assert registry.deviceHolderOf(device) == provider2
    with brownie.reverts(custom_error("ProviderRegistryDeviceClaimed", device, provider2.address)):
        registry.reactivate({"from": provider})
    assert not registry.isActive(provider)
