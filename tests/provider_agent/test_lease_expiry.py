"""A lease that runs out is ended on-chain by the provider's agent, and its miner resumes.

Nobody else has to act: the agent's LeaseWatcher compares its leases' ends with the chain's
clock (moved here with evm_increaseTime, as a long lease's hour would pass), calls endLease, and
releases the GPUs to the miner. Likewise a lease the agent could not offer within the delivery
window (no SSH key came) is ended with a full refund to the renter instead of holding the GPUs
for the whole paid time. Real anvil chain, real agent, real reference miner; every wait is for a
condition with a bound."""

from __future__ import annotations

import pytest

from client.contracts import emitted
from protocol.enums import LeaseStatus
from provider_agent.agent import Agent
from provider_agent.leases import LeaseKeyMissing
from tests.support.waiting import holds_for, wait_until

HOUR = 3600


@pytest.fixture
def agent(settings_for):  # type: ignore[no-untyped-def]
    agent = Agent.build(settings_for(mining=True, mining_difficulty_bits=8, mining_batch=1024,
                                     mining_resume_after_s=0.2, lease_check_s=0.2))
    agent.register()
    assert agent.mining is not None and agent.lease_watcher is not None
    agent.mining.start()
    try:
        yield agent
    finally:
        agent.lease_watcher.stop()
        agent.mining.stop()


def _start_lease(market, seconds: int = HOUR) -> int:  # type: ignore[no-untyped-def]
    leases = market.session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider, 1, seconds).call()
    receipt = market.session.send(leases.functions.startLease(market.provider, 1, seconds), market.renter, value=cost)
    return emitted(leases, "LeaseStarted", receipt)[0]["args"]["leaseId"]


def _move_chain_time(market, seconds: int) -> None:  # type: ignore[no-untyped-def]
    market.session.web3.provider.make_request("evm_increaseTime", [seconds])
    market.session.web3.provider.make_request("anvil_mine", [1])


def _mining_again(agent: Agent) -> bool:
    assert agent.mining is not None
    if agent.mining.state != "mining":
        return False
    before = agent.mining.miner.hashes
    return bool(wait_until(lambda: agent.mining.miner.hashes > before, 30, "hashes after the resume"))


def test_agent_ends_an_expired_lease_on_chain_and_the_miner_resumes(agent, market):  # type: ignore[no-untyped-def]
    leases = market.session.contract("LeaseManager")
    wait_until(lambda: agent.mining.miner.hashes > 0, 60, "the miner hashing before the lease")
    lease_id = _start_lease(market)
    # What the lease task does when the renter's key is there; here the key never comes, so the
    # agent pauses the miner and offers through its own chain client, as it would after the build.
    with pytest.raises(LeaseKeyMissing):
        agent.leases.handle(lease_id)
    assert agent.mining.state == "leased"
    agent.chain.offer_access(lease_id, b"\xab" * 32)
    market.session.send(leases.functions.confirmDelivery(lease_id, b"\xab" * 32), market.renter)
    agent.lease_watcher.start()
    holds_for(lambda: leases.functions.getLease(lease_id).call().status == LeaseStatus.ACTIVE
              and agent.mining.state == "leased", 1.0, "the lease runs (and the miner yields) until its end")

    _move_chain_time(market, HOUR)  # the paid hour passes on the chain's clock

    wait_until(lambda: leases.functions.getLease(lease_id).call().status == LeaseStatus.ENDED, 20,
               "the agent ended the expired lease on-chain")
    [ended] = leases.events.LeaseEnded().get_logs(from_block=0, argument_filters={"leaseId": lease_id})
    assert ended.args.endedBy == market.provider
    paid = leases.functions.getLease(lease_id).call().paid
    assert 0 < ended.args.providerEarned <= paid and ended.args.renterRefund == paid - ended.args.providerEarned
    assert leases.functions.availableGpusOf(market.provider).call() == \
        market.session.contract("ProviderRegistry").functions.gpuCountOf(market.provider).call()
    wait_until(lambda: _mining_again(agent), 20, "the miner hashing again after the lease")


def test_agent_frees_the_gpus_of_a_lease_it_never_offered_with_a_full_refund(agent, market):  # type: ignore[no-untyped-def]
    leases = market.session.contract("LeaseManager")
    lease_id = _start_lease(market)
    with pytest.raises(LeaseKeyMissing):  # the renter never binds its key
        agent.leases.handle(lease_id)
    assert agent.mining.state == "leased"
    agent.lease_watcher.start()
    _move_chain_time(market, leases.functions.DELIVERY_WINDOW().call())

    wait_until(lambda: leases.functions.getLease(lease_id).call().status == LeaseStatus.ENDED, 20,
               "the agent ended the never-offered lease on-chain")
    [ended] = leases.events.LeaseEnded().get_logs(from_block=0, argument_filters={"leaseId": lease_id})
    assert ended.args.endedBy == market.provider
    assert ended.args.providerEarned == 0
    assert ended.args.renterRefund == leases.functions.getLease(lease_id).call().paid
    wait_until(lambda: _mining_again(agent), 20, "the miner hashing again after the lease")
