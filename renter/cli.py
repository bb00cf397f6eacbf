"""Typer sub-apps of the renter: `job`, `model` and `lease`, which sign with the renter's own
keystore in the renter's own process."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from renter.errors import Conflict
from client.cli_output import Output, OutputFormat, print_json
from client.keystore import PASSWORD_FILE_HELP
from protocol.execution import DEFAULT_TOLERANCE_PPM
from protocol.model_formats import MODEL_FORMATS

# Each command imports the chain client (web3), the backend client and the renter's orders itself:
# `unchained job --help` and `job status` start without loading what they do not use.
if TYPE_CHECKING:
    from eth_typing import ChecksumAddress
    from rich.progress import Progress, TaskID

    from client.escrow_jobs import JobView
    from protocol.escrow_job import EscrowJob
    from renter.client import BackendClient
    from renter.offers import Offer
    from renter.wallet import Wallet
    from protocol.job_result import SignedJobResult

console = Console()
job_app = typer.Typer(help="Renter: submit and pay for jobs, follow them, fetch verified results.",
                      no_args_is_help=True)
model_app = typer.Typer(help="The model hub: push and list models.", no_args_is_help=True)
lease_app = typer.Typer(help="Renter: lease GPUs of a provider by the hour.", no_args_is_help=True)

BackendUrl = Annotated[str, typer.Option("--backend", envvar="UNCHAINED_BACKEND_URL", help="Backend API URL.")]
Rpc = Annotated[str, typer.Option("--rpc", envvar="UNCHAINED_RPC_URL", help="JSON-RPC URL of the chain.")]
Keystore = Annotated[Path, typer.Option("--keystore", exists=True, dir_okay=False,
                                        help="Your eth-account JSON keystore (`unchained account new`).")]
PasswordFile = Annotated[Path | None, typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)]
DeploymentFile = Annotated[Path | None, typer.Option("--deployment", help="deployments/<chainId>.json to trust.")]
DEFAULT_BACKEND = "http://127.0.0.1:8000"
DEFAULT_RPC = "http://127.0.0.1:8545"


ReadKeystore = Annotated[Path | None, typer.Option("--keystore", exists=True, dir_okay=False, help=(
    "Your keystore: only the address it holds is read (no password needed)."))]
Address = Annotated[str | None, typer.Option("--address", help="Your address, instead of --keystore.")]


def _unix_times(row: dict[str, Any]) -> dict[str, Any]:
    """The backend's ISO 8601 times (`..._at`) in unix seconds, the unit of every time `-o json` prints."""
    from datetime import datetime

    return {k: int(datetime.fromisoformat(v).timestamp()) if k.endswith("_at") and isinstance(v, str) else v
            for k, v in row.items()}


def _me(keystore: Path | None, address: str | None) -> ChecksumAddress:
    """The renter's address, from --address or the keystore's address field (never decrypted:
    a read needs no password)."""
    # eth-utils, not web3 (its Web3.is_address and to_checksum_address): the reads start without web3.
    from eth_utils import is_address, to_checksum_address

    from client.keystore import keystore_address
    from renter.errors import RenterError

    if address is not None:
        if not is_address(address):
            raise typer.BadParameter(f"{address!r} is not an address (0x and 40 hex digits)", param_hint="--address")
        return to_checksum_address(address)
    if keystore is None:
        raise typer.BadParameter("whose? pass --keystore FILE or --address 0x...", param_hint="--keystore")
    found = keystore_address(keystore)
    if found is None:
        raise RenterError(f"keystore {keystore} does not say which address it holds: pass --address")
    return found


def _progress() -> Progress:
    # rich.progress (25 ms) loads for the commands that show a bar, not for the reads.
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                    console=console)


# ---- model ----


@model_app.command("push")
def model_push(
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="TorchScript or ONNX file.")],
    keystore: Keystore,
    password_file: PasswordFile = None,
    name: Annotated[str | None, typer.Option(help="Display name (default: the file name).")] = None,
    fmt: Annotated[str, typer.Option("--format", help=f"One of {MODEL_FORMATS}.")] = "torchscript",
    private: Annotated[bool, typer.Option(help="Visible only to you.")] = False,
    backend: BackendUrl = DEFAULT_BACKEND,
) -> None:
    """Upload a model to the hub; prints its content hash (keccak256 of the bytes)."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    client = BackendClient.connect(backend, load_keystore(keystore, password_file))
    row = client.push_model(path.read_bytes(), name or path.name, fmt, private)
    console.print(f"model {row['content_hash']} ({row['size']} bytes, {'private' if row['private'] else 'public'})")


@model_app.command("list")
def model_list(
    keystore: Annotated[Path | None, typer.Option(help="Sign in to include your private models.")] = None,
    password_file: PasswordFile = None,
    backend: BackendUrl = DEFAULT_BACKEND,
    output: Output = OutputFormat.text,
) -> None:
    """List public models (and your private ones when signed in): one block per model, the
    content hash whole on its own line (a table would cut it at 80 columns)."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    client = BackendClient.connect(backend, load_keystore(keystore, password_file) if keystore else None)
    rows = client.get("/models")
    if output is OutputFormat.json:
        print_json(rows)
        return
    if not rows:
        console.print("no models yet (push one with `unchained model push FILE`)")
    for r in rows:
        console.print(r["content_hash"], highlight=False, soft_wrap=True)
        console.print(f"  {r['name']}  {r['format']}  {_size(r['size'])}  "
                      f"{'private' if r['private'] else 'public'}  {r.get('created_at', '')}",
                      highlight=False, soft_wrap=True)
        console.print(f"  owner {r['owner']}", highlight=False, soft_wrap=True)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


# ---- job ----


def _resolve_model(client: BackendClient, model: str, fmt: str, private: bool) -> str:
    """The content hash `--model` names: a hash as given, or a file's, pushed unless the hub
    holds it already as yours in that format and visibility (a push of the same bytes renames
    the entry: the name given with `model push --name` would give way to the file name)."""
    from protocol.merkle import keccak256

    if model.startswith("0x") and len(model) == 66:
        return model.lower()
    path = Path(model)
    if not path.is_file():
        raise typer.BadParameter(f"--model: {model} is neither a content hash nor a file")
    data = path.read_bytes()
    own = _own_model(client, "0x" + keccak256(data).hex())
    if own is not None and own["format"] == fmt and own["private"] == private:
        return str(own["content_hash"])
    return str(client.push_model(data, own["name"] if own is not None else path.name, fmt, private)["content_hash"])


