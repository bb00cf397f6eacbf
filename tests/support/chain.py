"""One anvil per pytest session (per kind of chain a test asks for), the contract set deployed
once; a module gets it back exactly as deployed through evm_snapshot/evm_revert (about a
millisecond) instead of starting anvil and deploying again.

Reverting is safe only between users that run one after the other: a module's services (an
indexer, a worker) must be stopped before the next module reverts the chain under them, which
module-scoped fixtures are (pytest finishes a module's fixtures before it sets up the next one's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from web3 import Web3

from protocol.deployments import Deployment
from client.ports import free_port
from unchained_cli.chain import LocalChain, block_time_from_env
from unchained_cli.deploy import Deployer, deploy_all, write_deployment


# Seconds per block of a module marked `block_time` (the test command runs those modules so, beside
# the rest with instant mining); UNCHAINED_TEST_BLOCK_TIME, where set, wins (0: instant mining).
BLOCK_TIME_S = 1.0


def module_block_time(node: pytest.Item | pytest.Collector) -> float | None:
    """The block time the test's module runs with: None for instant mining."""
    return block_time_from_env(BLOCK_TIME_S if node.get_closest_marker("block_time") else None)


@dataclass
class SharedChain:
    """A running anvil with the default contract set deployed, and the snapshot of that state."""

    local: LocalChain
    deployment: Deployment
    deployment_file: Path
    _snapshot: str = field(default="", init=False)

    @classmethod
    def start(cls, directory: Path, block_time: float | None, accounts: int) -> "SharedChain":
        local = LocalChain(port=free_port(), block_time=block_time, accounts=accounts).start()
        try:
            with local.mining_at_once():  # set-up; with a block time, the parties wait for blocks
                deployment = deploy_all(Deployer.connect(local.rpc_url))
        except BaseException:
            local.stop()
            raise
        shared = cls(local, deployment, write_deployment(deployment, directory))
        shared._snapshot = shared._rpc("evm_snapshot")
        return shared

    @property
    def rpc_url(self) -> str:
        return self.local.rpc_url

    def _rpc(self, method: str, *params: object) -> object:
        response = Web3(Web3.HTTPProvider(self.rpc_url)).provider.make_request(method, list(params))
        if "error" in response:
            raise RuntimeError(f"{method} failed on {self.rpc_url}: {response['error']}")
        return response["result"]

    def fresh(self) -> LocalChain:
        """The chain back as just deployed (state, blocks, clock), mining as it started; anvil
        forgets a snapshot it reverts to, so a new one is taken for the next user."""
        if self._rpc("evm_revert", self._snapshot) is not True:
            raise RuntimeError(f"anvil at {self.rpc_url} lost snapshot {self._snapshot}")
        # A test may have stopped mining (a stalled chain) or changed the interval.
        if self.local.block_time:
            self._rpc("evm_setIntervalMining", int(self.local.block_time))
        else:
            self._rpc("evm_setAutomine", True)
        self._snapshot = self._rpc("evm_snapshot")
        return self.local

    def stop(self) -> None:
        self.local.stop()


class SharedChains:
    """The session's chains, started on first use, one per (block time, account count)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._chains: dict[tuple[float | None, int], SharedChain] = {}

    def get(self, block_time: float | None = None, accounts: int = 10) -> SharedChain:
        """The chain of that kind, as just deployed (see SharedChain.fresh)."""
        key = (block_time or None, accounts)
        if key not in self._chains:
            name = f"chain-{key[0] or 0:g}s-{accounts}"
            self._chains[key] = SharedChain.start(self.directory / name, block_time, accounts)
            return self._chains[key]
        shared = self._chains[key]
        shared.fresh()
        return shared

    def stop(self) -> None:
        for shared in self._chains.values():
            shared.stop()
        self._chains.clear()
