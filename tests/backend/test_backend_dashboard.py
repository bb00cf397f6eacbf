"""The dashboard in headless Chromium (Debian's package, driven by Playwright) against a live
backend and anvil, with a test wallet injected into the page as an EIP-1193 provider (the key
stays in the test process): payments that cannot go wrong (a double click pays once, a wrong
chain and a refused signature move nothing), live progress, and results checked in the page."""

from __future__ import annotations

import io
import os
import json
import re
import zipfile
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import backend_support as support
import httpx
import pytest
from eth_account.messages import encode_defunct, encode_typed_data
from web3 import Web3

import numpy as np

from client.escrow_jobs import read_job, read_job_view
from protocol.enums import JobStatus
from protocol.job_result import EscrowDomain, JobResult, SignedJobResult
from protocol.jobs import encode_output
from protocol.lease_access import (LeaseAccess, LeaseDomain, LeaseKey, LeaseMessageError, normalize_ssh_key, sign,
                                    typed_hash, verify)
from protocol.merkle import MerkleTree, keccak256, leaf_hash
from tests.support.waiting import wait_until

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4FtkBhVh9PV0c5uSNIk2ZNAcI0fwBVh7Zl8J4a1mV6 renter@laptop"
FINGERPRINT = "SHA256:" + "Bq" * 21 + "w"

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
    """Answers the page's EIP-1193 requests with anvil's account 3, signing locally. It can
    report another chain (as a wallet left on another network does), refuse to switch from it,
    and refuse to sign; it records the chain it was on at each signature."""

    def __init__(self, rpc_url: str, chain_id: int | None = None, refuse_signing: bool = False,
                 gas_percent: int = 150, refuse_switch: bool = False) -> None:
        self.web3 = Web3(Web3.HTTPProvider(rpc_url))
        self.account = support.anvil_key(3)
        self.chain_id = chain_id or self.web3.eth.chain_id
        self.refuse_signing = refuse_signing
        self.refuse_switch = refuse_switch
        self.signed_on: list[int] = []
        self.gas_percent = gas_percent
        self.sent: list[str] = []
        self.methods: list[str] = []

    def handle(self, raw: str) -> str:
        request = json.loads(raw)
        self.methods.append(request["method"])
        try:
            return json.dumps({"result": self._answer(request["method"], request["params"])})
        except Exception as exc:  # reported to the page like a wallet error
            return json.dumps({"error": str(exc)})

    def _answer(self, method: str, params: list[Any]) -> Any:
        if method in ("eth_requestAccounts", "eth_accounts"):
            return [self.account.address.lower()]
        if method == "eth_chainId":
            return hex(self.chain_id)
        if method == "wallet_switchEthereumChain":
            if self.refuse_switch:
                raise ValueError("User rejected the request.")
            if int(params[0]["chainId"], 16) != self.web3.eth.chain_id:
                raise ValueError("Unrecognized chain ID")
            self.chain_id = int(params[0]["chainId"], 16)
            return None
        if method == "personal_sign":
            if self.refuse_signing:
                raise ValueError("User rejected the request.")
            self.signed_on.append(self.chain_id)
            message = bytes.fromhex(params[0][2:])
            return "0x" + self.account.sign_message(encode_defunct(primitive=message)).signature.hex()
        if method == "eth_signTypedData_v4":
            if self.refuse_signing:
                raise ValueError("User rejected the request.")
            if params[0].lower() != self.account.address.lower():
                raise ValueError(f"unknown account {params[0]}")
            self.signed_on.append(self.chain_id)
            signable = encode_typed_data(full_message=json.loads(params[1]))
            return "0x" + self.account.sign_message(signable).signature.hex()
        if method == "eth_sendTransaction":
            if self.chain_id != self.web3.eth.chain_id:
                raise AssertionError("the page asked a wallet on the wrong chain to pay")
            tx = params[0]
            fields = {"from": self.account.address, "to": Web3.to_checksum_address(tx["to"]), "data": tx["data"],
                      "value": int(tx["value"], 16), "chainId": self.web3.eth.chain_id,
                      "nonce": self.web3.eth.get_transaction_count(self.account.address, "pending")}
            # A margin as real wallets add: the estimate runs at the pending block's timestamp and
            # a lease's refund split (an extra storage write) depends on the second it is mined in.
            fields["gas"] = self.web3.eth.estimate_gas(fields) * self.gas_percent // 100
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


def open_page(browser, server: str, wallet: InjectedWallet | None = None, view: str = "jobs"):  # type: ignore[no-untyped-def]
    page = browser.new_page()
    if wallet is not None:
        page.expose_function("__testWallet", wallet.handle)
        page.add_init_script(WALLET_SHIM)
    page.goto(f"{server}/#/{view}")
    if wallet is not None:
        page.click("#connect")
        page.wait_for_function("document.getElementById('account').textContent.length > 0")
    return page


def show(page, view: str) -> None:  # type: ignore[no-untyped-def]
    """Goes to a view through the page's navigation, as a person does."""
    page.click(f'#views a[href="#/{view}"]')
    page.wait_for_selector(f'.view[data-view="{view}"]', state="visible")


def token_for(server: str, key: Any) -> str:
    """A session for `key` (Sign-In with Ethereum, as a CLI client does it)."""
    message = httpx.get(f"{server}/auth/message", params={"address": key.address}).json()["message"]
    signature = key.sign_message(encode_defunct(text=message)).signature.hex()
    return httpx.post(f"{server}/auth/login", json={"message": message, "signature": signature}).json()["token"]


@pytest.fixture(scope="module")
def hub_model(server: str) -> str:
    """A public TorchScript model (y = 2x + 0.25) the renter pushed to the hub."""
    response = httpx.post(f"{server}/models", params={"name": "doubler"}, content=support.Tagged.torchscript(0.25),
                          headers={"Authorization": f"Bearer {token_for(server, support.anvil_key(3))}"}, timeout=60)
    assert response.status_code == 201, response.text
    return response.json()["content_hash"]


def fill_job(page, tmp_path: Path, model: str, items: int = 3, encoded: bool = True) -> None:  # type: ignore[no-untyped-def]
    files = []
    for i in range(items):
        path = tmp_path / f"in-{i}.bin"
        data = np.full(8, i, dtype=np.float32)
        path.write_bytes(encode_output(data) if encoded else data.tobytes())
        files.append(str(path))
    page.fill("#model", model)
    page.set_input_files("#inputs", files)


def wait_status(page, pattern: str) -> str:  # type: ignore[no-untyped-def]
    page.wait_for_function(f"/{pattern}/.test(document.getElementById('status').textContent)", timeout=20_000)
    return page.inner_text("#status")


def job_count(session) -> int:  # type: ignore[no-untyped-def]
    return session.contract("JobEscrow").functions.jobCount().call()


def test_views_navigate_without_a_wallet_offers_jobs_and_challenges(browser, server, market) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(server + "/")  # no wallet, no view named: the offers
    card = f'#offers .offer[data-address="{market.provider.lower()}"]'
    page.wait_for_selector(card)
    assert page.is_hidden('.view[data-view="jobs"]') and page.get_attribute('#views a[href="#/offers"]', "aria-current") == "page"
    text = page.inner_text(card)
    assert "H100-SXM" in text and "710 TFLOPS" in text and "0.009 ETH" in text and "per GPU-hour" in text, text
    assert market.provider.lower() in text and "reputation" in text and "last verified" in text, text
    assert page.get_attribute(f"{card} .price-hour .amount", "title") == "9000000000000000 wei (0.009 ETH)"
    assert "per input item" in text
    # A failed round reads as failed, with no TFLOPS figure, and says why it is not offered.
    failed = page.inner_text(f'#offers .offer[data-address="{market.provider2.lower()}"]')
    assert "failed its Proof of GPU" in failed and "TFLOPS" not in failed and "not available" in failed, failed
    page.select_option("#pog-provider", market.provider2.lower())
    page.wait_for_function("document.querySelector('#pog-rounds tbody td:nth-child(6)')?.textContent === 'failed'")
    assert page.inner_text("#pog-rounds tbody tr td:nth-child(5)") == "—"
    page.select_option("#pog-provider", market.provider.lower())
    # Two rounds of the market, and the one that verified it again after its lost dispute (conftest's server).
    page.wait_for_function("document.querySelectorAll('#pog-chart .pog-point').length === 3")
    # Jobs: the list, then one job at its own address, its state in a renter's words.
    show(page, "jobs")
    assert page.is_hidden('.view[data-view="offers"]')
    page.click('#jobs tr[data-job="1"] td:first-child')
    page.wait_for_selector("#job-detail h3")
    assert page.url.endswith("#/jobs/1")
    assert page.inner_text("#job-detail h3") == "job 1: done, provider paid"
    assert "0.1 ETH" in page.inner_text("#job-detail") and " UTC" in page.inner_text("#job-detail")
    # Challenges and slashes, with amounts rounded and exact on hover.
    show(page, "challenges")
    page.wait_for_function("document.querySelectorAll('#challenges tbody tr').length === 2")
    assert "provider at fault" in page.inner_text("#disputes") and "_" not in page.inner_text("#disputes tbody")
    assert page.get_attribute("#challenges tbody tr .amount", "title").endswith(" ETH)")  # type: ignore[union-attr]
    # The browser's back button returns to the job; an address straight to a job opens it.
    page.go_back()
    page.wait_for_selector('.view[data-view="jobs"]', state="visible")
    page.goto(server + "/#/jobs/1")
    page.wait_for_function("document.querySelector('#job-detail h3')?.textContent === 'job 1: done, provider paid'")
    # Balances without a wallet say what to do; an unknown view is the offers.
    show(page, "balances")
    assert page.inner_text("#owed-escrow") == "connect a wallet" and page.is_disabled("#withdraw-escrow")
    page.goto(server + "/#/nowhere")
    page.wait_for_selector('.view[data-view="offers"]', state="visible")
    page.close()


