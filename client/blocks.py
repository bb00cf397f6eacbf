"""Block headers read from the node's JSON: web3's `get_block` runs every field of the block (and the
list of its transactions) through its formatters, 1-2 ms of CPU a read on these machines, a tenth of
a provider agent's and of a verifier's Python time under load, where they only want one field."""

from __future__ import annotations

from typing import Any

from web3 import Web3
from web3.exceptions import BlockNotFound, Web3RPCError
from web3.types import RPCEndpoint


def header(web3: Web3, block: int | str = "latest") -> dict[str, Any]:
    """The block's fields as the node sends them (hex strings); BlockNotFound when it has none."""
    tag = hex(block) if isinstance(block, int) else block
    answer = web3.provider.make_request(RPCEndpoint("eth_getBlockByNumber"), [tag, False])
    if answer.get("error") is not None:
        raise Web3RPCError(f"eth_getBlockByNumber {tag}: {answer['error']}", rpc_response=answer)
    if answer.get("result") is None:
        raise BlockNotFound(f"the node has no block {block}")
    fields: dict[str, Any] = answer["result"]
    return fields


def timestamp(web3: Web3, block: int | str = "latest") -> int:
    return int(header(web3, block)["timestamp"], 16)


def block_hash(web3: Web3, number: int) -> bytes:
    return bytes.fromhex(header(web3, number)["hash"].removeprefix("0x"))
