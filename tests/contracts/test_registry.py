"""ProviderRegistry: registration against stake, GPU identities, prices, (de)activation and
Proof-of-GPU status."""

import brownie
import pytest
from brownie import ZERO_ADDRESS, web3

from conftest import MIN_PROVIDER_STAKE, PRICE_PER_GPU_HOUR, PRICE_PER_JOB_UNIT

MODEL = b"H100-SXM".ljust(32, b"\0")
URI = "ipfs://provider-metadata"


def _uuids(n: int, tag: str = "gpu") -> list[bytes]:
    return [bytes(web3.keccak(text=f"{tag}-{i}")) for i in range(n)]


@pytest.fixture
def staked(staking, provider):
    staking.stake({"from": provider, "value": MIN_PROVIDER_STAKE})
    return provider


def _register(registry, account, uuids, uri: str = URI):
    return registry.register(MODEL, uuids, PRICE_PER_GPU_HOUR, PRICE_PER_JOB_UNIT, uri, {"from": account})


def test_register_records_everything_and_activates(registry, staked):
    uuids = _uuids(3)
    tx = _register(registry, staked, uuids)
    assert tx.events["ProviderRegistered"] == {
        "provider": staked,
        "gpuModel": "0x" + MODEL.hex(),
        "gpuCount": 3,
        "pricePerGpuHour": PRICE_PER_GPU_HOUR,
        "pricePerJobUnit": PRICE_PER_JOB_UNIT,
        "metadataURI": URI,
    }
    info = registry.providerOf(staked)
    assert info["gpuModel"] == "0x" + MODEL.hex()
    assert info["pricePerGpuHour"] == PRICE_PER_GPU_HOUR
    assert info["pricePerJobUnit"] == PRICE_PER_JOB_UNIT
    assert info["metadataURI"] == URI
    assert [bytes(h) for h in info["uuidHashes"]] == uuids
    assert info["registeredAt"] == tx.timestamp
    assert info["deactivated"] is False
    assert registry.isRegistered(staked) and registry.isActive(staked)
    assert registry.gpuCountOf(staked) == 3
    assert [bytes(registry.uuidHashOf(staked, i)) for i in range(3)] == uuids
    assert registry.pricePerGpuHourOf(staked) == PRICE_PER_GPU_HOUR
    assert registry.pricePerJobUnitOf(staked) == PRICE_PER_JOB_UNIT


def test_register_accepts_the_maximum_gpu_count(registry, staked):
    _register(registry, staked, _uuids(registry.MAX_GPUS()))
    assert registry.gpuCountOf(staked) == 16


def test_register_reverts_below_minimum_stake(registry, staking, provider, custom_error):
    staking.stake({"from": provider, "value": MIN_PROVIDER_STAKE - 1})
    with brownie.reverts(
        custom_error("ProviderRegistryInsufficientStake", provider, MIN_PROVIDER_STAKE - 1, MIN_PROVIDER_STAKE)
    ):
        _register(registry, provider, _uuids(1))


def test_register_reverts_twice(registry, staked, custom_error):
    _register(registry, staked, _uuids(1))
    with brownie.reverts(custom_error("ProviderRegistryAlreadyRegistered", staked)):
        _register(registry, staked, _uuids(1, "other"))


@pytest.mark.parametrize("count", [0, 17])
def test_register_reverts_on_bad_gpu_count(registry, staked, count, custom_error):
    with brownie.reverts(custom_error("ProviderRegistryBadGpuCount", count)):
        _register(registry, staked, _uuids(count))


def test_register_rejects_duplicate_uuid_hashes(registry, staked, custom_error):
    uuids = _uuids(3)
    uuids.append(uuids[1])
    with brownie.reverts(custom_error("ProviderRegistryDuplicateUuidHash", uuids[1])):
        _register(registry, staked, uuids)


def test_register_rejects_zero_uuid_hash(registry, staked, custom_error):
    uuids = _uuids(2) + [bytes(32)]
    with brownie.reverts(custom_error("ProviderRegistryZeroUuidHash", 2)):
        _register(registry, staked, uuids)


def test_two_providers_are_independent(registry, staking, staked, provider2):
    staking.stake({"from": provider2, "value": MIN_PROVIDER_STAKE})
    _register(registry, staked, _uuids(2))
    _register(registry, provider2, _uuids(2, "other"))  # one device, one account: test_honest_parties_pog
    assert registry.gpuCountOf(provider2) == 2


def test_uuid_hash_of_reverts_out_of_range(registry, staked, custom_error):
    _register(registry, staked, _uuids(2))
    with brownie.reverts(custom_error("ProviderRegistryGpuIndexOutOfRange", staked, 2, 2)):
        registry.uuidHashOf(staked, 2)


def test_unregistered_provider_reads_as_empty_and_inactive(registry, stranger):
    assert not registry.isActive(stranger)
    assert not registry.isRegistered(stranger)
    assert registry.gpuCountOf(stranger) == 0
    assert registry.pricePerGpuHourOf(stranger) == 0
    assert registry.providerOf(stranger)["registeredAt"] == 0


def test_set_prices_emits_old_and_new(registry, staked):
    _register(registry, staked, _uuids(1))
    tx = registry.setPrices(7, 9, {"from": staked})
    assert tx.events["PricesUpdated"] == {
        "provider": staked,
        "oldPricePerGpuHour": PRICE_PER_GPU_HOUR,
        "newPricePerGpuHour": 7,
        "oldPricePerJobUnit": PRICE_PER_JOB_UNIT,
        "newPricePerJobUnit": 9,
    }
    assert (registry.pricePerGpuHourOf(staked), registry.pricePerJobUnitOf(staked)) == (7, 9)


