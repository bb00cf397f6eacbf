"""The chain as the backend sees it: the chain context (client.chain) and who is a staked verifier."""

from __future__ import annotations

import time

from web3 import Web3

from backend.errors import ChainUnavailable
from backend.settings import Settings
from client.chain import ChainContext, open_chain
from client.errors import DeploymentUnreadable, NodeUnavailable
from protocol.deployments import Deployment


class Chain(ChainContext):
    def __init__(self, web3: Web3, deployment: Deployment, verifier_ttl_s: float = 0.0) -> None:
        super().__init__(web3, deployment)
        self.verifier_ttl_s = verifier_ttl_s  # how long a staked verifier's verdict is trusted (Settings.verifier_check_ttl_s)
        self._verifiers: dict[str, float] = {}  # address -> when found staked
        self._min_provider_stake: int | None = None

    @classmethod
    def connect(cls, settings: Settings) -> Chain:
        """The node and deployment of `settings`; ChainUnavailable (the API's 503) when either fails."""
        try:
            web3, deployment = open_chain(settings.rpc_url, deployment_file=settings.deployment_file, timeout_s=30)
        except (NodeUnavailable, DeploymentUnreadable) as exc:
            raise ChainUnavailable(str(exc)) from exc
        return cls(web3, deployment, settings.verifier_check_ttl_s)

    def is_staked_verifier(self, address: str) -> bool:
        """Whether `address` has bonded at least the verifiers' minimum stake and is not a
        registered provider: such an account audits jobs, so it may read their inputs, private
        models and outputs. Providers stake through the same contract; without the registry
        check any provider could read its competitors' private models. A yes is kept for
        `verifier_ttl_s` (an audit asks for every file it reads); a no is asked again each time,
        so a verifier that has just staked is let in at once."""
        key = address.lower()
        found = self._verifiers.get(key)
        if found is not None and time.monotonic() - found < self.verifier_ttl_s:
            return True
        try:
            account = Web3.to_checksum_address(address)
            if self.contract("ProviderRegistry").functions.isRegistered(account).call():
                return False
            required: int = self.contract("ProofOfGpu").functions.minVerifierStake().call()
            stake: int = self.contract("Staking").functions.stakeOf(account).call()
            staked = stake >= required
        except Exception as exc:  # requests' connection errors vary by transport
            raise ChainUnavailable(f"cannot read the stake of {address}: {exc}") from exc
        if staked:
            self._verifiers[key] = time.monotonic()
        else:
            self._verifiers.pop(key, None)
        return staked

    def min_provider_stake(self) -> int:
        """ProviderRegistry.minProviderStake: immutable, so read once. A provider whose bonded
        stake a slash took below it is not active on-chain (isActive) though no event says so."""
        if self._min_provider_stake is None:
            try:
                self._min_provider_stake = int(self.contract("ProviderRegistry").functions.minProviderStake().call())
            except Exception as exc:  # requests' connection errors vary by transport
                raise ChainUnavailable(f"cannot read the providers' minimum stake: {exc}") from exc
        return self._min_provider_stake

    def pog_round_verifier(self, round_id: int) -> str | None:
        """The verifier that requested PoG round `round_id` (lower-case), None for no such round:
        read from the chain, so a report on a round need not wait for the indexer."""
        pog = self.contract("ProofOfGpu").functions
        try:
            if not 1 <= round_id <= pog.roundCount().call():  # ids count from 1; round() reverts past them
                return None
            return str(pog.round(round_id).call().verifier).lower()
        except Exception as exc:  # requests' connection errors vary by transport
            raise ChainUnavailable(f"cannot read PoG round {round_id}: {exc}") from exc