def test_keccak_and_merkle_in_the_page_match_protocol(browser, server) -> None:  # type: ignore[no-untyped-def]
    page = open_page(browser, server)
    for size in (0, 1, 135, 136, 137, 1000):
        data = bytes((i * 7 + 3) & 255 for i in range(size))
        got = page.evaluate("(d) => merkle.bytesToHex(keccak256(Uint8Array.from(d)))", list(data))
        assert got == "0x" + keccak256(data).hex()
    for size in range(1, 10):
        outputs = [b"item-%d" % i for i in range(size)]
        tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])
        for index in range(size):
            proof = ["0x" + bytes(h).hex() for h in tree.proof(index)]
            args = [list(outputs[index]), index, size, proof, "0x" + bytes(tree.root).hex()]
            digest = page.evaluate("([b, i, n, p, r]) => merkle.verifyItem(Uint8Array.from(b), i, n, p, r)", args)
            assert digest == "0x" + keccak256(outputs[index]).hex()
            # The same proof does not pass for a neighbour's position or for other bytes.
            for bad in ([list(outputs[index]), (index + 1) % size, size, proof, args[4]],
                        [list(b"tampered"), index, size, proof, args[4]]):
                if bad[1] == index and bad[0] == args[0]:
                    continue
                with pytest.raises(playwright.Error):
                    page.evaluate("([b, i, n, p, r]) => merkle.verifyItem(Uint8Array.from(b), i, n, p, r)", bad)
    page.close()


def test_item_preview_in_the_page_reads_the_item_format_as_protocol_does(browser, server) -> None:  # type: ignore[no-untyped-def]
    page = open_page(browser, server)
    preview = "(b) => { try { return items.describe(items.decode(Uint8Array.from(b))); } catch (e) { return 'refused: ' + e.message; } }"
    arrays = {
        "float32 [2, 3]: 0.5, -1.25, 3, 4, 5, 6": np.array([[0.5, -1.25, 3], [4, 5, 6]], dtype=np.float32),
        "float16 [3]: 0.0999756, -2, 65504": np.array([0.1, -2, 65504], dtype=np.float16),
        "int64 [2]: -9007199254740993, 7": np.array([-(2**53) - 1, 7], dtype=np.int64),  # exact past 2**53
        "int32 [1]: -5": np.array([-5], dtype=np.int32),
        "uint8 [2, 2]: 0, 255, 1, 2": np.array([[0, 255], [1, 2]], dtype=np.uint8),
        "float32 [0]: ": np.zeros(0, dtype=np.float32),
        "uint8 [20]: 0, 1, 2, 3, 4, 5, 6, 7 … (20 values)": np.arange(20, dtype=np.uint8),
    }
    for expected, array in arrays.items():
        assert page.evaluate(preview, list(encode_output(array))) == expected
    # What decode_output refuses, the page refuses too, in a sentence.
    good = encode_output(np.arange(4, dtype=np.float32))
    for bad, why in ((good[:-1], "the values are 15 bytes; dtype float32 and shape [4] need 16"),
                     (b"raw bytes, no header", "no header line"),
                     (b"not json\n\x00", "the first line is not a JSON header"),
                     (b'{"dtype":"float64","shape":[1]}\n' + bytes(8), 'the header names dtype "float64"'),
                     (b'{"dtype":"uint8","shape":[-1]}\n', "the header's shape [-1] is not a list of sizes")):
        said = page.evaluate(preview, list(bad))
        assert said.startswith("refused: " + why), said
    page.close()


def test_a_wallet_connected_before_the_deployment_arrives_is_checked_against_it(browser, server, chain) -> None:  # type: ignore[no-untyped-def]
    # The page's first fetch of /deployment held back until the wallet is connected (a quick
    # click, a slow backend): the chain check waits for it instead of calling the network wrong.
    wallet = InjectedWallet(chain[0].rpc_url)
    page = browser.new_page()
    page.expose_function("__testWallet", wallet.handle)
    page.add_init_script(WALLET_SHIM)
    held: list = []
    page.route("**/deployment", lambda route: held.append(route))
    page.goto(server + "/")
    page.click("#connect")
    page.wait_for_function("document.getElementById('account').textContent.length > 0")
    assert held, "the page never asked for /deployment"
    for route in held:
        route.continue_()
    page.wait_for_function("document.getElementById('wallet-balance').textContent.length > 0")
    balance = page.inner_text("#wallet-balance")
    assert balance.endswith(" ETH") and "another network" not in balance, balance
    assert page.is_hidden("#chain-warning")
    page.close()