def test_set_metadata_uri_emits_old_and_new(registry, staked):
    _register(registry, staked, _uuids(1))
    tx = registry.setMetadataURI("https://example.org/p.json", {"from": staked})
    assert tx.events["MetadataURIUpdated"] == {
        "provider": staked,
        "oldURI": URI,
        "newURI": "https://example.org/p.json",
    }
    assert registry.providerOf(staked)["metadataURI"] == "https://example.org/p.json"


@pytest.mark.parametrize(
    "call", [("setPrices", 1, 1), ("setMetadataURI", "x"), ("deactivate",), ("reactivate",)]
)
def test_provider_functions_revert_when_unregistered(registry, stranger, call, custom_error):
    name, *args = call
    with brownie.reverts(custom_error("ProviderRegistryNotRegistered", stranger)):
        getattr(registry, name)(*args, {"from": stranger})


def test_deactivate_and_reactivate_toggle_activity(registry, staked, custom_error):
    _register(registry, staked, _uuids(1))
    tx = registry.deactivate({"from": staked})
    assert "ProviderDeactivated" in tx.events
    assert not registry.isActive(staked)
    with brownie.reverts(custom_error("ProviderRegistryAlreadyDeactivated", staked)):
        registry.deactivate({"from": staked})
    tx = registry.reactivate({"from": staked})
    assert "ProviderReactivated" in tx.events
    assert registry.isActive(staked)
    with brownie.reverts(custom_error("ProviderRegistryNotDeactivated", staked)):
        registry.reactivate({"from": staked})


def test_provider_becomes_inactive_when_stake_drops_below_minimum(registry, staking, staked, slasher):
    _register(registry, staked, _uuids(1))
    staking.slash(staked, 1, slasher, {"from": slasher})
    assert registry.isRegistered(staked)
    assert not registry.isActive(staked)
    staking.stake({"from": staked, "value": 1})
    assert registry.isActive(staked)


def test_provider_becomes_inactive_when_unbonding(registry, staking, staked):
    _register(registry, staked, _uuids(1))
    staking.requestUnbond(1, {"from": staked})
    assert not registry.isActive(staked)


def test_set_pog_status_records_last_round(registry, staked, pog):
    _register(registry, staked, _uuids(1))
    assert registry.pogStatusOf(staked)["timestamp"] == 0
    cls = b"H100-SXM".ljust(32, b"\0")
    tx = registry.setPogStatus(staked, 7, cls, 989_000, True, {"from": pog})
    assert tx.events["PogStatusRecorded"] == {
        "provider": staked,
        "roundId": 7,
        "gpuClass": "0x" + cls.hex(),
        "tflopsMilli": 989_000,
        "passed": True,
    }
    registry.setPogStatus(staked, 8, bytes(32), 0, False, {"from": pog})
    status = registry.pogStatusOf(staked)
    assert (status["roundId"], status["passed"], status["tflopsMilli"]) == (8, False, 0)
    assert status["timestamp"] == brownie.chain[-1].timestamp


def test_set_pog_status_reverts_without_pog_role(registry, staked, stranger, custom_error):
    _register(registry, staked, _uuids(1))
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", stranger, registry.POG_ROLE())):
        registry.setPogStatus(staked, 1, bytes(32), 0, False, {"from": stranger})


def test_set_pog_status_reverts_for_unregistered_provider(registry, stranger, pog, custom_error):
    with brownie.reverts(custom_error("ProviderRegistryNotRegistered", stranger)):
        registry.setPogStatus(stranger, 1, bytes(32), 0, False, {"from": pog})


def test_min_provider_stake_is_fixed_and_not_zero(
    ProviderRegistry, registry, staking, admin, custom_error, deploy_revert
):
    assert registry.minProviderStake() == MIN_PROVIDER_STAKE
    assert registry.staking() == staking
    assert deploy_revert(ProviderRegistry, staking, 0, sender=admin) == custom_error("ProviderRegistryZeroMinStake")


def test_pog_role_is_granted_once_by_the_deployer(registry, proof_of_gpu, pog, admin, stranger, custom_error):
    assert registry.wired()
    assert registry.hasRole(registry.POG_ROLE(), proof_of_gpu) and registry.hasRole(registry.POG_ROLE(), pog)
    with brownie.reverts(custom_error("WiringAlreadyDone")):
        registry.wire([stranger], stranger, {"from": admin})
    with brownie.reverts(custom_error("AccessControlUnauthorizedAccount", admin, bytes(32))):
        registry.grantRole(registry.POG_ROLE(), stranger, {"from": admin})


def test_the_registry_tells_the_escrow_when_a_provider_registers_deactivates_and_reactivates(
    registry, escrow, staked
):
    assert not escrow.isProviderActive(staked)
    _register(registry, staked, _uuids(1))
    assert escrow.isProviderActive(staked)
    registry.deactivate({"from": staked})
    assert not escrow.isProviderActive(staked)
    registry.reactivate({"from": staked})
    assert escrow.isProviderActive(staked)


def test_registering_waits_for_the_wiring_that_names_the_escrow(
    ProviderRegistry, staking, staked, admin, custom_error
):
    fresh = ProviderRegistry.deploy(staking, MIN_PROVIDER_STAKE, {"from": admin})
    with brownie.reverts(custom_error("ProviderRegistryNotWired")):
        _register(fresh, staked, _uuids(1))
    with brownie.reverts(custom_error("WiringZeroAddress")):
        fresh.wire([], ZERO_ADDRESS, {"from": admin})
