"""The dashboard in headless Chromium (Debian's package, driven by Playwright) against a live
backend and anvil: tables and the PoG chart render, and a job is funded by a test wallet
injected into the page as an EIP-1193 provider (the key stays in the test process)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import backend_support as support
import httpx
import pytest
from eth_account.messages import encode_defunct
from web3 import Web3

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

WALLET_SHIM = """
window.ethereum = {
  isInjectedWallet: true,
  request: async ({ method, params }) => {
    const reply = JSON.parse(await window.__testWallet(JSON.stringify({ method, params: params || [] })));
    if (reply.error) throw new Error(reply.error);
    return reply.result;
  },
};
"""


class InjectedWallet:
    """Answers the page's EIP-1193 requests with anvil's account 3, signing locally."""

    def __init__(self, rpc_url: str) -> None:
        self.web3 = Web3(Web3.HTTPProvider(rpc_url))
        self.account = support.anvil_key(3)
        self.sent: list[str] = []

    def handle(self, raw: str) -> str:
        request = json.loads(raw)
        try:
            return json.dumps({"result": self._answer(request["method"], request["params"])})
        except Exception as exc:  # reported to the page like a wallet error
            return json.dumps({"error": str(exc)})

    def _answer(self, method: str, params: list[Any]) -> Any:
        if method in ("eth_requestAccounts", "eth_accounts"):
            return [self.account.address.lower()]
        if method == "personal_sign":
            message = bytes.fromhex(params[0][2:])
            return "0x" + self.account.sign_message(encode_defunct(primitive=message)).signature.hex()
        if method == "eth_sendTransaction":
            tx = params[0]
            fields = {"from": self.account.address, "to": Web3.to_checksum_address(tx["to"]), "data": tx["data"],
                      "value": int(tx["value"], 16), "chainId": self.web3.eth.chain_id,
                      "nonce": self.web3.eth.get_transaction_count(self.account.address, "pending")}
            fields["gas"] = self.web3.eth.estimate_gas(fields)
            fields.update(maxFeePerGas=2 * self.web3.eth.gas_price + 10**9, maxPriorityFeePerGas=10**9)
            tx_hash = self.web3.eth.send_raw_transaction(self.account.sign_transaction(fields).raw_transaction)
            self.web3.eth.wait_for_transaction_receipt(tx_hash)
            self.sent.append("0x" + bytes(tx_hash).hex())
            return self.sent[-1]
        return self.web3.provider.make_request(method, params)["result"]  # reads go to the node


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    with playwright.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield instance
        instance.close()


def test_dashboard_renders_providers_pog_history_and_jobs(browser, server, market) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(server + "/")
    page.wait_for_selector(f'#providers tr[data-address="{market.provider.lower()}"]')
    row = page.inner_text(f'#providers tr[data-address="{market.provider.lower()}"]')
    assert "H100-SXM" in row and "710" in row
    page.select_option("#pog-provider", market.provider.lower())
    page.wait_for_function("document.querySelectorAll('#pog-chart .pog-point').length === 2")
    page.wait_for_selector('#jobs tr[data-job="1"]')
    page.click('#jobs tr[data-job="1"]')
    page.wait_for_selector("#job-detail h3")
    assert "finalized" in page.inner_text("#job-detail h3")
    page.close()


def test_browser_wallet_funds_a_job(browser, server, chain, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url)
    page = browser.new_page()
    page.expose_function("__testWallet", wallet.handle)
    page.add_init_script(WALLET_SHIM)
    page.goto(server + "/")
    page.click("#connect")
    page.wait_for_function("document.getElementById('account').textContent.length > 0")
    files = []
    for i in range(3):
        path = tmp_path / f"in-{i}.bin"
        path.write_bytes(b"browser-input-%d" % i)
        files.append(str(path))
    page.fill("#model", "0x" + "ab" * 32)
    page.set_input_files("#inputs", files)
    page.click("#submit")
    page.wait_for_function("/job \\d+ funded|error:/.test(document.getElementById('status').textContent)",
                           timeout=20_000)
    status = page.inner_text("#status")
    assert "error" not in status, status
    assert len(wallet.sent) == 1
    job_id = int(status.split("job ")[-1].split(" funded")[0])
    page.wait_for_selector("#job-detail h3")
    detail = page.inner_text("#job-detail")
    assert wallet.sent[0] in detail and market.provider.lower() in detail
    assert f"job {job_id}" in page.inner_text("#job-detail h3")
    page.close()
    job = httpx.get(f"{server}/jobs/{job_id}").json()  # what the chain recorded, via the indexer
    assert job["renter"] == wallet.account.address.lower() and job["funded_tx"] == wallet.sent[0]
    assert len(job["spec"]["inputs"]) == 3 and job["spec"]["priceWei"] == job["price"]