def test_empty_model_field_gives_a_readable_error(browser, server, chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    # Connecting changes the button and shows the account in full with its balance.
    assert page.inner_text("#connect") == "Wallet connected" and page.is_disabled("#connect")
    assert wallet.account.address.lower() in page.inner_text("#account")
    page.wait_for_function("document.getElementById('wallet-balance').textContent.endsWith(' ETH')")
    fill_job(page, tmp_path, "")
    page.click("#submit")
    status = wait_status(page, "error:")
    assert "choose a model" in status and "object" not in status
    assert "personal_sign" not in wallet.methods and not wallet.sent
    page.close()


def test_double_click_pays_once(browser, server, chain, session, market, hub_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    before = job_count(session)
    fill_job(page, tmp_path, hub_model)
    page.dblclick("#submit")
    page.wait_for_selector("#confirm-pay")
    # The quote is shown before the wallet is asked: ETH, provider, class, reputation, time.
    quote = page.inner_text("#quote")
    assert "ETH" in quote and market.provider.lower() in quote and "H100-SXM" in quote
    assert "reputation" in quote and "result due by" in quote
    assert page.is_disabled("#submit") and not wallet.sent
    page.dblclick("#confirm-pay")
    status = wait_status(page, "job \\d+ funded|error:")
    assert "error" not in status, status
    assert len(wallet.sent) == 1 and job_count(session) == before + 1
    job_id = int(status.split("job ")[-1].split(" funded")[0])
    page.wait_for_function(f"document.querySelector('#job-detail h3')?.textContent.includes('job {job_id}')")
    detail = page.inner_text("#job-detail")
    assert wallet.sent[0] in detail and market.provider.lower() in detail
    assert not page.is_disabled("#submit")  # enabled again once the submission ended
    page.close()
    job = httpx.get(f"{server}/jobs/{job_id}").json()  # what the chain recorded, via the indexer
    assert job["renter"] == wallet.account.address.lower() and job["funded_tx"] == wallet.sent[0]
    assert len(job["spec"]["inputs"]) == 3 and job["spec"]["priceWei"] == job["price"]


def test_wrong_chain_is_refused_and_switch_is_offered(browser, server, chain, session, hub_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url, chain_id=1)
    page = open_page(browser, server, wallet)
    before = job_count(session)
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    status = wait_status(page, "error:")
    assert "wrong network" in status and "chain 1" in status
    assert page.is_visible("#switch-chain")
    assert not wallet.sent and "personal_sign" not in wallet.methods and job_count(session) == before
    page.click("#switch-chain")
    wait_status(page, "wallet switched")
    assert wallet.chain_id == chain[1].chain_id and page.is_hidden("#chain-warning")
    page.close()


def test_refused_signature_moves_nothing(browser, server, chain, session, hub_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url, refuse_signing=True)
    page = open_page(browser, server, wallet)
    before, balance = job_count(session), wallet.web3.eth.get_balance(wallet.account.address)
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    status = wait_status(page, "error:")
    assert "sign-in refused" in status and "nothing was uploaded or paid" in status
    assert not wallet.sent and job_count(session) == before
    assert wallet.web3.eth.get_balance(wallet.account.address) == balance
    assert not page.is_disabled("#submit") and page.is_hidden("#quote")
    page.close()


def test_a_reverted_payment_is_reported_not_confirmed(  # type: ignore[no-untyped-def]
        browser, server, chain, session, hub_model, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url, gas_percent=60)  # runs out of gas on-chain
    page = open_page(browser, server, wallet)
    before = job_count(session)
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    page.click("#confirm-pay")
    status = wait_status(page, "error:|funded")
    assert "reverted" in status and "confirmed" not in status and "funded" not in status, status
    assert len(wallet.sent) == 1 and job_count(session) == before
    page.close()


def pay_from_page(page, tmp_path: Path, model: str) -> int:  # type: ignore[no-untyped-def]
    fill_job(page, tmp_path, model)
    page.click("#submit")
    page.click("#confirm-pay")
    status = wait_status(page, "job \\d+ funded|error:")
    assert "error" not in status, status
    return int(status.split("job ")[-1].split(" funded")[0])


def test_model_upload_from_the_page_and_inputs_the_model_refuses(  # type: ignore[no-untyped-def]
        browser, server, chain, session, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model")
    page.set_input_files("#model-file", str(junk))
    page.click("#model-upload")
    status = wait_status(page, "stored and loads|error:")
    # One sentence a person reads: what was refused and why, not the API's path and status code.
    assert "The backend refused the model:" in status and "/models" not in status and "422" not in status, status
    assert "object" not in status, status
    good = tmp_path / "tripler.pt"
    good.write_bytes(support.Tagged.torchscript(0.75))
    page.fill("#model-name", "tripler")
    page.set_input_files("#model-file", str(good))
    page.click("#model-upload")
    status = wait_status(page, "stored and loads|error:")
    assert "stored and loads as torchscript" in status, status
    model = "0x" + keccak256(good.read_bytes()).hex()
    assert page.input_value("#model") == model
    page.wait_for_selector(f'#model-list option[value="{model}"]', state="attached")
    assert "tripler" in page.inner_text("#models")
    # Raw bytes instead of encoded arrays: the dry run refuses them before anything is paid.
    before = job_count(session)
    fill_job(page, tmp_path, model, encoded=False)
    page.click("#submit")
    status = wait_status(page, "error:")
    assert "cannot run your inputs" in status and "nothing was paid" in status, status
    assert not wallet.sent and job_count(session) == before
    page.close()


def test_refund_button_only_where_due(browser, server, chain, session, market, hub_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    escrow = session.contract("JobEscrow")
    # Cancelling takes two steps: the request, then (the grace passed with no commit) the cancel.
    cancelled = pay_from_page(page, tmp_path, hub_model)
    page.wait_for_function("document.getElementById('refund')?.textContent === 'Request cancel'")
    page.click("#refund")
    page.wait_for_function("document.getElementById('job-detail').textContent.includes('Cancel requested: cancel "
                           "possible from')")
    assert read_job_view(escrow, cancelled).cancellableAt != 0
    session.advance(escrow.functions.cancelGrace().call())
    page.wait_for_function("document.getElementById('refund')?.textContent === 'Cancel and refund'")
    page.click("#refund")
    page.wait_for_function("document.querySelector('#job-detail h3 .job-state')?.textContent.startsWith('refunded')")
    assert read_job_view(escrow, cancelled).status == JobStatus.REFUNDED

    job_id = pay_from_page(page, tmp_path, hub_model)
    page.wait_for_function("document.getElementById('refund')?.textContent === 'Request cancel'")
    # A failure the provider reports off-chain: the page says how to take the money back.
    report = httpx.post(f"{server}/jobs/{job_id}/failure", json={"jobId": job_id, "kind": "bad-input", "error": "no GPU"},
                        headers={"Authorization": f"Bearer {token_for(server, support.anvil_key(1))}"})
    assert report.status_code == 204, report.text
    page.wait_for_function("document.getElementById('refund-pointer')?.textContent.includes("
                           f"'The provider could not run this job') && "
                           f"document.getElementById('refund-pointer').textContent.includes('unchained job refund {job_id}')")
    session.advance(3600 + 1)
    page.wait_for_function("document.getElementById('refund')?.textContent === 'Refund (deadline passed)'")
    page.click("#refund")
    page.wait_for_function("document.querySelector('#job-detail h3 .job-state')?.textContent.startsWith('refunded')")
    assert read_job_view(escrow, job_id).status == JobStatus.REFUNDED
    page.close()


def test_failed_job_shows_its_reason_and_the_refund_is_withdrawn(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market, hub_model, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    job_id = pay_from_page(page, tmp_path, hub_model)
    escrow = session.contract("JobEscrow")
    session.send(escrow.functions.failJob(read_job(escrow, job_id).as_tuple(), "model does not load: bad magic"), market.provider)
    page.wait_for_function("document.querySelector('#job-detail h3 .job-state')?.textContent.startsWith('refunded')")
    detail = page.inner_text("#job-detail")
    assert "failed: model does not load: bad magic" in detail
    # The job says what it ran (the hub's name for its model, its inputs) and where the money is.
    assert "doubler (torchscript)" in detail and "3 input files" in detail, detail
    pointer = page.inner_text("#refund-pointer")
    assert "This job failed" in pointer and "refunded to you" in pointer and "Your balances" in pointer, pointer
    assert "unchained withdraw" in pointer, pointer
    owed = escrow.functions.owedTo("0x" + "00" * 20, wallet.account.address).call()
    # Rounded for people, the exact wei on hover.
    page.click("#refund-pointer a[href='#/balances']")  # the pointer leads to the balances
    page.wait_for_function(f"document.querySelector('#owed-escrow .amount')?.title.startsWith('{owed} wei')")
    page.click("#withdraw-escrow")
    page.wait_for_function("document.getElementById('owed-escrow').textContent === '0 ETH'")
    assert escrow.functions.owedTo("0x" + "00" * 20, wallet.account.address).call() == 0 and len(wallet.sent) == 2
    page.close()


def test_lease_starts_shows_time_left_stops_and_is_withdrawn(browser, server, chain, session, market) -> None:  # type: ignore[no-untyped-def]
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet, view="leases")
    page.on("dialog", lambda dialog: dialog.accept())  # the page confirms the lease's cost
    leases = session.contract("LeaseManager")
    lease_id = leases.functions.leaseCount().call() + 1
    page.wait_for_selector(f'#lease-provider option[value="{market.provider2.lower()}"]', state="attached")
    page.select_option("#lease-provider", market.provider2.lower())
    page.fill("#lease-hours", "2")
    page.fill("#lease-key", SSH_KEY)
    page.click("#lease-start")
    row = f'#leases tr[data-lease="{lease_id}"]'
    page.wait_for_selector(row, timeout=15_000)
    text = page.inner_text(row)
    assert "active" in text and re.search(r"1 h 59 min|2 h 0 min", text), text
    page.click(f"{row} .stop-lease")
    page.wait_for_function(f"document.querySelector('{row}')?.textContent.includes('ended') || "
                           "document.getElementById('status').textContent.includes('error')", timeout=15_000)
    assert "error" not in page.inner_text("#status"), page.inner_text("#status")
    owed = leases.functions.owedTo(wallet.account.address).call()
    assert owed > 0
    show(page, "balances")
    page.wait_for_function(f"document.querySelector('#owed-leases .amount')?.title.startsWith('{owed} wei')")
    page.click("#withdraw-leases")
    page.wait_for_function("document.getElementById('owed-leases').textContent === '0 ETH'")
    assert leases.functions.owedTo(wallet.account.address).call() == 0
    page.close()


def test_job_progresses_on_screen_and_results_verify_in_the_page(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market, hub_model, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    page.click("#confirm-pay")
    status = wait_status(page, "job \\d+ funded|error:")
    assert "error" not in status, status
    job_id = int(status.split("job ")[-1].split(" funded")[0])
    heading = "document.querySelector('#job-detail h3')?.textContent"
    page.wait_for_function(f"{heading}?.endsWith(': paid, waiting for the provider')")
    assert page.inner_text("#job-detail .progress") == \
        "✓ paid → ○ taken by the provider → ○ result delivered → ○ provider paid"
    row_status = f"document.querySelector('#jobs tr[data-job=\"{job_id}\"] .job-status')?.textContent"

    # Item files (README "Item files"): the page previews them; the last is not one.
    outputs = [encode_output(np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 + 0.25),
               encode_output(np.array([-7, 3], dtype=np.int64)), b"browser-output-2"]
    tree = support.commit_outputs(session, market.provider, job_id, outputs)
    page.wait_for_function(f"{heading}?.endsWith(': result delivered') && {row_status}?.startsWith('result delivered')",
                           timeout=15_000)
    token = token_for(server, support.anvil_key(1))  # the market's first provider
    for index, data in enumerate(outputs):
        proof = ",".join("0x" + bytes(h).hex() for h in tree.proof(index))
        response = httpx.put(f"{server}/jobs/{job_id}/outputs/{index}", content=data,
                             headers={"Authorization": f"Bearer {token}", "X-Merkle-Proof": proof})
        assert response.status_code == 201, response.text
    escrow = session.contract("JobEscrow")
    session.advance(escrow.functions.challengeWindow().call() + 1)
    session.send(escrow.functions.finalize(read_job(escrow, job_id).as_tuple()), market.renter)
    page.wait_for_function(f"{heading}?.endsWith(': done, provider paid') && {row_status}?.startsWith('done, provider paid')",
                           timeout=15_000)

    checks = "Array.from(document.querySelectorAll('#result-items td.check'), (td) => td.textContent)"
    page.wait_for_function(f"{checks}.length === 3 && {checks}.every((t) => t === 'not checked')")
    page.click("#verify")
    page.wait_for_function(f"{checks}.every((t) => t === 'verified')", timeout=15_000)
    assert "root checked against chain" in page.inner_text("#root-source")  # the job hashes to its slot
    previews = page.evaluate("Array.from(document.querySelectorAll('#result-items td.preview'), (td) => td.textContent)")
    assert previews[0] == "float32 [3, 4]: 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75 … (12 values)", previews
    assert previews[1] == "int64 [2]: -7, 3", previews
    assert previews[2].startswith("not an item file: no header line"), previews
    # Everything at once: one zip of the bytes the page verified; the terminal line fetches and verifies them.
    assert page.inner_text("#save-all") == "Download all 3 verified items (zip)"
    assert unzipped(page, job_id) == {f"item-{i:06d}.out": o for i, o in enumerate(outputs)}
    with page.expect_download() as first:
        page.click('#result-items tr[data-item="0"] a.save-item')
    assert first.value.suggested_filename == f"job{job_id}-item-000000.out"
    assert f"unchained job result {job_id} --keystore" in page.inner_text("#download-all")
    assert "0x" + bytes(tree.root).hex() in page.inner_text("#root-source")

    # A server (or anyone on the way) that alters one item's bytes: that item is not verified.
    page.route(f"**/jobs/{job_id}/outputs/1", lambda route: route.fulfill(
        status=200, body=b"tampered-output", headers={"Content-Type": "application/octet-stream"}))
    page.click("#verify")
    page.wait_for_function(f"{checks}[1].startsWith('NOT verified')", timeout=15_000)
    verdicts = page.evaluate(checks)
    assert verdicts[0] == verdicts[2] == "verified" and "do not rebuild the on-chain root" in verdicts[1]
    # The zip holds only what verified: the altered item is left out, and the page says so.
    assert page.inner_text("#save-all") == "Download all 2 verified items (zip)"
    assert "1 not verified, left out" in page.inner_text("#download-all")
    assert unzipped(page, job_id) == {"item-000000.out": outputs[0], "item-000002.out": outputs[2]}
    page.close()


def unzipped(page, job_id: int) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    """Clicks the zip button and reads the zip back with Python's zipfile."""
    with page.expect_download() as download:
        page.click("#save-all")
    assert download.value.suggested_filename == f"job-{job_id}-results.zip"
    with zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes())) as archive:
        assert archive.testzip() is None  # every CRC checks
        return {name: archive.read(name) for name in archive.namelist()}



def test_lease_messages_in_the_page_match_protocol(browser, server, chain) -> None:  # type: ignore[no-untyped-def]
    page = open_page(browser, server)
    domain = LeaseDomain(chain[1].chain_id, chain[1].contract("LeaseManager").address)
    page_domain = f"lease.domain({domain.chain_id}, '{domain.lease_manager}')"
    for what in (LeaseKey(7, SSH_KEY), LeaseKey(2**40, "ssh-rsa AAAAB3Nza== x@y", "0x" + "c0ffee" * 10 + "0123"),
                 LeaseAccess(3, "gpu.example.org", 40022, "root", FINGERPRINT)):
        got = page.evaluate(f"(m) => lease.typedHash(lease.typedData('{type(what).__name__}', {page_domain}, m))",
                            what.message())
        assert got == "0x" + typed_hash(domain, what).hex()
    for text in (SSH_KEY, f"  {SSH_KEY}\n", "ssh-ed25519 AAAA", "-----BEGIN OPENSSH PRIVATE KEY-----",
                 f"{SSH_KEY}\n{SSH_KEY}", 'command="sh" ' + SSH_KEY, "ssh-ed25519 AAAA" + "A" * 9000, "ssh-dss AAAA"):
        try:
            expected: str | None = normalize_ssh_key(text)
        except LeaseMessageError:
            expected = None
        got = page.evaluate("(t) => { try { return lease.normalizeSshKey(t); } catch (e) { return null; } }", text)
        assert got == expected, text
    page.close()


def test_lease_from_the_page_binds_a_signed_key_and_shows_verified_connection_details(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet, view="leases")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    leases = session.contract("LeaseManager")
    domain = LeaseDomain(session.web3.eth.chain_id, leases.address)
    page.wait_for_selector(f'#lease-provider option[value="{market.provider2.lower()}"]', state="attached")
    page.select_option("#lease-provider", market.provider2.lower())

    # A private key (or anything the provider would refuse) is refused before the wallet is asked.
    page.fill("#lease-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA=")
    page.click("#lease-start")
    status = wait_status(page, "error:")
    assert "private key" in status and "nothing was paid" in status, status
    assert not dialogs and not wallet.sent and "eth_signTypedData_v4" not in wallet.methods

    lease_id = leases.functions.leaseCount().call() + 1
    page.fill("#lease-key", SSH_KEY + "\n")
    page.click("#lease-start")
    wait_status(page, f"lease {lease_id}: SSH key bound|error:(?!.*private key)")
    assert f"lease {lease_id}: SSH key bound" in page.inner_text("#status"), page.inner_text("#status")
    assert len(dialogs) == 1 and len(wallet.sent) == 1
    row = httpx.get(f"{server}/leases/{lease_id}").json()
    assert row["ssh_public_key"] == SSH_KEY
    verify(domain, LeaseKey(lease_id, SSH_KEY), bytes.fromhex(row["key_signature"][2:]), wallet.account.address)

    cell = f'#leases tr[data-lease="{lease_id}"] td.connection'
    deadline = leases.functions.deliveryDeadline(lease_id).call()
    page.wait_for_function(f"document.querySelector('{cell}')?.textContent.includes('not offered yet: the provider must offer by')")
    assert eth_date(deadline) in page.inner_text(cell)

    # The provider hands the machine over as provider_agent does: signed details, digest on-chain.
    provider = support.anvil_key(2)
    assert provider.address.lower() == market.provider2.lower()
    access = LeaseAccess(lease_id, "gpu-7.example.org", 40022, "lease7", FINGERPRINT)
    body = {**access.message(), "signature": "0x" + sign(domain, access, provider.key).hex()}
    del body["leaseId"]
    assert httpx.put(f"{server}/leases/{lease_id}/access", json=body).status_code == 204
    session.send(leases.functions.offerAccess(lease_id, typed_hash(domain, access)), market.provider2)
    page.wait_for_function(f"document.querySelector('{cell} .access-check')?.textContent.startsWith('verified in this page')",
                           timeout=15_000)
    # Offered is not delivered: the renter certifies delivery from its wallet once it logged in, and
    # until then stopping refunds everything.
    delivery = page.inner_text(f"{cell} .delivery")
    assert delivery.startswith("offered: log in") and "stopping refunds the whole lease" in delivery, delivery
    assert eth_date(leases.functions.confirmDeadline(lease_id).call()) in delivery
    assert not leases.functions.isDelivered(lease_id).call()
    page.click(f"{cell} .confirm-lease")
    page.wait_for_function(f"document.querySelector('{cell} .delivery')?.textContent === 'delivered: you confirmed your login'",
                           timeout=15_000)
    assert leases.functions.isDelivered(lease_id).call() and leases.functions.getDelivery(lease_id).call().confirmedAt > 0
    assert page.get_attribute(f"{cell} .ssh-command .copy", "data-copy") == "ssh -p 40022 lease7@gpu-7.example.org"
    assert FINGERPRINT in page.inner_text(cell) and SSH_KEY in page.inner_text(cell)

    # A backend (or anyone on the way) that swaps the host: the page does not call it verified.
    def swapped(route):  # type: ignore[no-untyped-def]
        rows = route.fetch().json()
        for r in rows:
            if r["lease_id"] == lease_id:
                r["access"]["host"] = "evil.example.org"
        route.fulfill(json=rows)
    page.route("**/leases?renter=*", swapped)
    page.wait_for_function(f"document.querySelector('{cell} .access-check')?.textContent.startsWith('NOT verified')",
                           timeout=15_000)
    page.unroute("**/leases?renter=*")
    page.click(f'#leases tr[data-lease="{lease_id}"] .stop-lease')  # gives provider2's GPU back
    page.wait_for_function(f"document.querySelector('#leases tr[data-lease=\"{lease_id}\"]')?.textContent.includes('ended')",
                           timeout=15_000)
    page.close()


def eth_date(unix: int) -> str:
    """What the page shows for a time (eth.date)."""
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_a_refused_key_signature_leaves_the_lease_paid_and_the_key_can_be_bound_from_its_row(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    wallet = InjectedWallet(chain[0].rpc_url, refuse_signing=True)
    page = open_page(browser, server, wallet, view="leases")
    page.on("dialog", lambda dialog: dialog.accept())
    leases = session.contract("LeaseManager")
    lease_id = leases.functions.leaseCount().call() + 1
    page.wait_for_selector(f'#lease-provider option[value="{market.provider2.lower()}"]', state="attached")
    page.select_option("#lease-provider", market.provider2.lower())
    page.fill("#lease-key", SSH_KEY)
    page.click("#lease-start")
    status = wait_status(page, "error:")
    assert f"lease {lease_id}: the wallet did not sign the SSH key" in status and "bind the key from its row" in status
    # The lease is paid on-chain; the backend lists it once its indexer has seen LeaseStarted.
    row = wait_until(lambda: (r := httpx.get(f"{server}/leases/{lease_id}")).status_code == 200 and r.json(),
                     30, f"lease {lease_id} indexed")
    assert row["ssh_public_key"] is None
    wallet.refuse_signing = False  # the renter tries again
    page.click(f'#leases tr[data-lease="{lease_id}"] .bind-key')
    wait_status(page, f"lease {lease_id}: SSH key bound")
    assert httpx.get(f"{server}/leases/{lease_id}").json()["ssh_public_key"] == SSH_KEY
    page.wait_for_function(f"document.querySelector('#leases tr[data-lease=\"{lease_id}\"]')?.textContent.includes('key bound')")
    page.click(f'#leases tr[data-lease="{lease_id}"] .stop-lease')  # gives provider2's GPU back
    page.wait_for_function(f"document.querySelector('#leases tr[data-lease=\"{lease_id}\"]')?.textContent.includes('ended')",
                           timeout=15_000)
    page.close()


# ---- nothing off-chain is borrowed: roots from the chain, signatures on the right chain ----

CHECKS = "Array.from(document.querySelectorAll('#result-items td.check'), (td) => td.textContent)"


def committed_job(server: str, session, market, name: bytes, outputs: list[bytes]) -> tuple[int, MerkleTree]:  # type: ignore[no-untyped-def]
    """A job of the wallet's account (the market's renter) that the provider committed, once the
    backend has indexed the commit."""
    job_id = support.funded_job(session, market.renter, market.provider, keccak256(name), 10**15)
    tree = support.commit_outputs(session, market.provider, job_id, outputs)
    wait_until(lambda: httpx.get(f"{server}/jobs/{job_id}").json().get("status") == "committed", 30,
               f"job {job_id}'s commit indexed")
    return job_id, tree


def serve_forged_result(page, server: str, job_id: int, count: int) -> str:  # type: ignore[no-untyped-def]
    """A backend (or anyone on the way) that serves another result for the job: items, proofs and
    root all consistent with each other, none with the chain. Returns the forged root."""
    forged = [b"forged-output-%d" % i for i in range(count)]
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in forged])
    doc = httpx.get(f"{server}/jobs/{job_id}/result").json()
    doc.update(output_root="0x" + bytes(tree.root).hex(), item_count=count, items=[
        {"index": i, "digest": "0x" + keccak256(o).hex(), "proof": ["0x" + bytes(h).hex() for h in tree.proof(i)],
         "size": len(o), "url": None} for i, o in enumerate(forged)])
    page.route(f"**/jobs/{job_id}/result", lambda route: route.fulfill(json=doc))
    serve_outputs(page, job_id, forged)
    return doc["output_root"]


def serve_outputs(page, job_id: int, outputs: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    page.route(re.compile(rf".*/jobs/{job_id}/outputs/\d+$"), lambda route: route.fulfill(
        status=200, body=outputs[int(route.request.url.rsplit("/", 1)[1])],
        headers={"Content-Type": "application/octet-stream"}))


def verify_in_page(page, job_id: int) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """Opens the job, clicks "verify" and returns what the page says of the root and each item."""
    page.wait_for_selector(f'#jobs tr[data-job="{job_id}"]', timeout=15_000)
    page.click(f'#jobs tr[data-job="{job_id}"] td:first-child')
    # Forgets the last check, and waits until the page shows none: no earlier verdict is read below.
    page.evaluate(f"state.checks.delete({job_id}); state.shownJob = ''")
    page.wait_for_function(f"document.querySelector('#job-detail h3')?.textContent.startsWith('job {job_id}:') && "
                           f"document.getElementById('root-source')?.textContent === '' && "
                           f"{CHECKS}.every((t) => t === 'not checked')")
    page.click("#verify")
    page.wait_for_function(f"document.getElementById('root-source')?.textContent.length > 0 && "
                           f"{CHECKS}.length > 0 && {CHECKS}.every((t) => t !== 'not checked')", timeout=20_000)
    return page.inner_text("#root-source"), page.evaluate(CHECKS)


def test_a_forged_self_consistent_result_is_refused_against_the_chain(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    outputs = [b"honest-%d" % i for i in range(3)]
    job_id, tree = committed_job(server, session, market, b"spec-forged-wallet", outputs)
    page = open_page(browser, server, InjectedWallet(chain[0].rpc_url))
    forged_root = serve_forged_result(page, server, job_id, len(outputs))
    source, checks = verify_in_page(page, job_id)
    assert source.startswith("REFUSED") and forged_root in source and "0x" + bytes(tree.root).hex() in source, source
    assert all(c.startswith("NOT verified") for c in checks), checks
    assert not page.query_selector("#save-all")  # no zip of what did not verify
    # The backend also lies about the job (its root) to make its result look committed: the job
    # no longer hashes to the chain's slot, and nothing is verified.
    real_job = httpx.get(f"{server}/jobs/{job_id}").json()
    page.route(f"**/jobs/{job_id}", lambda route: route.fulfill(json={**real_job, "output_root": forged_root}))
    page.evaluate("state.shownJob = ''")
    source, checks = verify_in_page(page, job_id)
    assert "does not match the chain's hash" in source and source.startswith("cannot verify"), source
    assert not any(c == "verified" for c in checks), checks
    page.close()


def test_without_a_wallet_nothing_is_verified_unless_a_read_only_rpc_gives_the_chain(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    outputs = [b"rpc-checked-%d" % i for i in range(3)]
    job_id, tree = committed_job(server, session, market, b"spec-forged-no-wallet", outputs)
    page = open_page(browser, server)  # no wallet at all
    serve_forged_result(page, server, job_id, len(outputs))
    source, checks = verify_in_page(page, job_id)
    assert source.startswith("cannot verify") and "read-only RPC URL" in source, source
    assert all(c.startswith("NOT verified") for c in checks), checks
    # The renter gives the page a node of its own: the forged result is refused against it.
    page.fill("#rpc-url", chain[0].rpc_url)
    source, checks = verify_in_page(page, job_id)
    assert source.startswith("REFUSED") and chain[0].rpc_url in source, source
    assert all("do not rebuild the on-chain root" in c for c in checks), checks
    # The real result (the provider's uploads, the backend's own answer): verified through that node.
    token = token_for(server, support.anvil_key(1))
    for index, data in enumerate(outputs):
        proof = ",".join("0x" + bytes(h).hex() for h in tree.proof(index))
        response = httpx.put(f"{server}/jobs/{job_id}/outputs/{index}", content=data,
                             headers={"Authorization": f"Bearer {token}", "X-Merkle-Proof": proof})
        assert response.status_code == 201, response.text
    page.unroute(f"**/jobs/{job_id}/result")
    page.unroute(re.compile(rf".*/jobs/{job_id}/outputs/\d+$"))
    serve_outputs(page, job_id, outputs)  # the bytes as served to a signed-in renter (no wallet here)
    source, checks = verify_in_page(page, job_id)
    assert source == f"root checked against chain {chain[1].chain_id}, read through {chain[0].rpc_url}: " \
                     f"0x{bytes(tree.root).hex()}", source
    assert checks == ["verified"] * 3, checks
    # A node that does not answer: nothing is verified.
    page.fill("#rpc-url", "http://127.0.0.1:1")
    source, checks = verify_in_page(page, job_id)
    assert source.startswith("cannot verify") and "verified" not in checks, source
    page.close()


def challenge_shown(page, job_id: int, starts: str) -> str:  # type: ignore[no-untyped-def]
    """Opens the job and returns what its challenge control says, once it starts with `starts`."""
    page.goto(page.url.split("#")[0] + f"#/jobs/{job_id}")
    page.wait_for_function(f"document.querySelector('#job-detail h3')?.textContent.startsWith('job {job_id}:') && "
                           f"document.getElementById('challenge')?.textContent.trim().startsWith({json.dumps(starts)})",
                           timeout=15_000)
    return page.inner_text("#challenge")


def test_a_result_is_challenged_from_the_page_and_it_says_why_not_where_it_cannot_be(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    manager, escrow = session.contract("ChallengeManager"), session.contract("JobEscrow")
    waiting = support.funded_job(session, market.renter, market.provider, keccak256(b"spec-challenge-waiting"), 10**15)
    outputs = [b"challenged-%d" % i for i in range(3)]
    job_id, tree = committed_job(server, session, market, b"spec-challenge", outputs)
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    said = challenge_shown(page, waiting, "nothing to challenge yet")
    assert said == "nothing to challenge yet: the provider has not delivered a result", said
    bond = manager.functions.minBond().call()
    said = challenge_shown(page, job_id, f"Challenge this result (bond {Web3.from_wei(bond, 'ether').normalize():f} ETH)")
    assert "the provider must prove 44 random items on-chain or be slashed" in said, said
    page.click("#challenge-job")
    status = wait_status(page, f"challenge job {job_id}'s result: transaction|error:")
    assert "error" not in status, status
    challenge_id = manager.functions.activeJobChallenge(job_id).call()
    assert challenge_id != 0 and manager.functions.challenge(challenge_id).call().bond == bond
    assert read_job_view(escrow, job_id).frozen
    challenge_shown(page, job_id, f"challenge {challenge_id} of this result is open: the provider must answer by")
    page.wait_for_function("document.querySelector('#job-detail h3 .job-state')?.textContent === "
                           "'result delivered, on hold while challenged'", timeout=15_000)
    # The provider answers; the renter sends the answer to the committee from the page.
    indices = manager.functions.challengeIndices(challenge_id).call()
    session.send(manager.functions.respond(challenge_id, [keccak256(outputs[i]) for i in indices],
                                           [list(tree.proof(i)) for i in indices]), market.provider)
    said = challenge_shown(page, job_id, "Send the provider's answer to the dispute committee")
    assert f"challenge {challenge_id} was answered; until" in said and "staked verifiers" in said, said
    page.click("#challenge-job")
    wait_status(page, f"escalate challenge {challenge_id}: transaction")
    escalated = manager.functions.challenge(challenge_id).call()
    assert escalated.status == 3 and escalated.disputeId != 0  # Escalated, a dispute open
    challenge_shown(page, job_id, f"challenge {challenge_id} of this result is with the dispute committee")
    show(page, "challenges")
    page.wait_for_selector(f"#challenges tbody tr td:text-is('{challenge_id}')", timeout=15_000)

    # Unanswered past its deadline: the renter claims the timeout; the refund and the bond come
    # back to its balances and are withdrawn from there.
    silent_provider = session.accounts[9]  # a provider of its own: the slash leaves the market's stakes alone
    session.send(session.contract("Staking").functions.stake(), silent_provider, value=2 * 10**18)
    session.send(session.contract("ProviderRegistry").functions.register(
        support.bytes32("L4"), [keccak256(b"gpu-silent")], 10**15, 10**12, "meta://silent"), silent_provider)
    silent = support.funded_job(session, market.renter, silent_provider, keccak256(b"spec-challenge-silent"), 10**15)
    support.commit_outputs(session, silent_provider, silent, [b"silent-0", b"silent-1"])
    wait_until(lambda: httpx.get(f"{server}/jobs/{silent}").json().get("status") == "committed", 30, "the commit indexed")
    challenge_shown(page, silent, "Challenge this result")
    page.click("#challenge-job")
    wait_status(page, f"challenge job {silent}'s result: transaction")
    timed_out = manager.functions.activeJobChallenge(silent).call()
    session.advance(manager.functions.responseWindow().call() + 1)
    said = challenge_shown(page, silent, "The provider did not answer: slash it and refund me")
    page.click("#challenge-job")
    wait_status(page, f"claim the timeout of challenge {timed_out}: transaction")
    assert manager.functions.challenge(timed_out).call().status == 4  # ProviderFaulted
    assert read_job_view(escrow, silent).status == JobStatus.REFUNDED
    owed = manager.functions.owedTo(wallet.account.address).call()
    assert owed >= bond
    show(page, "balances")
    page.wait_for_function(f"document.querySelector('#owed-challenges .amount')?.title.startsWith('{owed} wei')")
    page.click("#withdraw-challenges")
    page.wait_for_function("document.getElementById('owed-challenges').textContent === '0 ETH'")
    assert manager.functions.owedTo(wallet.account.address).call() == 0

    # Past its challenge window a result can no longer be challenged, and the page says since when.
    late, _ = committed_job(server, session, market, b"spec-challenge-late", [b"late-0"])
    session.advance(escrow.functions.challengeWindow().call() + 1)
    said = challenge_shown(page, late, "the challenge window closed at")
    assert said.endswith("this result can no longer be challenged") and not page.query_selector("#challenge-job"), said
    page.close()


def test_model_upload_on_another_chain_asks_to_switch_before_any_signature(  # type: ignore[no-untyped-def]
        browser, server, chain, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url, chain_id=1, refuse_switch=True)
    page = open_page(browser, server, wallet)
    model = tmp_path / "quintupler.pt"
    model.write_bytes(support.Tagged.torchscript(1.25))
    page.set_input_files("#model-file", str(model))
    page.click("#model-upload")
    status = wait_status(page, "stored and loads|error:")
    assert f"did not switch to chain {chain[1].chain_id}" in status and "nothing was signed" in status, status
    assert "wallet_switchEthereumChain" in wallet.methods and not wallet.signed_on
    assert page.is_visible("#switch-chain")
    wallet.refuse_switch = False  # the renter accepts the switch this time
    page.click("#model-upload")
    status = wait_status(page, "stored and loads|error:(?!.*did not switch)")
    assert "stored and loads as torchscript" in status, status
    assert wallet.signed_on == [chain[1].chain_id]  # asked to sign only once switched
    assert wallet.methods[:wallet.methods.index("personal_sign")].count("wallet_switchEthereumChain") == 2
    page.close()


def test_the_payment_is_built_in_the_page_not_taken_from_the_backend(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market, hub_model, tmp_path) -> None:
    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)
    thief = session.accounts[9]
    before, stolen = job_count(session), session.web3.eth.get_balance(thief)
    # A backend that hands out a funding transaction to its own address.
    page.route("**/funding-tx", lambda route: route.fulfill(json={
        "to": thief, "data": "0x", "value": str(10**18), "chain_id": chain[1].chain_id}))
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    page.click("#confirm-pay")
    page.wait_for_function("/funded|error:|indexer has not seen/.test(document.getElementById('status').textContent)",
                           timeout=45_000)
    status = page.inner_text("#status")
    assert session.web3.eth.get_balance(thief) == stolen, status
    assert "error" not in status and job_count(session) == before + 1, status
    job = read_job_view(session.contract("JobEscrow"), before + 1)
    assert job.status == JobStatus.FUNDED
    funded = httpx.get(f"{server}/jobs/{before + 1}").json()
    assert funded["spec"]["provider"] == market.provider.lower() and funded["renter"] == wallet.account.address.lower()

    # A backend that stores another spec than the page sent (another model, say): refused unpaid.
    def swapped(route):  # type: ignore[no-untyped-def]
        spec = json.loads(route.request.post_data)
        response = httpx.post(f"{server}/jobs/specs", json={**spec, "tolerancePpm": 500_000})
        route.fulfill(status=response.status_code, json=response.json())
    page.route("**/jobs/specs", swapped)
    fill_job(page, tmp_path, hub_model)
    page.click("#submit")
    page.click("#confirm-pay")
    status = wait_status(page, "error:|funded")
    assert "the backend stored spec" in status and "nothing was paid" in status, status
    assert len(wallet.sent) == 1 and job_count(session) == before + 1
    page.close()


def test_slash_call_in_the_page_encodes_as_the_abi_does(browser, server, session) -> None:  # type: ignore[no-untyped-def]
    from eth_abi import encode

    page = open_page(browser, server)
    escrow = session.contract("JobEscrow")
    job = {"job_id": 7, "renter": "0x" + "ab" * 20, "provider": "0x" + "cd" * 20, "token": "0x" + "00" * 20,
           "price": 10**15, "spec_hash": "0x" + "11" * 32, "deadline": 1_900_000_000, "output_root": "0x" + "22" * 32,
           "item_count": 3, "result_digest": "0x" + "33" * 32}
    signed = {"jobId": 7, "outputRoot": "0x" + "44" * 32, "itemCount": 2, "resultDigest": "0x" + "55" * 32,
              "commitBy": 1_899_999_000, "provider": job["provider"], "signature": "0x" + "66" * 64 + "1b"}
    script = """([job, signed]) => { const { type, values } = signedResultTuple(signed);
        const fn = `slashSignedResult(${JOB_TUPLE},${type},bytes)`;
        return [fn, eth.encodeWithBytes(fn, [...jobWords(job), ...values], signed.signature)]; }"""
    job_tuple = (7, *(Web3.to_checksum_address(job[k]) for k in ("renter", "provider", "token")), 10**15, bytes.fromhex("11" * 32), 1_900_000_000,
                 bytes.fromhex("22" * 32), 3, bytes.fromhex("33" * 32))
    result = (7, bytes.fromhex("44" * 32), 2, bytes.fromhex("55" * 32), 1_899_999_000)
    fn, data = page.evaluate(script, [job, signed])
    # The struct the deployed JobEscrow takes (commitBy last): the page's call data is web3's.
    assert data == escrow.encode_abi("slashSignedResult", args=[job_tuple, result, bytes.fromhex(signed["signature"][2:])])
    types = ["(uint256,address,address,address,uint256,bytes32,uint64,bytes32,uint256,bytes32)",
             "(uint256,bytes32,uint256,bytes32,uint64)", "bytes"]
    assert fn == f"slashSignedResult({','.join(types)})"
    assert data == "0x" + keccak256(fn.encode())[:4].hex() + encode(
        types, [job_tuple, result, bytes.fromhex(signed["signature"][2:])]).hex()
    # A signed result without commitBy is no struct the escrow takes: refused, not sent half-built.
    refused = page.evaluate(f"(signed) => {{ try {{ ({script})([{json.dumps(job)}, signed]); return ''; }} "
                            "catch (e) { return e.message; } }", {k: v for k, v in signed.items() if k != "commitBy"})
    assert "lacks commitBy" in refused, refused
    page.close()


def test_signed_result_slash_control_shows_when_and_why_and_slashes_from_the_wallet(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    escrow, staking = session.contract("JobEscrow"), session.contract("Staking")
    domain = EscrowDomain(chain[1].chain_id, escrow.address)
    provider_token = token_for(server, support.anvil_key(1))

    def signed_job(name: bytes, outputs: list[bytes]) -> int:
        job_id = support.funded_job(session, market.renter, market.provider, keccak256(name), 10**15)
        wait_until(lambda: httpx.get(f"{server}/jobs/{job_id}").status_code == 200, 30, f"job {job_id} indexed")
        tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])
        result = JobResult(job_id, "0x" + bytes(tree.root).hex(), len(outputs), "0x" + keccak256(b"".join(outputs)).hex(),
                           session.now() + 60)  # a commit promised well before the deadline: binding
        body = SignedJobResult.sign(result, domain, support.anvil_key(1)).to_json()
        response = httpx.put(f"{server}/jobs/{job_id}/signed-result", json=body,
                             headers={"Authorization": f"Bearer {provider_token}"})
        assert response.status_code == 200, response.text
        return job_id

    wallet = InjectedWallet(chain[0].rpc_url)
    page = open_page(browser, server, wallet)

    def slash_shown(job_id: int, starts: str) -> str:
        page.wait_for_selector(f'#jobs tr[data-job="{job_id}"]', timeout=15_000)
        page.click(f'#jobs tr[data-job="{job_id}"] td:first-child')
        page.wait_for_function(f"document.querySelector('#job-detail h3')?.textContent.startsWith('job {job_id}:') && "
                               f"document.getElementById('slash')?.textContent.trim().startsWith({json.dumps(starts)})",
                               timeout=15_000)
        return page.inner_text("#slash")

    # Signed, not committed, before the deadline: not yet, and the page says from when.
    differs = signed_job(b"spec-slash-differs", [b"promised-0", b"promised-1"])
    assert "slashable from the deadline" in slash_shown(differs, "signed but not committed yet")
    assert not page.query_selector("#slash-signed")
    # Committed as signed: nothing to slash.
    kept = signed_job(b"spec-slash-kept", [b"kept-0"])
    support.commit_outputs(session, market.provider, kept, [b"kept-0"])
    slash_shown(kept, "the committed result is the one the provider signed")
    # Committed otherwise: the button, with what differs.
    support.commit_outputs(session, market.provider, differs, [b"other-0", b"other-1"])
    assert "not the" in slash_shown(differs, "Slash the provider")
    # Signed and never committed: available once the deadline has passed, unless the renter
    # cancelled the job.
    missing = signed_job(b"spec-slash-missing", [b"never-0"])
    slash_shown(missing, "signed but not committed yet")
    cancelled = signed_job(b"spec-slash-cancelled", [b"never-1"])
    session.send(escrow.functions.requestCancel(read_job(escrow, cancelled).as_tuple()), market.renter)
    session.advance(escrow.functions.cancelGrace().call())
    session.send(escrow.functions.cancel(read_job(escrow, cancelled).as_tuple()), market.renter)
    session.advance(3600 + 1)
    assert "did not commit it by the deadline" in slash_shown(missing, "Slash the provider")
    slash_shown(cancelled, "you cancelled this job")
    # A result signed with a commit time (commitBy) at or after the deadline: a missing commit
    # is not slashable (the page reads the field when the signed JSON has it).
    deadline = httpx.get(f"{server}/jobs/{missing}").json()["deadline"]
    real = httpx.get(f"{server}/jobs/{missing}/result").json()
    page.route(f"**/jobs/{missing}/result", lambda route: route.fulfill(
        json={**real, "signed": {**real["signed"], "commitBy": deadline}}))
    page.evaluate("state.shownJob = ''")
    slash_shown(missing, "the provider signed to commit by")
    page.unroute(f"**/jobs/{missing}/result")
    slash_shown(missing, "Slash the provider")

    before = staking.functions.stakeOf(market.provider).call()
    page.click("#slash-signed")
    wait_status(page, f"slash job {missing}'s provider with its signed result: transaction")
    slash_shown(missing, "slashed: the provider was slashed")
    slash_shown(differs, "Slash the provider")
    page.click("#slash-signed")
    wait_status(page, f"slash job {differs}'s provider with its signed result: transaction")
    slash_shown(differs, "slashed: the provider was slashed")
    taken = before - staking.functions.stakeOf(market.provider).call()
    assert taken > 0 and len(wallet.sent) == 2

    # Both slashes are listed with their amounts and causes.
    rows = "Array.from(document.querySelectorAll('#slashes tbody tr'), (tr) => tr.textContent)"
    page.wait_for_function(f"{rows}.filter((t) => t.includes('signed result')).length === 2", timeout=15_000)
    listed = [r for r in page.evaluate(rows) if "signed result" in r]
    assert any(f"job {missing}:" in r for r in listed) and any(f"job {differs}:" in r for r in listed)
    exact = [r for r in page.evaluate("Array.from(document.querySelectorAll('#slashes tbody tr'), (tr) => tr.innerHTML)")
             if "signed result" in r]
    assert all(f'title="{taken // 2} wei' in r for r in exact) and len(exact) == 2, exact  # exact on hover
    assert all(market.provider.lower() in r for r in listed), listed
    assert any("challenge" in r and "lost" in r for r in page.evaluate(rows))  # the market's dispute slash
    page.close()


def test_pog_history_shows_each_devices_nvml_identity_and_attestation(browser, server, market) -> None:  # type: ignore[no-untyped-def]
    rounds = wait_until(lambda: httpx.get(f"{server}/providers/{market.provider}/pog").json(), 30,
                        "the provider's PoG rounds are indexed")
    device = {"gpu_index": 0, "name": "NVIDIA H200", "uuid": "GPU-8f6b2a4c", "memory_bytes": 150_754_820_096,
              "serial": None, "driver_version": "550.90.07", "cc_mode": "on",
              "attestation": "failed: NonceMismatchError: the report answers another round"}
    token = token_for(server, support.anvil_key(4))  # the market's verifier, which requested the rounds
    recorded = httpx.put(f"{server}/pog/rounds/{rounds[0]['round_id']}/devices", json={"devices": [device]},
                         headers={"Authorization": f"Bearer {token}"})
    assert recorded.status_code == 200, recorded.text
    page = open_page(browser, server, view="offers")
    page.wait_for_selector("#pog-rounds tbody tr")
    page.select_option("#pog-provider", market.provider.lower())
    page.wait_for_function("[...document.querySelectorAll('#pog-rounds tbody td:nth-child(7)')]"
                           ".some((td) => td.textContent === 'NVIDIA H200')")
    row = page.locator("#pog-rounds tbody tr", has_text="NVIDIA H200")
    assert row.locator("td:nth-child(8)").inner_text() == device["attestation"]
    assert row.locator("td:nth-child(8) span").get_attribute("class") == "bad"
    assert "GPU-8f6b2a4c, 140 GiB, serial none, driver 550.90.07, CC on" in (
        row.locator("td:nth-child(7) span").get_attribute("title") or "")
    # The offer shows the reported GPU and its memory, and, with no chain to read, dates the last
    # round by the backend's record of the verifier's report (and says so).
    card = f'#offers .offer[data-address="{market.provider.lower()}"]'
    page.wait_for_function(f"document.querySelector('{card} .gpus')?.textContent.includes('NVIDIA H200')")
    assert page.inner_text(f"{card} .gpus") == "1 × NVIDIA H200, 140 GiB each"
    reported = httpx.get(f"{server}/providers/{market.provider}/pog").json()[0]["devices"][0]["reported_at"]
    when = reported.replace("T", " ")[:19] + " UTC"
    assert page.inner_text(f"{card} dd.last-pog") == f"passed {when} (the backend's record)"
    page.close()


@pytest.fixture(scope="module")
def drained(session, market) -> str:  # type: ignore[no-untyped-def]
    return support.drained_provider(session, market).lower()


def test_a_provider_slashed_below_the_minimum_stake_is_not_available_nor_quoted(  # type: ignore[no-untyped-def]
        browser, server, session, drained) -> None:
    registry = session.contract("ProviderRegistry")
    assert not registry.functions.isActive(Web3.to_checksum_address(drained)).call()  # the chain's view
    row = wait_until(lambda: (r := httpx.get(f"{server}/providers/{drained}").json()).get("stake_slashed") != "0" and r,
                     15, "the slash is indexed")
    assert row["available"] is False and row["pog_passed"] is True, row
    assert any(w.startswith("slashed 1 ETH: stake 0 ETH below the minimum 1 ETH") for w in row["why_not"]), row
    listed = {p["address"] for p in httpx.get(f"{server}/providers", params={"available": True}).json()}
    assert drained not in listed
    # The cheapest verified provider, yet the matcher never offers it.
    quotes = httpx.post(f"{server}/quotes", json={"items": 2, "max_price_wei": str(10**18)}).json()
    assert drained not in {q["provider"] for q in quotes}, quotes
    page = open_page(browser, server, view="offers")
    cell = f'#offers .offer[data-address="{drained}"] .available'
    page.wait_for_selector(cell)
    assert page.inner_text(cell).startswith("not available: slashed 1 ETH: stake 0 ETH below the minimum 1 ETH"), \
        page.inner_text(cell)
    assert not page.query_selector(f'#offers .offer[data-address="{drained}"] .rent')  # nothing to rent
    page.close()


def test_the_lease_selector_defaults_to_a_provider_that_passed_and_providers_show_dates(  # type: ignore[no-untyped-def]
        browser, server, chain, session, market) -> None:
    # The first registered provider fails its latest round; the second passes one and beats.
    support.pog_round(session, market, market.provider, False, "", 0)
    support.pog_round(session, market, market.provider2, True, "RTX-4090", 160_000)
    beat = httpx.post(f"{server}/providers/{market.provider2.lower()}/heartbeat",
                      headers={"Authorization": f"Bearer {token_for(server, support.anvil_key(2))}"})
    assert beat.status_code == 204, beat.text
    wait_until(lambda: httpx.get(f"{server}/providers/{market.provider.lower()}").json()["pog_passed"] is False, 15,
               "the failed round is indexed")
    page = open_page(browser, server, InjectedWallet(chain[0].rpc_url), view="leases")
    page.wait_for_function("document.querySelectorAll('#lease-provider option').length >= 2")
    wait_until(lambda: page.input_value("#lease-provider") == market.provider2.lower(), 15,
               "the lease selector picks the provider that passed")
    options = page.inner_text("#lease-provider")
    assert f"{market.provider.lower()} (" in options and "not available" in options, options
    show(page, "offers")
    first, second = (f'#offers .offer[data-address="{a.lower()}"]' for a in (market.provider, market.provider2))
    failed = page.inner_text(f"{first} .available")
    assert failed.startswith("not available: failed its last Proof of GPU (round"), failed
    seen = page.inner_text(f"{second} dd.last-seen")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", seen), seen
    assert page.inner_text(f"{first} dd.last-seen") == "never"
    # The offer that passed is the first card, and its button leads to a lease of it.
    assert page.get_attribute("#offers .offer", "data-address") == market.provider2.lower()
    page.click(f"{second} .rent")
    page.wait_for_selector('.view[data-view="leases"]', state="visible")
    assert page.input_value("#lease-provider") == market.provider2.lower()
    show(page, "offers")
    # The last round's date as the chain recorded it (ProviderRegistry.pogStatusOf), read through the wallet.
    recorded = session.contract("ProviderRegistry").functions.pogStatusOf(market.provider2).call().timestamp
    when = datetime.fromtimestamp(recorded, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    cell = f"{second} dd.last-pog"
    page.wait_for_function(f"document.querySelector('{cell}')?.textContent === 'passed {when}'")
    page.close()


def test_a_failing_read_is_one_sentence_without_the_api_path(browser, server) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.route("**/slashes", lambda route: route.fulfill(status=500, content_type="application/json",
                                                        body=json.dumps({"detail": "database is locked"})))
    page.goto(server + "/")
    page.wait_for_function("document.getElementById('refresh-error').textContent.length > 0")
    said = page.inner_text("#refresh-error")
    assert said == "The backend could not load the slashes: the backend failed (database is locked); try again shortly.", said
    page.close()


# A folder to write each view's screenshot to (docs/dashboard/ holds the committed ones):
#   UNCHAINED_DASHBOARD_SCREENSHOTS=docs/dashboard python -m pytest -p no:pytest-brownie -q \
#     tests/backend/test_backend_dashboard.py
SCREENSHOTS = os.environ.get("UNCHAINED_DASHBOARD_SCREENSHOTS")


def test_each_view_with_a_wallet_over_the_market(browser, server, chain, session, market) -> None:  # type: ignore[no-untyped-def]
    """Each view with the renter's wallet connected, over what the tests above left in the market
    (jobs, leases, challenges, slashes), last in the module; the screenshots, where asked for."""
    outputs = [encode_output(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4) * (i + 1)) for i in range(4)]
    job_id, tree = committed_job(server, session, market, b"spec-screenshots", outputs)
    token = token_for(server, support.anvil_key(1))
    for index, data in enumerate(outputs):
        proof = ",".join("0x" + bytes(h).hex() for h in tree.proof(index))
        response = httpx.put(f"{server}/jobs/{job_id}/outputs/{index}", content=data,
                             headers={"Authorization": f"Bearer {token}", "X-Merkle-Proof": proof})
        assert response.status_code == 201, response.text
    page = open_page(browser, server, InjectedWallet(chain[0].rpc_url), view="offers")
    page.set_viewport_size({"width": 1280, "height": 900})

    def shot(name: str) -> None:
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)

    page.wait_for_function("document.querySelectorAll('#offers .offer').length >= 3 && "
                           "document.querySelector('#offers dd.last-pog')?.textContent.includes(' UTC')")
    shot("offers")
    page.goto(f"{server}/#/jobs/{job_id}")
    page.wait_for_function(f"document.querySelector('#job-detail h3')?.textContent === 'job {job_id}: result delivered' && "
                           "document.getElementById('challenge-job')")
    page.click("#verify")
    page.wait_for_function(f"{CHECKS}.length === 4 && {CHECKS}.every((t) => t === 'verified')", timeout=15_000)
    assert page.inner_text("#save-all") == "Download all 4 verified items (zip)"
    assert page.inner_text("#job-detail .progress") == \
        "✓ paid → ✓ taken by the provider → ✓ result delivered (4 of 4 items uploaded) → ○ provider paid"
    shot("job")
    show(page, "jobs")
    assert page.is_hidden("#job-section") and len(page.query_selector_all("#jobs tbody tr")) >= 5
    shot("jobs")
    show(page, "leases")
    page.wait_for_function("document.querySelectorAll('#leases tbody tr').length >= 2")
    shot("leases")
    show(page, "balances")
    page.wait_for_function("document.getElementById('owed-challenges').textContent.endsWith('ETH')")
    assert page.inner_text("#owed-wallet").endswith(" ETH")
    shot("balances")
    show(page, "challenges")
    page.wait_for_function("document.querySelectorAll('#challenges tbody tr').length >= 3 && "
                           "document.querySelectorAll('#slashes tbody tr').length >= 1")
    assert page.get_attribute("#slashes tbody tr .amount", "title").endswith(" ETH)")  # type: ignore[union-attr]
    shot("challenges")
    page.close()