def _own_model(client: BackendClient, content_hash: str) -> dict[str, Any] | None:
    """The signed-in renter's own hub entry of `content_hash`, or None (none, or someone else's)."""
    from client.backend_http import ApiError

    try:
        row = client.model(content_hash)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    mine = client.account is not None and row["owner"] == client.account.address.lower()
    return row if mine else None


@job_app.command("submit")
def job_submit(
    model: Annotated[str, typer.Option(help="Model content hash, or a file to push first.")],
    inputs: Annotated[Path, typer.Option(exists=True, file_okay=False, help="Directory: one file per item.")],
    max_price: Annotated[float, typer.Option(min=0, max=1e9, help="Most you pay for the whole job, in ETH.")],
    keystore: Keystore,
    password_file: PasswordFile = None,
    provider: Annotated[str | None, typer.Option(help="Provider address; default: the best quote.")] = None,
    fmt: Annotated[str, typer.Option("--format", help=f"Model format, one of {MODEL_FORMATS}.")] = "torchscript",
    private: Annotated[bool, typer.Option(help="Private model, private-capable providers only.")] = False,
    gpu_class: Annotated[list[str] | None, typer.Option(
        help="Acceptable verified GPU class (repeatable); default: any class that passed PoG.")] = None,
    batch_size: Annotated[int, typer.Option(min=1, max=4096)] = 8,
    tolerance_ppm: Annotated[int, typer.Option(min=0, max=1_000_000, help=(
        "Allowed |output - re-execution| per element, in millionths of max(1, |value|): the default covers "
        "honest fp32 drift between hosts and devices and refuses an fp32 model run in fp16; 0 demands the "
        "same bits (docs/PROTOCOL.md, \"Job re-execution\")."))] = DEFAULT_TOLERANCE_PPM,
    deadline_s: Annotated[int, typer.Option(help="Seconds until the result is due.", min=60)] = 3600,
    check: Annotated[bool, typer.Option("--check/--no-check", help=(
        "Dry-run the first items of each input shape through the model on the backend before "
        "paying (--no-check: pay without it, e.g. for a model too large for the backend's limits)."))] = True,
    wait: Annotated[float, typer.Option(min=0, max=86400, help=(
        "Seconds to wait for the provider's signed result once funded (answered as soon as the backend "
        "has it), checked against the provider on-chain; 0: return once funded."))] = 0,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Upload inputs, pick a provider, store the spec, and fund the job from your own wallet.

    Nothing is paid unless the model is in the hub, every input decodes, the model runs the
    inputs (dry run) and a verified provider fits; otherwise it says which of these failed."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    from renter.orders import submit_job
    from renter.wallet import Wallet
    from web3 import Web3

    account = load_keystore(keystore, password_file)
    client = BackendClient.connect(backend, account)
    wallet = Wallet(rpc, account, deployment)
    pushed = not (model.startswith("0x") and len(model) == 66)
    model_hash = _resolve_model(client, model, fmt, private)
    files = sorted(p for p in inputs.iterdir() if p.is_file())
    if not files:
        raise typer.BadParameter(f"--inputs: {inputs} holds no files")
    with _progress() as progress:
        task = progress.add_task("uploading inputs", total=sum(p.stat().st_size for p in files))
        funded = submit_job(client, wallet, model_hash, [p.read_bytes() for p in files],
                            Web3.to_wei(max_price, "ether"), provider=provider, fmt=fmt if pushed else None,
                            private=private, gpu_classes=gpu_class, batch_size=batch_size,
                            tolerance_ppm=tolerance_ppm, deadline_s=deadline_s,
                            on_upload=lambda size: progress.advance(task, size), check=check,
                            on_sent=lambda tx: console.print(f"funding tx 0x{tx.hex()} sent", highlight=False),
                            names=[p.name for p in files])
    job = funded.job
    console.print(f"job {job.id} funded in tx 0x{funded.tx_hash.hex()}: {len(files)} items, "
                  f"{Web3.from_wei(job.price, 'ether')} ETH, spec 0x{job.spec_hash.hex()}, "
                  f"provider {job.provider.lower()}")
    if wait > 0:
        _wait_for_result(client, wallet, job.id, wait)


def _wait_for_result(client: BackendClient, wallet: Wallet, job_id: int, wait: float) -> None:
    """The signed result as soon as the backend has it (a long poll), its signature checked
    against the job's provider read from the chain; exits 1 when none came within `wait`."""
    from client.escrow_jobs import read_job

    result = client.wait_result(job_id, wait)
    signed = None
    if result is not None:
        job = read_job(wallet.contract("JobEscrow"), job_id, wallet.deployment.contract("JobEscrow").block)
        signed = client.verified_signed_result(job, wallet.escrow_domain(), result)
    if signed is None:
        console.print(f"job {job_id}: no signed result within {wait:g} s; `unchained job result {job_id}` fetches "
                      "it once there", highlight=False)
        raise typer.Exit(1)
    console.print(f"job {job_id}: result over {signed.result.item_count} items, output root "
                  f"{signed.result.output_root}, signed by its provider; `unchained job result {job_id}` downloads "
                  "and verifies the outputs", highlight=False, soft_wrap=True)


Wei = Annotated[bool, typer.Option("--wei", help="Show amounts in wei instead of ETH.")]
JOB_AMOUNTS = ("price", "provider_amount", "fee", "refund")
JOB_TIMES = ("deadline", "challenge_window_end", "cancellable_at")


def job_lines(job: dict[str, Any], now: float, in_wei: bool = False) -> list[tuple[str, str]]:
    """A job as (field, value) lines: amounts in ETH (wei on request), times as dates with zone
    and how far away, addresses and hashes whole."""
    from client.units import amount, when

    lines = []
    for key in ("status", "failure", "renter", "provider", "price", "deadline", "output_root", "item_count",
                "challenge_window_end", "cancellable_at", "provider_amount", "fee", "refund", "dispatched_to"):
        value = job.get(key)
        if key == "failure" and not value:
            continue
        if key in JOB_AMOUNTS:
            shown = amount(value, in_wei=in_wei)
        elif key in JOB_TIMES:
            shown = when(value, now)
        else:
            shown = "-" if value is None else str(value)
        lines.append((key.replace("_", " "), shown))
    return lines


def chain_fields(view: JobView) -> dict[str, object]:
    """A job's fields as its chain slot records them, by the backend's names: what `job status`
    shows of them is read from the chain, never the backend's index alone (a compromised backend
    could show a funded job refunded, or another provider or price)."""
    from protocol.enums import JobStatus

    job = view.job
    if view.status == JobStatus.FUNDED:
        status = "cancel requested" if view.cancellableAt else "funded"
    else:
        status = view.status.name.lower()
    committed = job.is_committed
    return {"status": status, "renter": job.renter.lower(), "provider": job.provider.lower(), "price": str(job.price),
            "deadline": job.deadline, "output_root": "0x" + job.output_root.hex() if committed else None,
            "item_count": job.item_count if committed else None,
            "challenge_window_end": view.challengeWindowEnd if committed else None,
            "cancellable_at": view.cancellableAt or None}


OPEN_CHALLENGE = ("open", "answered", "escalated")


def job_challenges(client: BackendClient, job: dict) -> list[dict]:  # type: ignore[type-arg]
    """The challenges of a job's result, newest first (the backend indexes them per provider)."""
    rows = client.get("/challenges", provider=job["provider"], kind="job", limit=500)
    return [c for c in rows if c["subject"] == job["job_id"]]


def challenge_line(c: dict, now: float, in_wei: bool = False) -> str:  # type: ignore[type-arg]
    from client.units import amount, when

    if c["status"] == "open":
        state = f"OPEN: the provider must reveal {c['k']} items by {when(c['response_deadline'], now)}"
    elif c["status"] == "answered":
        state = ("answered by the provider: its challenger may escalate it to the verifiers' committee "
                 f"(`unchained job challenge {c['subject']} --escalate`)")
    elif c["status"] == "escalated":
        state = f"escalated to the committee (dispute {c.get('dispute_id')})"
    else:
        state = c["status"].replace("_", " ")
    return f"challenge {c['challenge_id']} by {c['challenger']}, bond {amount(c['bond'], in_wei=in_wei)}: {state}"


@job_app.command("status")
def job_status(job_id: Annotated[int, typer.Argument(min=0)], backend: BackendUrl = DEFAULT_BACKEND,
               rpc: Rpc = DEFAULT_RPC, deployment: DeploymentFile = None, wei: Wei = False,
               output: Output = OutputFormat.text) -> None:
    """Show a job as the chain records it (status, parties, price, times and result read from the
    chain; the backend adds its failure report, dispatch and amounts), any challenge of its result,
    and why it failed if its
    provider failed it."""
    import time

    from client.units import amount
    from renter.client import BackendClient

    client = BackendClient.connect(backend)
    job = client.get(f"/jobs/{job_id}")
    from client.chain import ChainContext, open_chain  # web3: loaded once the backend answered
    from client.escrow_jobs import read_job_view

    chain = ChainContext(*open_chain(rpc, deployment_file=deployment, timeout_s=30))
    onchain = chain_fields(read_job_view(chain.contract("JobEscrow"), job_id,
                                         chain.deployment.contract("JobEscrow").block))
    backend_status = job.get("status")
    job = {**job, **onchain}
    challenges = job_challenges(client, job)
    if output is OutputFormat.json:
        print_json({**_unix_times(job), "backend_status": backend_status, "challenges": challenges})
        return
    if backend_status != onchain["status"]:
        console.print(f"[yellow]the backend shows job {job_id} {backend_status}; the chain: {onchain['status']}"
                      "[/yellow]", soft_wrap=True)
    now = time.time()
    # Plain lines, not a table: a 66-character hash must never be cut at 80 columns.
    console.print(f"job {job_id}", highlight=False)
    for key, value in job_lines(job, now, wei):
        console.print(f"  {key:<21} {value}", highlight=False, soft_wrap=True)
    for c in challenges:
        console.print(f"  {challenge_line(c, now, wei)}", highlight=False, soft_wrap=True)
    if any(c["status"] in OPEN_CHALLENGE for c in challenges):
        console.print(f"job {job_id} is frozen while its challenge is open: nothing is paid out until it is settled",
                      highlight=False, soft_wrap=True)
    if job.get("failure"):
        source = "on-chain, JobFailed" if job.get("failure_reason") else "the provider's report"
        console.print(f"the provider could not run job {job_id} ({source}): {job['failure']}", soft_wrap=True)
    if job["status"] == "refunded":
        console.print(f"the renter was refunded {amount(job.get('refund'), in_wei=wei)}: take it out with "
                      "`unchained withdraw`", highlight=False)
    elif job.get("failure") and job["status"] in ("funded", "cancel requested", "accepted"):
        console.print(f"the provider could not run it; `unchained job refund {job_id}` says when it is refundable")


@job_app.command("list")
def job_list(
    keystore: ReadKeystore = None,
    address: Address = None,
    status: Annotated[str | None, typer.Option(help="Only jobs in this status (e.g. committed, finalized).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many, newest first.")] = 20,
    backend: BackendUrl = DEFAULT_BACKEND,
    wei: Wei = False,
    output: Output = OutputFormat.text,
) -> None:
    """Your jobs, newest first: status, price, deadline and provider."""
    import time

    from client.units import amount, when
    from renter.client import BackendClient

    me = _me(keystore, address)
    params: dict[str, Any] = {"renter": me.lower(), "limit": limit}
    if status:
        params["status"] = status
    rows = BackendClient.connect(backend).get("/jobs", **params)
    if output is OutputFormat.json:
        print_json([_unix_times(r) for r in rows])
        return
    if not rows:
        console.print(f"no jobs of {me}" + (f" in status {status}" if status else "")
                      + " (submit one with `unchained job submit`)", highlight=False, soft_wrap=True)
    now = time.time()
    for j in rows:
        items = len(j["spec"]["inputs"]) if j.get("spec") else j.get("item_count")
        console.print(f"job {j['job_id']}  {j['status']}{'  FROZEN (challenged)' if j.get('frozen') else ''}  "
                      f"{amount(j['price'], in_wei=wei)}  {items if items is not None else '?'} items",
                      highlight=False, soft_wrap=True)
        console.print(f"  deadline {when(j['deadline'], now)}  provider {j['provider']}", highlight=False,
                      soft_wrap=True)
        if j.get("failure"):
            console.print(f"  failed: {j['failure']}", highlight=False, soft_wrap=True)


@job_app.command("result")
def job_result(
    job_id: Annotated[int, typer.Argument(min=0)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    out: Annotated[Path, typer.Option(help="Directory for the item outputs.")] = Path("results"),
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
    output: Output = OutputFormat.text,
) -> None:
    """Download every item's output and verify each against the output root read from the chain
    once committed; before that, the root its provider signed (the signature is checked here
    against the provider on-chain). The backend only carries the bytes."""
    from client.chain import ChainContext, open_chain
    from client.escrow_jobs import read_job
    from client.keystore import load_keystore
    from renter.client import BackendClient
    from renter.orders import trusted_root

    client = BackendClient.connect(backend, load_keystore(keystore, password_file))
    result = client.get(f"/jobs/{job_id}/result")
    chain = ChainContext(*open_chain(rpc, deployment_file=deployment, timeout_s=30))
    job = read_job(chain.contract("JobEscrow"), job_id, chain.deployment.contract("JobEscrow").block)
    signed = client.verified_signed_result(job, chain.escrow_domain(), result)
    root, item_count = trusted_root(job, signed)
    with _progress() if output is OutputFormat.text else _NoProgress() as progress:
        task = progress.add_task("downloading and verifying",
                                 total=sum(i["size"] or 0 for i in result["items"]))
        outputs = client.download_verified(job_id, root, item_count, on_item=lambda size: progress.advance(task, size))
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for index, data in enumerate(outputs):
        files.append(out / f"item-{index:06d}.out")
        files[-1].write_bytes(data)
    source = "on-chain" if job.is_committed else "signed by its provider"
    if output is OutputFormat.json:
        print_json({"job_id": job_id, "items": len(outputs), "verified": True, "output_root": "0x" + root.hex(),
                     "root_source": "chain" if job.is_committed else "provider_signature",
                     "signed_by": signed.provider if signed is not None else None,
                     "note": signed_result_note(job, signed) if signed is not None else None,
                     "files": [str(f) for f in files]})
        return
    console.print(f"{len(outputs)} items verified against output root 0x{root.hex()} ({source}); written to {out}")
    if signed is not None:
        console.print(signed_result_note(job, signed), highlight=False, soft_wrap=True)


class _NoProgress:
    """A progress bar that shows nothing: stdout carries only the JSON document."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int) -> TaskID:
        from rich.progress import TaskID

        return TaskID(0)

    def advance(self, task: TaskID, size: int) -> None:
        return None


def signed_result_note(job: EscrowJob, signed: SignedJobResult) -> str:
    """What the provider's signature gives the renter: binding (commitBy before the deadline) or
    not, and whether the commit is the signed result. Both from the job read from the chain, never
    the backend's `committed` / `commit_matches_signed`: a backend siding with the provider could
    call a different commit "as signed", and the renter would let its slash (and refund) pass."""
    r, job_id, deadline = signed.result, job.id, job.deadline
    if job.is_committed:
        committed = ("0x" + job.output_root.hex(), job.item_count, "0x" + job.result_digest.hex())
        if committed != (r.output_root.lower(), r.item_count, r.result_digest.lower()):
            return (f"the provider committed another result than the one it signed: `unchained job slash {job_id}` "
                    "slashes it (inside the challenge window the job's price comes back too)")
        return f"signed by provider {signed.provider} and committed as signed"
    if r.binding(deadline):
        return (f"signed by provider {signed.provider}; its on-chain commit is pending, promised by {r.commit_by} "
                f"(deadline {deadline}); if the commit differs, or none comes by the deadline, "
                f"`unchained job slash {job_id}` slashes it")
    return (f"signed by provider {signed.provider}; its on-chain commit is pending but NOT BINDING: promised only "
            f"by {r.commit_by}, not before the deadline {deadline}; a missing commit is not slashable with it "
            "(a different commit is)")


@job_app.command("challenge")
def job_challenge(
    job_id: Annotated[int, typer.Argument(min=1)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    k: Annotated[int | None, typer.Option(min=1, max=64, help="Items the provider must reveal on-chain (default 44).")]
        = None,
    bond: Annotated[float | None, typer.Option(help="Bond in ETH; default: the contract's minimum.")] = None,
    escalate: Annotated[bool, typer.Option("--escalate", help=(
        "Instead of opening a challenge: send your answered challenge of this job to the dispute committee "
        "(staked verifiers re-execute and vote) inside its escalation window."))] = False,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Challenge your own job inside its window: the provider must reveal k random items'
    digests with proofs on-chain or be slashed (you are refunded); the escrow stays frozen.
    With --escalate, the committee judges the provider's answer."""
    from client import contracts
    from client.escrow_jobs import read_job
    from client.keystore import load_keystore
    from renter.wallet import Wallet
    from web3 import Web3

    if escalate and (k is not None or bond is not None):
        raise typer.BadParameter("--k and --bond open a challenge; --escalate sends the open one to the committee "
                                 "and takes neither", param_hint="--escalate")
    wallet = Wallet(rpc, load_keystore(keystore, password_file), deployment)
    if escalate:
        _escalate(wallet, job_id)
        return
    k = 44 if k is None else k
    challenges = wallet.contract("ChallengeManager")
    value = Web3.to_wei(bond, "ether") if bond is not None else challenges.functions.minBond().call()
    # the Job with its committed result, as the escrow hashes it
    job = read_job(wallet.contract("JobEscrow"), job_id, wallet.deployment.contract("JobEscrow").block)
    receipt = wallet.send(challenges.functions.challengeJob(job.as_tuple(), k), value=value)
    challenge_id = contracts.emitted(challenges, "JobChallenged", receipt)[0]["args"]["challengeId"]
    console.print(f"challenge {challenge_id} on job {job_id}: {k} items, bond {Web3.from_wei(value, 'ether')} ETH "
                  f"(tx 0x{bytes(receipt['transactionHash']).hex()}); once the provider answers, "
                  f"`unchained job challenge {job_id} --escalate` sends its answer to the committee", highlight=False,
                  soft_wrap=True)


def _escalate(wallet: Wallet, job_id: int) -> None:
    """Escalate the job's open challenge; every refusal of the contract reads as a sentence
    (client/reverts.py), the one it cannot say (no challenge at all) is said here."""
    from client import contracts
    from client.units import eth, iso

    manager = wallet.contract("ChallengeManager")
    challenge_id = manager.functions.activeJobChallenge(job_id).call()
    if challenge_id == 0:
        raise Conflict(f"job {job_id} has no open challenge to escalate (`unchained job challenge {job_id}` opens one; "
                       f"`unchained job status {job_id}` shows how past ones ended)")
    receipt = wallet.send(manager.functions.escalate(challenge_id))
    dispute_id = contracts.emitted(manager, "ChallengeEscalated", receipt)[0]["args"]["disputeId"]
    dispute = wallet.contract("DisputeCommittee").functions.dispute(dispute_id).call()
    bond = manager.functions.challenge(challenge_id).call().bond
    console.print(f"challenge {challenge_id} on job {job_id} escalated to the committee as dispute {dispute_id} "
                  f"(tx 0x{bytes(receipt['transactionHash']).hex()}): staked verifiers vote until {iso(dispute.voteEnd)}. "
                  f"Provider at fault: it is slashed, you are refunded and get your bond back; answer right: your "
                  f"bond of {eth(bond)} goes to the provider", highlight=False, soft_wrap=True)


@job_app.command("refund")
def job_refund(
    job_id: Annotated[int, typer.Argument(min=1)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Take back what a job owes you: cancel it if the provider has not accepted it yet, or
    refund it once its deadline passed without a result; otherwise say why not and when. The
    refund is credited in the escrow: `unchained withdraw` pays it out."""
    from client.keystore import load_keystore
    from renter.wallet import Wallet
    from renter.refunds import refund_job

    outcome = refund_job(Wallet(rpc, load_keystore(keystore, password_file), deployment), job_id)
    console.print(outcome)


@job_app.command("slash")
def job_slash(
    job_id: Annotated[int, typer.Argument(min=1)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Slash the provider with the result it signed for this job, when its commit differs from
    it, or when it promised its commit before the deadline and never made it: it loses its
    minimum stake, you get the reward share, and the job's price comes back unless it was already
    paid (slash inside the challenge window). Otherwise says why not (and from when)."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    from renter.wallet import Wallet
    from renter.slash import slash_job

    console.print(slash_job(Wallet(rpc, load_keystore(keystore, password_file), deployment),
                            BackendClient.connect(backend), job_id), soft_wrap=True, highlight=False)


# ---- lease ----


SshKey = Annotated[Path, typer.Option("--ssh-key", dir_okay=False,
                                      help="SSH public key to log in with (bound to the lease, signed by your wallet).")]
DEFAULT_SSH_KEY = Path.home() / ".ssh" / "id_ed25519.pub"


def _utc(unix_time: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(unix_time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@lease_app.command("start")
def lease_start(
    provider: Annotated[str, typer.Option(help="Provider address.")],
    gpus: Annotated[int, typer.Option(min=1, max=1_000_000, help="GPUs to rent (at most what the provider has free).")],
    hours: Annotated[float, typer.Option(min=0.001, max=24 * 365, help="Hours (at most a year; unused time is refunded).")],
    keystore: Keystore,
    password_file: PasswordFile = None,
    ssh_key: SshKey = DEFAULT_SSH_KEY,
    wait: Annotated[float, typer.Option(min=0, help="Seconds to wait for the provider's connection details.")] = 300,
    identity: Annotated[Path | None, typer.Option("--identity", "-i", help="Private key to check the login with; "
                                                  "default: --ssh-key without .pub.")] = None,
    image: Annotated[Path | None, typer.Option("--image", exists=True, dir_okay=False, help=(
        "Root file system tarball (plain or compressed) the machine boots instead of the provider's system; "
        "uploaded privately before paying, its hash signed with your key."))] = None,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Pay up front for GPUs of a provider, bind your SSH key to the lease and wait until the
    provider hands the machine over; then log in once (host key pinned) and confirm the delivery
    on-chain, or, if the machine refuses you, stop the lease for a full refund. Prints the ssh
    command. Unused time is refunded when you stop."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    from renter.wallet import Wallet
    from web3 import Web3
    from protocol.lease_access import NO_IMAGE, normalize_ssh_key
    from renter.orders import (LoginFailed, bind_ssh_key, check_lease, check_login, confirm_delivery, end_lease,
                               start_lease, upload_lease_image, wait_for_access)

    try:
        public_key = normalize_ssh_key(ssh_key.read_text())  # before paying: a bad key loses nothing
    except OSError as exc:
        raise typer.BadParameter(f"{ssh_key}: {exc.strerror} (create one with `ssh-keygen -t ed25519`)",
                                 param_hint="--ssh-key") from exc
    wallet = Wallet(rpc, load_keystore(keystore, password_file), deployment)
    client = BackendClient.connect(backend, wallet.account if image is not None else None)  # uploads sign in
    check_lease(wallet, provider, gpus, int(hours * 3600), client)
    image_hash = NO_IMAGE
    if image is not None:  # before paying: an image the backend refuses loses nothing
        image_hash = upload_lease_image(client, image)
        console.print(f"image {image} uploaded as {image_hash}", soft_wrap=True, highlight=False)
    lease_id, cost, tx_hash = start_lease(wallet, provider, gpus, int(hours * 3600))
    console.print(f"lease {lease_id}: {gpus} GPU(s) of {provider} for {hours} h, paid "
                  f"{Web3.from_wei(cost, 'ether')} ETH (tx 0x{tx_hash.hex()})", soft_wrap=True)
    bind_ssh_key(client, wallet, lease_id, public_key, image=image_hash)
    console.print(f"SSH key {ssh_key} bound to lease {lease_id}; waiting for the provider (up to {wait:.0f} s)")
    access = wait_for_access(client, wallet, lease_id, wait)
    key = identity or ssh_key.with_suffix("")
    if not key.is_file():
        deadline = wallet.contract("LeaseManager").functions.confirmDeadline(lease_id).call()
        console.print(f"lease {lease_id}: offered; no private key {key} to check the login with. Log in with "
                      f"`unchained lease ssh {lease_id} -i KEY` (it confirms the delivery on-chain) before "
                      f"{_utc(deadline)}: until then `unchained lease stop {lease_id}` refunds everything, "
                      "after it the provider is paid from its offer on", soft_wrap=True, highlight=False)
    else:
        try:
            check_login(access, key)
        except LoginFailed as exc:
            # The provider offered a machine that does not let us in: it earns nothing from it.
            earned, refund, _tx = end_lease(wallet, lease_id)
            raise Conflict(f"{exc}; lease {lease_id} stopped: provider earned {Web3.from_wei(earned, 'ether')} ETH, "
                           f"refund {Web3.from_wei(refund, 'ether')} ETH (`unchained withdraw` pays it out)") from exc
        confirmed = confirm_delivery(wallet, lease_id, access)
        console.print(f"lease {lease_id}: logged in once; delivery confirmed on-chain"
                      + (f" (tx 0x{confirmed.hex()})" if confirmed else ""), soft_wrap=True, highlight=False)
    console.print(f"lease {lease_id} is yours: host key {access.host_key_fingerprint}\n"
                  f"  {' '.join(access.ssh_command())}\n  or: unchained lease ssh {lease_id}",
                  soft_wrap=True, highlight=False)


@lease_app.command("status")
def lease_status(
    lease_id: Annotated[int, typer.Argument(min=1)],
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
    output: Output = OutputFormat.text,
) -> None:
    """Time left on a lease, and what the provider would earn and you get back if you stopped it now."""
    from dataclasses import asdict

    from client.chain import ChainContext, open_chain
    from renter.client import BackendClient
    from web3 import Web3
    from renter.orders import LeaseNotDelivered, lease_access, quote_lease

    chain = ChainContext(*open_chain(rpc, deployment_file=deployment, timeout_s=30))
    quote = quote_lease(chain.contract("LeaseManager"), lease_id, chain.now())
    client = BackendClient.connect(backend)
    row = client.get(f"/leases/{lease_id}")
    # The ssh line only from details the lease's provider signed and offered on-chain: a backend
    # showing a host of its own would have the renter log in (and type its secrets) there.
    try:
        access, not_delivered = lease_access(client, chain, lease_id), None
    except LeaseNotDelivered as exc:
        access, not_delivered = None, str(exc)
    # Active on-chain but past its end: nobody settled it yet; it is not running any more.
    expired = quote.active and quote.seconds_left == 0
    state = "expired (not settled yet)" if expired else "active" if quote.active else "ended"
    if output is OutputFormat.json:
        amounts = {k: str(getattr(quote, k)) for k in ("earned_if_stopped", "refund_if_stopped")}
        print_json({**asdict(quote), **amounts, "state": state.split()[0], "renter": row.get("renter"),
                     "provider": row.get("provider"), "gpu_count": row.get("gpu_count"), "ends_at": row.get("ends_at"),
                     "paid": row.get("paid"), "access": access.message() if access is not None else None})
        return
    if not_delivered is not None:
        console.print(f"[yellow]{not_delivered}[/yellow]", soft_wrap=True)
    console.print(f"lease {lease_id}: {state}, {quote.delivery_words()}", highlight=False)
    if expired:
        console.print(f"  ran out at            {_utc(row['ends_at'])}\n"
                      f"  settle it             `unchained lease stop {lease_id}`: provider earns "
                      f"{Web3.from_wei(quote.earned_if_stopped, 'ether')} ETH, you get back "
                      f"{Web3.from_wei(quote.refund_if_stopped, 'ether')} ETH", highlight=False, soft_wrap=True)
        return
    if quote.active and not quote.offered:
        console.print("  full refund           if stopped now (nothing offered yet)", highlight=False)
    elif quote.active and quote.full_refund_until:
        console.print(f"  full refund           if stopped before {_utc(quote.full_refund_until)} "
                      "(log in with `unchained lease ssh` to confirm instead)", highlight=False)
    if quote.active:
        console.print(f"  time left             {quote.seconds_left // 3600} h {quote.seconds_left % 3600 // 60} min "
                      f"{quote.seconds_left % 60} s\n"
                      f"  if stopped now        provider earns {Web3.from_wei(quote.earned_if_stopped, 'ether')} ETH, "
                      f"you get back {Web3.from_wei(quote.refund_if_stopped, 'ether')} ETH", highlight=False)
    if access is not None and quote.active:
        console.print(f"  ssh                   {' '.join(access.ssh_command())} "
                      f"(host key {access.host_key_fingerprint})", highlight=False, soft_wrap=True)


@lease_app.command("list")
def lease_list(
    keystore: ReadKeystore = None,
    address: Address = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many, newest first.")] = 20,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    output: Output = OutputFormat.text,
) -> None:
    """Your leases, newest first: state, GPUs, what you paid, when each ends (or ended)."""
    from eth_utils import from_wei  # web3's own (Web3.from_wei), without loading web3

    from client.units import when
    from renter.client import BackendClient

    me = _me(keystore, address)
    rows = BackendClient.connect(backend).get("/leases", renter=me.lower(), limit=limit)
    now = 0
    if rows:  # the contracts' clock, as `lease status` reads it: a dev chain moved forward runs ahead of the wall's
        from client.node_reads import NodeReader

        now = NodeReader(rpc).timestamp()
    for r in rows:  # the backend's status is the chain's; past its end an active lease runs no more
        r["state"] = "expired" if r["status"] == "active" and r["ends_at"] <= now else r["status"]
    if output is OutputFormat.json:
        print_json(rows)
        return
    if not rows:
        console.print(f"no leases of {me} (rent GPUs with `unchained lease start`)", highlight=False, soft_wrap=True)
    for r in rows:
        settled = (f", provider earned {from_wei(int(r['provider_earned']), 'ether')} ETH, refund "
                   f"{from_wei(int(r['renter_refund']), 'ether')} ETH") if r.get("renter_refund") is not None else ""
        ends = "ended" if r["state"] != "active" else "ends"
        console.print(f"lease {r['lease_id']}  {r['state']}  {r['gpu_count']} GPU(s)  paid "
                      f"{from_wei(int(r['paid']), 'ether')} ETH{settled}", highlight=False, soft_wrap=True)
        console.print(f"  {ends} {when(r['ends_at'], now)}  provider {r['provider']}", highlight=False, soft_wrap=True)
        if r["state"] == "expired":
            console.print(f"  ran out, not settled: `unchained lease stop {r['lease_id']}` settles it", highlight=False)


@lease_app.command("ssh", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def lease_ssh(
    ctx: typer.Context,
    lease_id: Annotated[int, typer.Argument(min=1)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    identity: Annotated[Path | None, typer.Option("--identity", "-i", help="Private key; default: --ssh-key's "
                                                  "without .pub, i.e. ~/.ssh/id_ed25519.")] = None,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """Connect to a lease's machine over SSH; the host key must match the fingerprint the provider
    signed. Extra arguments after `--` are the remote command (run without your stdin)."""
    from client.keystore import load_keystore
    from renter.client import BackendClient
    from renter.wallet import Wallet
    import subprocess

    from renter.orders import LoginFailed, check_login, lease_access, pinned_known_hosts, ssh_argv

    wallet = Wallet(rpc, load_keystore(keystore, password_file), deployment)
    _refuse_ended(wallet, lease_id)
    access = lease_access(BackendClient.connect(backend), wallet, lease_id)
    if access is None:
        raise Conflict(f"lease {lease_id} has not been delivered: `unchained lease status {lease_id}`")
    try:
        known = pinned_known_hosts(access)
    except LoginFailed as exc:
        raise Conflict(str(exc)) from exc
    key = identity or DEFAULT_SSH_KEY.with_suffix("")
    # The first login that works confirms the delivery on-chain (from then on stopping pays the
    # provider the elapsed seconds): checked without a terminal first, so that the confirmation is
    # sent before an interactive session starts, not when it ends.
    confirmed = wallet.contract("LeaseManager").functions.getDelivery(lease_id).call().confirmedAt != 0
    if not confirmed:
        try:
            check_login(access, key, timeout_s=0)
            confirmed = _confirm_quietly(wallet, lease_id, access)
        except LoginFailed:
            pass  # e.g. a key with a passphrase: the session below says whether the login works
    # With a command, stdin is not forwarded (ssh -n): a pasted block of lines must not be eaten
    # by the remote command; pipe data through the plain ssh command `lease start` printed.
    argv = ssh_argv(access, key, known, *(["-n"] if ctx.args else [])) + list(ctx.args)
    code = subprocess.run(argv).returncode
    if code != 255 and not confirmed:
        _confirm_quietly(wallet, lease_id, access)
    raise typer.Exit(code)


def _refuse_ended(wallet: Wallet, lease_id: int) -> None:
    """A lease that ended or ran out has no machine any more: say so before ssh would meet some
    other host (or none) at its old address and read like a host-key attack."""
    from protocol.enums import LeaseStatus

    lease = wallet.contract("LeaseManager").functions.getLease(lease_id).call()
    if lease.status == LeaseStatus.NONE:
        raise Conflict(f"lease {lease_id} does not exist (`unchained lease list` shows yours)")
    if lease.status != LeaseStatus.ACTIVE:
        raise Conflict(f"lease {lease_id} has ended: its machine is gone (`unchained lease start` rents another)")
    if wallet.now() >= lease.endsAt:
        raise Conflict(f"lease {lease_id} ran out at {_utc(lease.endsAt)}: its machine is gone; "
                       f"`unchained lease stop {lease_id}` settles it")


def _confirm_quietly(wallet: Wallet, lease_id: int, access: object) -> bool:
    """confirm_delivery, reporting (not raising) a refusal: the login itself worked."""
    from renter.orders import confirm_delivery
    from client.errors import ClientError

    try:
        tx = confirm_delivery(wallet, lease_id, access)  # type: ignore[arg-type]
    except ClientError as exc:
        console.print(f"[yellow]lease {lease_id}: delivery not confirmed on-chain: {exc}[/yellow]", soft_wrap=True)
        return False
    if tx is not None:
        console.print(f"lease {lease_id}: login works; delivery confirmed on-chain (tx 0x{tx.hex()})",
                      soft_wrap=True, highlight=False)
    return True


@lease_app.command("stop")
def lease_stop(
    lease_id: Annotated[int, typer.Argument(min=1)],
    keystore: Keystore,
    password_file: PasswordFile = None,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
) -> None:
    """End a lease now; the provider earns the time since it offered the machine, you are refunded
    the rest (all of it while the delivery is neither confirmed by your login nor past its confirm
    window: `lease status` says until when)."""
    from client.keystore import load_keystore
    from renter.orders import end_lease
    from renter.wallet import Wallet
    from web3 import Web3
    earned, refund, _tx = end_lease(Wallet(rpc, load_keystore(keystore, password_file), deployment), lease_id)
    console.print(f"lease {lease_id} ended: provider earned {Web3.from_wei(earned, 'ether')} ETH, "
                  f"refund {Web3.from_wei(refund, 'ether')} ETH (`unchained withdraw` pays it out)")


# ---- offers ----


class OfferSort(str, Enum):
    price = "price"  # per GPU-hour, cheapest first
    job_price = "job-price"  # per job unit, cheapest first
    tflops = "tflops"  # fastest first
    reputation = "reputation"  # best first
    free = "free"  # most free GPUs first
    seen = "seen"  # heard from most recently first


def provider_list(
    gpu_class: Annotated[list[str] | None, typer.Option(
        "--class", help="Only this verified GPU class, e.g. H100-SXM (repeatable).")] = None,
    max_price: Annotated[float | None, typer.Option(
        min=0, max=1e9, help="Only offers at most this many ETH per GPU-hour.")] = None,
    min_gpus: Annotated[int, typer.Option(min=0, max=1_000_000, help="Only providers with this many GPUs free.")] = 0,
    available: Annotated[bool, typer.Option(
        "--available", help="Only providers available now (the others are listed last, with why).")] = False,
    sort: Annotated[OfferSort, typer.Option(help="Order of the list (available offers always first).")] =
        OfferSort.price,
    backend: BackendUrl = DEFAULT_BACKEND,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
    wei: Wei = False,
    output: Output = OutputFormat.text,
) -> None:
    """GPU offers to rent: verified class, TFLOPS, price, reputation, free GPUs, last seen.

    Prices, stake, Proof of GPU and free GPUs are read from the chain, the rest from the backend.
    A provider that was slashed since its last Proof of GPU, failed it, or went silent is listed
    as not available, with why."""
    import time

    from client.chain import ChainContext, open_chain
    from client.units import amount, when
    from renter.client import BackendClient
    from renter.offers import list_offers
    from web3 import Web3

    client = BackendClient.connect(backend)
    chain = ChainContext(*open_chain(rpc, deployment_file=deployment, timeout_s=30))
    offers = list_offers(client, chain)
    classes = {c.lower() for c in gpu_class or []}
    ceiling = Web3.to_wei(max_price, "ether") if max_price is not None else None
    offers = [o for o in offers
              if (not classes or (o.gpu_class or "").lower() in classes)
              and (ceiling is None or o.price_per_gpu_hour <= ceiling)
              and o.free_gpus >= min_gpus and (o.available or not available)]
    keys: dict[OfferSort, Callable[[Offer], float]] = {OfferSort.price: lambda o: o.price_per_gpu_hour, OfferSort.job_price: lambda o: o.price_per_job_unit,
            OfferSort.tflops: lambda o: -(o.tflops or 0), OfferSort.reputation: lambda o: -o.reputation,
            OfferSort.free: lambda o: -o.free_gpus, OfferSort.seen: lambda o: -(o.last_seen or 0)}
    offers.sort(key=lambda o: (not o.available, keys[sort](o)))
    if output is OutputFormat.json:
        print_json([o.as_json() for o in offers])
        return
    if not offers:
        console.print("no offers match" if classes or ceiling is not None or min_gpus or available
                      else "no providers yet", highlight=False)
    now = time.time()
    for o in offers:
        shown = f"{o.gpu_class} ({o.tflops:g} TFLOPS)" if o.gpu_class and o.tflops else f"claims {o.gpu_model}"
        state = "available" if o.available else "NOT AVAILABLE"
        console.print(f"{o.address}  {state}  {shown}  {o.free_gpus} of {o.gpus} GPU(s) free", highlight=False,
                      soft_wrap=True)
        console.print(f"  {amount(o.price_per_gpu_hour, in_wei=wei)} per GPU-hour, "
                      f"{amount(o.price_per_job_unit, in_wei=wei)} per job unit, stake {amount(o.stake, in_wei=wei)}",
                      highlight=False, soft_wrap=True)
        pog = (f"Proof of GPU round {o.pog_round_id} {'passed' if o.pog_passed else 'failed'} {when(o.pog_at, now)}"
               if o.pog_at else "no Proof of GPU yet")
        console.print(f"  reputation {o.reputation:.2f} ({o.challenges_won} challenges won, {o.challenges_lost} lost); "
                      f"{pog}; last seen {when(o.last_seen, now) if o.last_seen else 'never'}", highlight=False,
                      soft_wrap=True)
        for reason in o.why_not:
            console.print(f"  not available: {reason}", highlight=False, soft_wrap=True)


# ---- account ----


def balance(
    keystore: ReadKeystore = None,
    address: Address = None,
    rpc: Rpc = DEFAULT_RPC,
    deployment: DeploymentFile = None,
    output: Output = OutputFormat.text,
) -> None:
    """Your wallet's ETH and every balance the contracts owe you (refunds, earnings, bonds,
    unbonded stake): `unchained withdraw` pays those out."""
    from eth_utils import from_wei  # web3's own (Web3.from_wei), without loading web3

    from client.node_reads import open_reader
    from client.payouts import owed_to
    from client.units import when

    me = _me(keystore, address)
    reader, trusted = open_reader(rpc, deployment_file=deployment)
    [wallet_hex] = reader.batch([("eth_getBalance", [me, "latest"])])
    wallet_wei = int(wallet_hex, 16)
    owed = owed_to(reader, trusted, me)
    waiting = owed.waiting
    if output is OutputFormat.json:
        print_json({"address": me, "wallet_wei": str(wallet_wei),
                     "owed": [{"contract": p.contract, "what": p.what, "amount": str(p.amount), "token": p.token,
                               "symbol": p.symbol, "decimals": p.decimals} for p in owed.payable],
                     "unbonding": None if waiting is None else {"amount": str(waiting.amount),
                                                                 "release_at": waiting.release_at}})
        return
    console.print(f"account {me}", highlight=False, soft_wrap=True)
    console.print(f"  {'wallet':<30} {from_wei(wallet_wei, 'ether')} ETH", highlight=False)
    for p in owed.payable:
        console.print(f"  {p.contract + ' ' + p.what:<30} {p.shown()}", highlight=False)
    if waiting is not None:
        console.print(f"  {'Staking unbonding':<30} {from_wei(waiting.amount, 'ether')} ETH, payable from "
                      f"{when(waiting.release_at, owed.now)}", highlight=False, soft_wrap=True)
    if owed.payable:
        console.print("owed to you: `unchained withdraw` pays it out", highlight=False)
    else:
        console.print("the contracts owe you nothing now", highlight=False)


__all__ = ["balance", "job_app", "lease_app", "model_app", "provider_list"]
