// The renter's dashboard: reads the JSON API, pays and withdraws through the browser wallet
// (EIP-1193), and checks results against the chain in the page. No build step.
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
// Every hash and address in full, selectable, with a copy button.
const hash = (h) => h ? `<span class="hash"><code>${esc(h)}</code><button class="copy" data-copy="${esc(h)}" title="copy">⧉</button></span>` : "—";
const POLL_MS = 2000;
const BATCH_SIZE = 8;  // the CLI's default; the dry run takes the first batch

document.addEventListener("click", (e) => {
  const text = e.target.dataset?.copy;
  if (text) navigator.clipboard?.writeText(text).then(() => { e.target.textContent = "✓"; }, () => {});
});

// FastAPI answers 422 with a list of {loc, msg}; say which field and why.
function detailText(body) {
  const detail = body?.detail ?? body;
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).filter((p) => p !== "body" && p !== "query").join(".") || "the request"}: ${String(d.msg).replace(/^Value error, /, "")}`).join("; ");
  return typeof detail === "string" ? detail : JSON.stringify(detail);
}
// What a request was about, for an error a person reads (the API path stays in the console).
const TOPICS = { models: "the model", inputs: "the input files", jobs: "the job", quotes: "the quote", leases: "the lease",
                 auth: "sign-in", providers: "the providers", challenges: "the challenges", disputes: "the disputes",
                 slashes: "the slashes", deployment: "the deployment", health: "the backend's health" };
function apiError(path, options, status, body) {
  const topic = TOPICS[path.split(/[/?]/)[1]] ?? "the request";
  const verb = (options.method ?? "GET") === "GET" ? "could not load" : "refused";
  const reason = detailText(body).replace(/\.$/, "");
  const why = status >= 500 ? `the backend failed (${reason || status}); try again shortly` : reason;
  return `The backend ${verb} ${topic}: ${why}.`;
}
async function api(path, options = {}) {
  const response = await fetch(path, options);
  if (response.status === 204) return null;  // no content (FastAPI still labels it JSON)
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    console.warn(`${options.method ?? "GET"} ${path}: ${response.status}`, body);
    throw Object.assign(new Error(apiError(path, options, response.status, body)), { status: response.status });
  }
  return body;
}
// Polls re-render a table only when its content changed, so a button is not replaced under a click.
const shown = new WeakMap();
function render(element, html) {
  if (shown.get(element) === html) return false;
  shown.set(element, html);
  element.innerHTML = html;
  return true;
}
// The chain's and backend's state names in a renter's words.
const WORDS = { funded: "paid, waiting for the provider", accepted: "running", committed: "result delivered",
  finalized: "done, provider paid", refunded: "refunded", "cancel requested": "cancel requested",
  open: "open", answered: "answered by the provider", escalated: "sent to the dispute committee",
  provider_faulted: "provider at fault, slashed", challenger_faulted: "challenger wrong, bond lost",
  settled: "settled", dismissed: "dismissed", provider_at_fault: "provider at fault", challenger_wrong: "challenger wrong",
  no_fault: "no fault found", voting: "voting", active: "active", ended: "ended" };
const words = (state) => WORDS[state] ?? String(state ?? "").replace(/_/g, " ");
function say(text) { $("status").textContent += text + "\n"; }

// ---- state ----
const state = { deployment: null, account: null, token: null, providers: new Map(), models: new Map(), openJob: null,
                shownJob: "", checks: new Map(), itemBytes: new Map(), busy: false, chainNow: null };

async function wallet(method, params = []) {
  if (!window.ethereum) throw new Error("no browser wallet found (EIP-1193 window.ethereum)");
  return window.ethereum.request({ method, params });
}
async function call(contract, signature, args = []) {
  const to = state.deployment.contracts[contract];
  return wallet("eth_call", [{ to, data: eth.encode(signature, args) }, "latest"]);
}
// Reads for the checks the backend is not trusted with (result roots, slashability): through the
// wallet when it is on the deployment's chain, else through a read-only RPC URL the user gave the
// page (never one the backend names); null when there is neither.
function rpcUrl() { return $("rpc-url").value.trim(); }
async function rpc(url, method, params) {
  if (!/^https?:\/\/[^\s]+$/.test(url)) throw new Error(`read-only RPC URL "${url}": expected http(s)://host:port`);
  const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
                                      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
  const body = await response.json().catch(() => ({}));
  if (!response.ok || body.error || !("result" in body)) throw new Error(`${url}: ${method}: ${body.error?.message ?? response.status}`);
  return body.result;
}
async function chainReader() {
  const wanted = (await deployment()).chain_id;
  if (state.account && Number(BigInt(await wallet("eth_chainId"))) === wanted) {
    return { read: (method, params) => wallet(method, params), source: `chain ${wanted}, read through your wallet`, viaWallet: true };
  }
  const url = rpcUrl();
  if (!url) return null;
  const read = (method, params) => rpc(url, method, params);
  const served = Number(BigInt(await read("eth_chainId", [])));
  if (served !== wanted) throw new Error(`the RPC ${url} serves chain ${served}, not the deployment's chain ${wanted}`);
  return { read, source: `chain ${wanted}, read through ${url}`, viaWallet: false };
}

// A job as the chain holds it (JobEscrow.jobState): status, flags, and the first 24 bytes of
// keccak256(abi.encode(job)). The backend's job is taken only if it hashes to that slot, and then
// its result fields (root, item count, digest) are the committed ones; null result: not committed.
const JOB_STATUS = ["none", "funded", "accepted", "committed", "finalized", "refunded"];
async function chainJob(reader, job) {
  const to = state.deployment.contracts.JobEscrow;
  const words = eth.words(await reader.read("eth_call", [{ to, data: eth.encode("jobState(uint256)", [job.job_id]) }, "latest"]));
  const status = JOB_STATUS[Number(BigInt(words[1]))] ?? "unknown";
  if (status === "none") throw new Error(`job ${job.job_id} does not exist on ${reader.source}`);
  const encoded = merkle.hexToBytes("0x" + jobWords(job).map(eth.word).join(""));
  if (merkle.bytesToHex(keccak256(encoded)).slice(0, 50) !== words[0].slice(0, 50).toLowerCase()) {
    throw new Error(`the backend's job ${job.job_id} does not match the chain's hash: nothing it says about the job is trusted`);
  }
  const committed = job.output_root && BigInt(job.item_count ?? 0) > 0n;
  return { status, endsAt: Number(BigInt(words[3])), cancelled: BigInt(words[4]) !== 0n, resultSlashed: BigInt(words[5]) !== 0n,
           result: committed ? { root: job.output_root.toLowerCase(), count: Number(job.item_count),
                                 digest: job.result_digest.toLowerCase() } : null };
}

function authHeaders(extra = {}) { return { ...extra, Authorization: `Bearer ${state.token}` }; }

// ---- network and sign-in: both refuse before anything is paid ----
// The deployment (chain id, addresses), fetched once and again after a failure: the wallet may
// be connected before the page's first fetch has answered.
let deploymentLoad = null;
function deployment() {
  deploymentLoad ??= api("/deployment").then((d) => (state.deployment = d), (e) => { deploymentLoad = null; throw e; });
  return deploymentLoad;
}

async function checkChain() {
  const wanted = (await deployment()).chain_id;
  const walletChain = Number(BigInt(await wallet("eth_chainId")));
  if (walletChain === wanted) { $("chain-warning").hidden = true; return; }
  $("chain-warning").hidden = false;
  $("chain-text").textContent = `Your wallet is on chain ${walletChain}; this marketplace settles on chain ${wanted}.`;
  throw new Error(`wrong network: wallet on chain ${walletChain}, deployment on chain ${wanted}; nothing was sent`);
}
$("switch-chain").onclick = async () => {
  try {
    await wallet("wallet_switchEthereumChain", [{ chainId: "0x" + state.deployment.chain_id.toString(16) }]);
    await checkChain();
    say(`wallet switched to chain ${state.deployment.chain_id}`);
    await showWallet();
  } catch (e) { say(`error: ${e.message}`); }
};

// A signature is asked only while the wallet is on the deployment's chain: a wallet elsewhere is
// asked to switch first (wallet_switchEthereumChain), and nothing is signed if it does not.
async function ensureChain() {
  const wanted = (await deployment()).chain_id;
  if (Number(BigInt(await wallet("eth_chainId"))) === wanted) return checkChain();
  try {
    await wallet("wallet_switchEthereumChain", [{ chainId: "0x" + wanted.toString(16) }]);
  } catch (e) {
    await checkChain().catch(() => {});  // shows the warning and its switch button
    throw new Error(`your wallet is on another network and did not switch to chain ${wanted} (${e.message}); nothing was signed`);
  }
  await checkChain();  // a wallet that says it switched but did not is still refused
  say(`wallet switched to chain ${wanted}`);
}

async function signIn() {
  await ensureChain();
  const { message } = await api(`/auth/message?address=${state.account}`);
  const hex = merkle.bytesToHex(new TextEncoder().encode(message));
  let signature;
  try {
    signature = await wallet("personal_sign", [hex, state.account]);
  } catch (e) { throw new Error(`sign-in refused by the wallet (${e.message}); nothing was uploaded or paid`); }
  state.token = (await api("/auth/login", { method: "POST", headers: { "Content-Type": "application/json" },
                                          body: JSON.stringify({ message, signature }) })).token;
  say(`signed in as ${state.account}`);
  await loadModels();
}

$("connect").onclick = async () => {
  try {
    [state.account] = await wallet("eth_requestAccounts");
    state.account = state.account.toLowerCase();
    $("connect").textContent = "Wallet connected";
    $("connect").disabled = true;
    $("submit").disabled = false;
    await showWallet();
    await refresh();
  } catch (e) { say(`error: ${e.message}`); }
};

// A wallet that changes account or network mid-session: a new account needs its own sign-in;
// a new network is checked again before anything is sent.
window.ethereum?.on?.("accountsChanged", (accounts) => {
  state.account = accounts[0]?.toLowerCase() ?? null;
  state.token = null;
  if (state.account) showWallet().catch((e) => say(`error: ${e.message}`));
});
window.ethereum?.on?.("chainChanged", () => { if (state.account) showWallet().catch((e) => say(`error: ${e.message}`)); });

async function showWallet() {
  $("account").innerHTML = hash(state.account);
  const onChain = await checkChain().then(() => true, () => false);
  const balance = await wallet("eth_getBalance", [state.account, "latest"]);
  $("wallet-balance").innerHTML = $("owed-wallet").innerHTML = eth.amount(BigInt(balance)) + (onChain ? "" : " (on another network)");
  if (onChain) await loadBalances();
}

// ---- providers and PoG ----
// A provider a renter can count on: what the matcher offers (active with its stake, last PoG passed,
// agent not silent); otherwise the backend's reasons, in words.
const usable = (p) => p.available && p.pog_passed === true && !(p.why_not ?? []).length;
function availableText(p) {
  if (usable(p)) return `<span class="ok">available</span>`;
  const why = p.why_not?.length ? p.why_not : [p.available ? "not verified" : "not available"];
  return `<span class="bad">not available: ${esc(why.join("; "))}</span>`;
}
// When each provider's last Proof-of-GPU round was recorded: ProviderRegistry.pogStatusOf's
// timestamp, read from the chain (the index has rounds, not times), once per round.
const pogDates = new Map();  // "address:round" -> unix seconds
async function readPogDates(providers) {
  const reader = await chainReader().catch(() => null);
  if (!reader) return;
  const to = state.deployment.contracts.ProviderRegistry;
  await Promise.all(providers.filter((p) => p.pog_round_id != null && !pogDates.has(`${p.address}:${p.pog_round_id}`))
    .map(async (p) => {
      const words = eth.words(await reader.read("eth_call", [{ to, data: eth.encode("pogStatusOf(address)", [p.address]) }, "latest"]));
      pogDates.set(`${p.address}:${BigInt(words[0])}`, Number(BigInt(words[4])));
    }));
}
// The backend's record of each provider's last round: the devices its verifier reported (NVML's
// names and memory, a claim) and when it reported them, the date shown without a chain to read.
const pogRecords = new Map();  // "address:round" -> { reportedAt, devices }
async function readPogRecords(providers) {
  await Promise.all(providers.filter((p) => p.pog_round_id != null && !pogRecords.has(`${p.address}:${p.pog_round_id}`))
    .map(async (p) => {
      const round = (await api(`/providers/${p.address}/pog?limit=5`)).find((r) => r.round_id === p.pog_round_id);
      const reported = round?.devices.map((d) => d.reported_at).sort().at(-1);
      pogRecords.set(`${p.address}:${p.pog_round_id}`, { reportedAt: reported ?? null, devices: round?.devices ?? [] });
    }));
}
function lastPogText(p) {
  if (p.pog_round_id == null) return "never";
  const key = `${p.address}:${p.pog_round_id}`, when = pogDates.get(key), record = pogRecords.get(key);
  const outcome = p.pog_passed ? "passed" : "failed";
  if (when) return `${outcome} ${eth.date(when)}`;
  if (record?.reportedAt) return `${outcome} ${esc(isoDate(record.reportedAt))} <span class="muted">(the backend's record)</span>`;
  return `${outcome} <span class="muted">(round ${p.pog_round_id}; dated on-chain with a wallet or read-only RPC)</span>`;
}
// GPUs and memory per GPU as the round's verifier recorded them (NVML: the provider's claim).
function gpusText(p) {
  const devices = pogRecords.get(`${p.address}:${p.pog_round_id}`)?.devices ?? [];
  const memory = [...new Set(devices.filter((d) => d.memory_bytes != null).map((d) => Math.round(d.memory_bytes / 2 ** 30)))];
  const names = [...new Set(devices.filter((d) => d.name).map((d) => d.name))];
  return `${p.gpu_count} × ${esc(names.join(", ") || p.gpu_model)}${memory.length ? `, ${memory.join("/")} GiB each` : ""}`;
}
function offerCard(p) {
  const verified = p.pog_passed ? esc(p.gpu_class ?? p.gpu_model) : p.pog_passed === false ? "failed its Proof of GPU" : "not verified yet";
  const dt = (k, v, cls = "") => `<dt>${k}</dt><dd class="${cls}">${v}</dd>`;
  return `<article class="offer${usable(p) ? "" : " unavailable"}" data-address="${esc(p.address)}">
    <div class="class ${p.pog_passed ? "" : "bad"}">${verified}${p.tflops != null ? ` <span class="muted">${p.tflops} TFLOPS</span>` : ""}</div>
    <div class="gpus">${gpusText(p)}</div>
    <div class="price-hour">${eth.amount(p.price_per_gpu_hour)} <span class="muted">per GPU-hour</span></div>
    <dl>${dt("per input item", eth.amount(p.price_per_job_unit), "price-item")}
      ${dt("reputation", `${p.reputation.toFixed(2)} <span class="muted">(${p.challenges_won} challenges won, ${p.challenges_lost} lost; ${p.jobs_finalized} jobs done)</span>`, "reputation")}
      ${dt("last verified", lastPogText(p), "last-pog")}
      ${dt("last seen", p.last_seen_at ? esc(isoDate(p.last_seen_at)) : "never", "last-seen")}
      ${p.mining_floor_wei_per_hour == null ? "" : dt("mining floor", eth.amount(p.mining_floor_wei_per_hour) + " per GPU-hour")}
      ${dt("provider", hash(p.address))}</dl>
    <div class="available">${availableText(p)}</div>
    ${usable(p) ? `<div><button class="rent" data-address="${esc(p.address)}">Rent these GPUs</button></div>` : ""}</article>`;
}
async function loadProviders() {
  const providers = await api("/providers");
  state.providers = new Map(providers.map((p) => [p.address, p]));
  await Promise.all([readPogDates(providers).catch(() => {}), readPogRecords(providers).catch(() => {})]);
  const ordered = [...providers.filter(usable), ...providers.filter((p) => !usable(p))];
  render($("offers"), ordered.map(offerCard).join("") || `<p class="muted">No provider has registered yet.</p>`);
  // The lease selector lists usable providers first and picks one of them by default: a renter
  // should not pay, by default, a provider whose Proof of GPU failed or whose stake was slashed.
  for (const [select, list] of [[$("pog-provider"), providers], [$("lease-provider"), ordered]]) {
    const current = select.value;
    const options = list.map((p) => `<option value="${esc(p.address)}">${esc(p.address)} (${esc(p.gpu_class ?? p.gpu_model)}${
      select.id === "lease-provider" && !usable(p) ? ", not available" : ""})</option>`).join("");
    if (render(select, options) && current) select.value = current;
  }
  if (providers.length) await loadPog($("pog-provider").value);
}
$("offers").onclick = (e) => {
  const rent = e.target.closest(".rent");
  if (!rent) return;
  $("lease-provider").value = rent.dataset.address;
  location.hash = "#/leases";
};
const isoDate = (iso) => iso.replace("T", " ").replace(/\.\d+/, "").replace(/(Z|\+00:00)$/, " UTC");

// What the round's verifier recorded of each device: NVML's name (the prover's claim, with UUID,
// memory, serial and driver on hover) and the outcome of its CC attestation for the round's seed.
function deviceCell(d) {
  if (d.name == null) return "—";
  const detail = `${d.uuid}, ${(d.memory_bytes / 2 ** 30).toFixed(0)} GiB, serial ${d.serial ?? "none"}, driver ${d.driver_version}, CC ${d.cc_mode}`;
  return `<span title="${esc(detail)}">${esc(d.name)}</span>`;
}

async function loadPog(address) {
  const rounds = (await api(`/providers/${address}/pog`)).reverse();
  const tflops = (r) => r.passed && r.tflops_milli != null ? r.tflops_milli / 1000 : null;
  const devices = (r) => r.devices.length ? r.devices.map(deviceCell).join("<br>") : "—";
  const attestation = (r) => r.devices.length ? r.devices.map((d) =>
    `<span class="${d.attestation.startsWith("attested") ? "ok" : d.attestation.startsWith("failed") ? "bad" : ""}">${esc(d.attestation)}</span>`).join("<br>") : "—";
  render($("pog-rounds").tBodies[0], rounds.map((r) => `<tr><td>${r.round_id}</td><td>${esc(r.status)}</td><td>${r.n}</td>
    <td>${esc(r.gpu_class || "—")}</td><td>${tflops(r) ?? "—"}</td>
    <td class="${r.passed ? "ok" : "bad"}">${r.passed == null ? "pending" : r.passed ? "passed" : "failed"}</td>
    <td>${devices(r)}</td><td>${attestation(r)}</td></tr>`).join(""));
  const svg = $("pog-chart"), w = 640, h = 180, pad = 30;
  const values = rounds.map((r) => tflops(r) ?? 0), top = Math.max(1, ...values);
  const x = (i) => pad + (rounds.length < 2 ? (w - 2 * pad) / 2 : i * (w - 2 * pad) / (rounds.length - 1));
  const y = (v) => h - pad - v / top * (h - 2 * pad);
  render(svg, `<line x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}" stroke="#999"/>
    <text x="4" y="${pad}" font-size="11">${top} TFLOPS</text>
    <polyline points="${values.map((v, i) => `${x(i)},${y(v)}`).join(" ")}" fill="none" stroke="#0969da" stroke-width="2"/>` +
    rounds.map((r, i) => `<circle class="pog-point" cx="${x(i)}" cy="${y(values[i])}" r="4" fill="${r.passed ? "#1a7f37" : "#cf222e"}">
      <title>round ${r.round_id}: ${tflops(r) ?? "no passed measurement"}</title></circle>`).join(""));
}

// ---- models ----
function bytesText(n) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0, v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i ? `${v.toFixed(1)} ${units[i]}` : `${v} B`;
}
async function loadModels() {
  const models = await api("/models", state.token ? { headers: authHeaders() } : {});
  state.models = new Map(models.map((m) => [m.content_hash, m]));
  render($("model-list"), models.map((m) =>
    `<option value="${esc(m.content_hash)}">${esc(m.name)} (${esc(m.format)}, ${m.private ? "private" : "public"}${m.owner === state.account ? ", yours" : ""})</option>`).join(""));
  render($("models").tBodies[0], models.map((m) => `<tr><td>${esc(m.name)}</td><td>${hash(m.content_hash)}</td>
    <td>${esc(m.format)}</td><td>${hash(m.owner)}</td><td>${m.private ? "private" : "public"}</td>
    <td title="${m.size} bytes">${bytesText(m.size)}</td><td>${esc(m.created_at.replace("T", " ").replace(/\.\d+/, ""))}</td></tr>`).join(""));
}

$("model-upload").onclick = async () => {
  const button = $("model-upload");
  button.disabled = true;
  $("status").textContent = "";
  try {
    const file = $("model-file").files[0], name = $("model-name").value.trim() || file?.name;
    if (!file) throw new Error("choose a model file to upload");
    if (!state.account) throw new Error("connect your wallet first (uploads are signed in)");
    if (!state.token) await signIn();
    const query = new URLSearchParams({ name, format: $("model-format").value, private: $("model-private").checked });
    const model = await api(`/models?${query}`, { method: "POST", body: await file.arrayBuffer(),
      headers: authHeaders({ "Content-Type": "application/octet-stream" }) });
    say(`model ${model.name} stored and loads as ${model.format}: ${model.content_hash}`);
    $("model").value = model.content_hash;
    await loadModels();
  } catch (e) { say(`error: ${e.message}`); } finally { button.disabled = false; }
};

// ---- submitting a job: quote, confirm, then the wallet ----
function askConfirmation(quote, provider, items, deadline) {
  $("quote").hidden = false;
  $("quote").innerHTML = `<h3>Quote</h3><table>
    <tr><th>price</th><td id="quote-price">${eth.format(quote.price_wei)}</td></tr>
    <tr><th>provider</th><td>${hash(quote.provider)}</td></tr>
    <tr><th>GPU class</th><td>${esc(quote.gpu_class ?? "unverified")} ${provider?.tflops ? `(${provider.tflops} TFLOPS)` : ""}</td></tr>
    <tr><th>reputation</th><td>${provider ? `${provider.reputation.toFixed(2)} (${provider.challenges_won} challenges won, ${provider.challenges_lost} lost, ${provider.jobs_finalized} jobs)` : "—"}</td></tr>
    <tr><th>items</th><td>${items}</td></tr>
    <tr><th>time</th><td>result due by ${eth.date(deadline)} (within ${eth.duration(deadline - state.chainNow)}; or the escrow refunds you in full)${provider?.latency_ms != null ? `, provider latency ${provider.latency_ms} ms` : ""}</td></tr>
    </table><p><button id="confirm-pay">Pay ${eth.format(quote.price_wei)} from my wallet</button> <button id="cancel-pay">Cancel</button></p>`;
  return new Promise((resolve) => {
    $("confirm-pay").onclick = () => { $("confirm-pay").disabled = $("cancel-pay").disabled = true; resolve(true); };
    $("cancel-pay").onclick = () => { $("confirm-pay").disabled = $("cancel-pay").disabled = true; resolve(false); };
  });
}

$("submit").onclick = async () => {
  // Disabled from the first click until this submission ends: a second click cannot pay again.
  if (state.busy) return;
  state.busy = true;
  $("submit").disabled = true;
  $("status").textContent = "";
  try {
    const model = $("model").value.trim(), files = Array.from($("inputs").files);
    if (!state.account) throw new Error("connect your wallet first");
    if (!model) throw new Error("choose a model: pick one from the list or upload a model file");
    if (!/^0x[0-9a-f]{64}$/.test(model)) throw new Error(`model must be a content hash (0x and 64 hex digits), got "${model}"`);
    if (!files.length) throw new Error("choose at least one input file");
    const maxPrice = eth.parse($("max-price").value);
    await checkChain();
    if (!state.token) await signIn();
    // As `unchained job submit`: the model must be in the hub (its format comes from there) and
    // must run the renter's inputs in a dry run before anything is paid.
    const entry = await api(`/models/${model}`, { headers: authHeaders() }).catch((e) => {
      throw e.status === 404 ? new Error(`model ${model} is not in the hub (or is someone else's private model): upload it above first`) : e;
    });
    const inputs = [];
    for (const file of files) {
      const stored = await api("/inputs", { method: "POST", body: await file.arrayBuffer(),
        headers: authHeaders({ "Content-Type": "application/octet-stream" }) });
      inputs.push(stored.content_hash);
    }
    say(`uploaded ${inputs.length} inputs; checking that ${entry.name} runs them (dry run on the backend)`);
    const verdict = await api(`/models/${model}/check`, { method: "POST", headers: authHeaders({ "Content-Type": "application/json" }),
                                                        body: JSON.stringify({ inputs: inputs.slice(0, BATCH_SIZE) }) });
    if (!verdict.ok) throw new Error(`the model cannot run your inputs: ${verdict.stage} failed: ${verdict.error}; nothing was paid`);
    const request = JSON.stringify({ model, items: inputs.length, max_price_wei: maxPrice.toString() });
    const quotes = await api("/quotes", { method: "POST", headers: { "Content-Type": "application/json" }, body: request });
    if (!quotes.length) {
      const why = await api("/quotes/explain", { method: "POST", headers: { "Content-Type": "application/json" }, body: request });
      throw new Error(`no provider can take this job: ${why.message ?? why.reason}`);
    }
    const best = quotes[0];
    if (BigInt(best.price_wei) > maxPrice) {
      throw new Error(`the quote's price ${eth.format(best.price_wei)} is above your maximum ${eth.format(maxPrice)}; nothing was paid`);
    }
    // The deadline counts from the chain's clock (a test chain's may run ahead of this one's).
    const latest = await wallet("eth_getBlockByNumber", ["latest", false]);
    state.chainNow = Number(BigInt(latest.timestamp));
    const deadline = state.chainNow + 3600;
    if (!await askConfirmation(best, state.providers.get(best.provider), inputs.length, deadline)) {
      say("cancelled: nothing was paid");
      return;
    }
    const spec = { version: 1, model, modelFormat: entry.format, inputs, batchSize: BATCH_SIZE, tolerancePpm: 0, deadline,
                   priceWei: String(best.price_wei), provider: best.provider.toLowerCase() };
    // The payment is built here, not taken from the backend: createJob on the deployment's escrow
    // for the spec this page hashed itself (protocol/jobs.py's canonical JSON); the backend must
    // have stored that very spec, or the provider would be sent to run another job.
    const specHash = merkle.bytesToHex(keccak256(new TextEncoder().encode(canonicalSpec(spec))));
    const stored = await api("/jobs/specs", { method: "POST", headers: { "Content-Type": "application/json" },
                                              body: JSON.stringify(spec) });
    if (stored.spec_hash !== specHash) {
      throw new Error(`the backend stored spec ${stored.spec_hash}, not this job's ${specHash}; nothing was paid`);
    }
    await checkChain();  // the wallet may have changed network while the quote was open
    const txHash = await wallet("eth_sendTransaction", [{ from: state.account, to: state.deployment.contracts.JobEscrow,
      data: eth.encode("createJob(address,bytes32,uint256,uint64)", [spec.provider, specHash, spec.priceWei, deadline]),
      value: "0x" + BigInt(spec.priceWei).toString(16) }]);
    await mined(txHash);
    say(`funding transaction confirmed: ${txHash}`);
    for (let i = 0; i < 100; i++) {  // bounded wait for the indexer
      const mine = (await api(`/jobs?renter=${state.account}`)).find((j) => j.spec_hash === stored.spec_hash);
      if (mine) { say(`job ${mine.job_id} funded (${mine.status})`); await loadJobs(); location.hash = `#/jobs/${mine.job_id}`; return; }
      await new Promise((r) => setTimeout(r, 300));
    }
    say("the indexer has not seen the job yet; it will appear in the list once confirmed");
  } catch (e) {
    say(`error: ${e.message}`);
  } finally {
    $("quote").hidden = true;
    state.busy = false;
    $("submit").disabled = !state.account;
    showWallet().catch(() => {});
  }
};

// protocol/jobs.py JobSpec.canonical: sorted keys, no spaces (every value here is ASCII).
function canonicalSpec(spec) { return JSON.stringify(spec, Object.keys(spec).sort()); }

// ---- jobs: list and detail refreshed together ----
function statusCell(j) {
  return `${esc(words(j.status))}${j.frozen ? " (on hold: challenged)" : ""}${j.failure ? ` <span class="bad">failed: ${esc(j.failure)}</span>` : ""}`;
}
async function loadJobs() {
  const mine = $("only-mine").checked && state.account;
  const jobs = await api(mine ? `/jobs?renter=${state.account}` : "/jobs");
  render($("jobs").tBodies[0], jobs.map((j) => `<tr data-job="${j.job_id}" style="cursor:pointer">
    <td><a href="#/jobs/${j.job_id}">${j.job_id}</a></td><td class="job-status">${statusCell(j)}</td><td>${hash(j.provider)}</td>
    <td>${eth.amount(j.price)}</td><td>${j.item_count ?? j.spec?.inputs?.length ?? ""}</td><td>${eth.date(j.deadline)}</td></tr>`).join(""));
}

async function openJob(id) { state.openJob = Number(id); state.shownJob = ""; await renderJob(); }
// The job's state in a heading, in a renter's words: what happens next rather than the escrow's word.
function jobHeadline(j) {
  return words(j.status) + (j.frozen ? ", on hold while challenged" : "") +
    (j.failure && j.status !== "finalized" ? ", the provider could not run it" : "");
}

// Re-rendered only when the job or its checks change, so buttons stay put between polls.
async function renderJob() {
  if (state.openJob == null) return;
  const job = await api(`/jobs/${state.openJob}`);
  // The result once committed, or as the provider signed it before its commit (the renter's evidence).
  const result = job.output_root || job.result_available_at ? await api(`/jobs/${job.job_id}/result`) : null;
  const checks = state.checks.get(job.job_id) || {};
  const refund = refundAction(job);
  const slash = result ? await slashAction(job, result) : null;
  const challenge = await challengeAction(job);
  const key = JSON.stringify([job, result, checks, refund, slash, challenge]);
  if (key === state.shownJob) return;
  state.shownJob = key;
  const row = (k, v) => `<tr><th>${k}</th><td>${v}</td></tr>`;
  let html = `<h3>job ${job.job_id}: <span class="job-state">${esc(jobHeadline(job))}</span></h3><table>` +
    row("status", statusCell(job)) + row("progress", progressCell(job, result)) + row("model", modelCell(job.spec)) + row("inputs", inputsCell(job.spec)) +
    row("renter", hash(job.renter)) + row("provider", hash(job.provider)) +
    row("price", eth.amount(job.price)) + row("result due by", eth.date(job.deadline)) +
    row("job terms (hash on-chain)", hash(job.spec_hash)) + row("payment transaction", hash(job.funded_tx)) +
    row("result fingerprint (Merkle root)", hash(job.output_root)) + row("result items", job.item_count ?? "—") +
    row("challenges possible until", eth.date(job.challenge_window_end)) +
    (job.cancellable_at ? row("cancel possible from", eth.date(job.cancellable_at)) : "") +
    row("paid to provider", eth.amount(job.provider_amount)) + row("protocol fee", eth.amount(job.fee)) +
    row("refunded to you", eth.amount(job.refund)) + "</table>";
  if (refund?.fn) html += `<p><button id="refund" data-fn="${refund.fn}">${refund.label}</button></p>`;
  else if (refund) html += `<p>${esc(refund.note)}</p>`;
  const pointer = refundPointer(job, refund);
  if (pointer) html += `<p id="refund-pointer">${pointer}</p>`;
  if (result) {
    html += `<h4>Results</h4><p><button id="verify">Download and verify all items</button>
      <span id="root-source">${esc(checks.rootSource ?? "")}</span></p><table id="result-items">
      <thead><tr><th>item</th><th>digest</th><th>size</th><th>check</th><th>preview</th><th>file</th></tr></thead><tbody>` +
      result.items.map((i) => {
        const c = checks[i.index];
        const verdict = !i.digest ? "not uploaded yet" : !c ? "not checked" : c.ok ? "verified" : `NOT verified: ${c.error}`;
        return `<tr data-item="${i.index}"><td>${i.index}</td><td>${hash(i.digest)}</td><td>${i.size ?? "—"}</td>
          <td class="check ${c ? (c.ok ? "ok" : "bad") : ""}">${esc(verdict)}</td>
          <td class="preview">${esc(c?.preview ?? "")}</td><td>${c?.url ? `<a class="save-item" href="${c.url}" download="job${job.job_id}-${itemName(i.index)}">save</a>` : ""}</td></tr>`;
      }).join("") + "</tbody></table>" + downloadAll(job, result, checks);
    if (slash?.available) {
      html += `<p id="slash"><button id="slash-signed">Slash the provider with its signed result</button>
        <span class="bad">${esc(slash.available)}</span></p>`;
    } else if (slash) html += `<p id="slash"><span class="slash-note">${esc(slash.note)}</span></p>`;
  }
  if (challenge?.fn) {
    html += `<p id="challenge"><button id="challenge-job">${esc(challenge.label)}</button>
      <span class="challenge-note">${esc(challenge.available)}</span></p>`;
  } else if (challenge) html += `<p id="challenge"><span class="challenge-note">${esc(challenge.note)}</span></p>`;
  $("job-detail").innerHTML = html;
  if (refund?.fn) $("refund").onclick = () => { $("refund").disabled = true; sendTx("JobEscrow", refund.fn, jobWords(job), "refund"); };
  if (result) $("verify").onclick = () => verifyResults(job, result);
  if ($("save-all")) $("save-all").onclick = () => saveZip(job, result);
  if (challenge?.fn) {
    $("challenge-job").onclick = () => {
      $("challenge-job").disabled = true;
      sendTx("ChallengeManager", challenge.fn, challenge.args, challenge.what, BigInt(challenge.value));
    };
  }
  if (slash?.available) {
    $("slash-signed").onclick = () => {
      $("slash-signed").disabled = true;
      const { type, values } = signedResultTuple(result.signed);
      const fn = `slashSignedResult(${JOB_TUPLE},${type},bytes)`;
      sendTx("JobEscrow", fn, [], `slash job ${job.job_id}'s provider with its signed result`, 0n,
             eth.encodeWithBytes(fn, [...jobWords(job), ...values], result.signed.signature));
    };
  }
}

// Where the job is on its way: paid, taken by the provider, result delivered (and how many of its
// items the provider uploaded), provider paid; or refunded.
function progressCell(job, result) {
  const order = ["funded", "accepted", "committed", "finalized"];
  const at = order.indexOf(job.status);
  const uploaded = result ? result.items.filter((i) => i.digest).length : 0;
  const steps = [["paid", 0], ["taken by the provider", 1],
                 [`result delivered${result ? ` (${uploaded} of ${result.items.length} items uploaded)` : ""}`, 2], ["provider paid", 3]];
  if (job.status === "refunded" || at < 0) return esc(words(job.status));
  return `<span class="progress">${steps.map(([text, i]) => `<span class="${i <= at ? "ok" : "muted"}">${i <= at ? "✓" : "○"} ${esc(text)}</span>`)
    .join(" → ")}</span>`;
}

// The job's model (its hub name when the page knows it) and its inputs, from the stored spec.
function modelCell(spec) {
  if (!spec?.model) return "—";
  const entry = state.models.get(spec.model);
  return `${entry ? `${esc(entry.name)} ` : ""}(${esc(spec.modelFormat ?? entry?.format ?? "?")}) ${hash(spec.model)}`;
}
function inputsCell(spec) {
  if (!spec?.inputs) return "—";
  const n = spec.inputs.length;
  return `<details><summary>${n} input file${n === 1 ? "" : "s"}, in batches of ${spec.batchSize ?? "?"}</summary>` +
    spec.inputs.map((h, i) => `<div>item ${i}: ${hash(h)}</div>`).join("") + "</details>";
}

// Every item at once: one zip of the items this page verified against the chain (the bytes it
// hashed, never downloaded again), named as the CLI names them in its folder (item-NNNNNN.out);
// the CLI line fetches and verifies them all from a terminal.
const itemName = (index) => `item-${String(index).padStart(6, "0")}.out`;
function downloadAll(job, result, checks) {
  const verified = result.items.filter((i) => checks[i.index]?.ok).length;
  const line = `unchained job result ${job.job_id} --keystore YOUR-KEYSTORE.json --out job-${job.job_id}`;
  const unverified = result.items.length - verified;
  return `<p id="download-all">${verified ? `<button id="save-all">Download all ${verified} verified items (zip)</button> ` +
    (unverified ? `<span class="bad">${unverified} not verified, left out</span> ` : "") : ""}` +
    `Download and verify all ${result.items.length} items from a terminal: ${hash(line)}</p>`;
}
function saveZip(job, result) {
  const files = {};
  for (const i of result.items) {
    const bytes = state.itemBytes.get(`${job.job_id}:${i.index}`);
    if (state.checks.get(job.job_id)?.[i.index]?.ok && bytes) files[itemName(i.index)] = bytes;
  }
  const a = Object.assign(document.createElement("a"), { download: `job-${job.job_id}-results.zip`,
    href: URL.createObjectURL(new Blob([zipFiles(files)], { type: "application/zip" })) });
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
}

// Where a failed or refunded job's money is: credited in the escrow, paid out by a withdrawal.
function refundPointer(job, refund) {
  if (job.renter !== state.account) return "";
  const cli = (c) => `<code>${esc(c)}</code>`;
  if (job.status === "refunded") {
    return `${job.failure ? "This job failed: " : ""}its price ${eth.amount(job.refund ?? job.price)} was refunded to you in ` +
      `the job escrow. Withdraw it to your wallet under <a href="#/balances">Your balances</a> ` +
      `(or ${cli("unchained withdraw")}).`;
  }
  if (job.failure && (refund?.fn || refund?.note)) {
    return `The provider could not run this job: take your money back with the button above ` +
      `(or ${cli(`unchained job refund ${job.job_id}`)}), then withdraw it under <a href="#/balances">Your balances</a>.`;
  }
  return "";
}

// JobEscrow.slashSignedResult's JobResult built from the signed result's JSON, in the struct's
// field order (protocol/job_result.py JOB_RESULT_TYPES).
const JOB_RESULT_FIELDS = [["jobId", "uint256"], ["outputRoot", "bytes32"], ["itemCount", "uint256"],
                           ["resultDigest", "bytes32"], ["commitBy", "uint64"]];
function signedResultTuple(signed) {
  const absent = JOB_RESULT_FIELDS.filter(([name]) => signed[name] == null).map(([name]) => name);
  if (absent.length) throw new Error(`the signed result lacks ${absent.join(", ")}: not one the escrow takes`);
  return { type: `(${JOB_RESULT_FIELDS.map(([, type]) => type).join(",")})`, values: JOB_RESULT_FIELDS.map(([name]) => signed[name]) };
}

// Whether the renter can slash the job's provider with the result it signed, and why not, as
// JobEscrow.slashSignedResult decides it, from the chain (the job's state and committed result):
// a commit that differs from the signed result, or none by the deadline (not for a job the
// renter cancelled, nor where the provider signed to commit only by the deadline or later); once.
async function slashAction(job, result) {
  const signed = result.signed;
  if (!signed || !state.account || job.renter !== state.account) return null;
  let reader, view;
  try {
    reader = await chainReader();
    if (!reader?.viaWallet) {  // the slash is sent from the renter's wallet, on the deployment's chain
      return { note: `your signed result: switch your wallet to chain ${state.deployment.chain_id} to check whether it is slashable` };
    }
    view = await chainJob(reader, job);
  } catch (e) { return { note: `cannot check whether the signed result is slashable: ${e.message}` }; }
  if (view.resultSlashed) return { note: "slashed: the provider was slashed for this job's signed result (once per job)" };
  if (signed.commitBy == null) return { note: "the signed result names no commit time (commitBy): not one the escrow takes" };
  if (Number(signed.jobId) !== job.job_id || signed.provider.toLowerCase() !== job.provider) {
    return { note: "the signed result is not this job's provider's for this job: not slashable" };
  }
  const committed = view.result;
  if (committed) {
    if (committed.root === signed.outputRoot.toLowerCase() && committed.count === Number(signed.itemCount) &&
        committed.digest === signed.resultDigest.toLowerCase()) {
      return { note: "the committed result is the one the provider signed: nothing to slash" };
    }
    return { available: `the provider committed ${committed.root} (${committed.count} items), not the ${signed.outputRoot} ` +
      `(${signed.itemCount} items) it signed` };
  }
  if (view.cancelled) return { note: "you cancelled this job: a missing commit of its signed result is not slashable" };
  if (Number(signed.commitBy) >= job.deadline) {
    return { note: `the provider signed to commit by ${eth.date(signed.commitBy)}, not before the deadline: a missing commit is not slashable` };
  }
  const latest = await reader.read("eth_getBlockByNumber", ["latest", false]);
  if (Number(BigInt(latest.timestamp)) < job.deadline) {
    return { note: `signed but not committed yet: slashable from the deadline ${eth.date(job.deadline)} if the provider has not committed by then` };
  }
  return { available: `the provider signed a result and did not commit it by the deadline ${eth.date(job.deadline)}` };
}

// A challenge of the job's committed result (`unchained job challenge`): the provider must reveal
// CHALLENGE_SAMPLES random items' digests with proofs on-chain by the response deadline or be
// slashed (you are refunded); the escrow stays frozen meanwhile. Each step is offered only where
// ChallengeManager would take it, read from the chain through the wallet that pays: opening one
// (your job, its result committed, inside its challenge window, none open), claiming an unanswered
// one after its deadline, escalating an answered one of yours inside the escalation window;
// otherwise the page says why not.
const CHALLENGE_SAMPLES = 44;  // the CLI's default (the contract takes 1 to 64)
const CHALLENGE_STATUS = ["none", "open", "answered", "escalated"];
async function challengeAction(job) {
  if (!state.account || job.renter !== state.account) return null;
  let reader, view;
  try {
    reader = await chainReader();
    if (!reader?.viaWallet) return { note: `a challenge is paid from your wallet: switch it to chain ${state.deployment.chain_id}` };
    view = await chainJob(reader, job);
  } catch (e) { return { note: `cannot check whether this result can be challenged: ${e.message}` }; }
  const latest = await reader.read("eth_getBlockByNumber", ["latest", false]);
  const now = Number(BigInt(latest.timestamp));
  const manager = state.deployment.contracts.ChallengeManager;
  const read = async (signature, args = []) => reader.read("eth_call", [{ to: manager, data: eth.encode(signature, args) }, "latest"]);
  const open = BigInt(await read("activeJobChallenge(uint256)", [job.job_id]));
  if (open !== 0n) return openChallengeAction(job, open, now, read);
  if (view.status === "funded" || view.status === "accepted") {
    return { note: "nothing to challenge yet: the provider has not delivered a result" };
  }
  if (view.status === "refunded") return { note: "this job was refunded: there is no result to challenge" };
  if (view.status === "finalized") return { note: "the challenge window has closed and the provider was paid: this result can no longer be challenged" };
  if (!view.result) return { note: "the delivered result has no items: there is nothing to sample" };
  if (now >= view.endsAt) {
    return { note: `the challenge window closed at ${eth.date(view.endsAt)}: this result can no longer be challenged` };
  }
  const bond = BigInt(await read("minBond()"));
  return { fn: `challengeJob(${JOB_TUPLE},uint256)`, args: [...jobWords(job), CHALLENGE_SAMPLES], value: bond.toString(),
           label: `Challenge this result (bond ${eth.format(bond)})`, what: `challenge job ${job.job_id}'s result`,
           available: `until ${eth.date(view.endsAt)}: the provider must prove ${CHALLENGE_SAMPLES} random items on-chain ` +
             "or be slashed and you are refunded; your bond comes back if the provider was at fault, " +
             "and goes to the provider if it answers right" };
}
// IChallengeManager.Challenge, a static struct: its words in field order.
const CHALLENGE_WORDS = { challenger: 0, status: 3, responseDeadline: 6, answeredAt: 7, bond: 13 };
async function openChallengeAction(job, challengeId, now, read) {
  const id = challengeId.toString();  // kept in the rendered state, which is JSON
  const w = eth.words(await read("challenge(uint256)", [id]));
  const status = CHALLENGE_STATUS[Number(BigInt(w[CHALLENGE_WORDS.status]))];
  const due = Number(BigInt(w[CHALLENGE_WORDS.responseDeadline]));
  const mine = "0x" + w[CHALLENGE_WORDS.challenger].slice(-40) === state.account;
  if (status === "open" && now > due) {
    return { fn: "claimTimeout(uint256)", args: [id], value: "0", label: "The provider did not answer: slash it and refund me",
             what: `claim the timeout of challenge ${id}`,
             available: `challenge ${id}: no answer by ${eth.date(due)}; the provider is slashed, your job's price comes back ` +
               "to the job escrow, your bond and a reward to the challenges balance (both under Balances)" };
  }
  if (status === "open") return { note: `challenge ${id} of this result is open: the provider must answer by ${eth.date(due)}` };
  if (status === "answered") {
    const until = Number(BigInt(w[CHALLENGE_WORDS.answeredAt])) + Number(BigInt(await read("escalationWindow()")));
    const bond = eth.format(BigInt(w[CHALLENGE_WORDS.bond]));
    if (!mine) return { note: `challenge ${id} was answered by the provider; only its challenger can send it to the dispute committee` };
    if (now > until) return { note: `challenge ${id} was answered and its escalation window closed at ${eth.date(until)}: your bond of ${bond} goes to the provider` };
    return { fn: "escalate(uint256)", args: [id], value: "0", label: "Send the provider's answer to the dispute committee",
             what: `escalate challenge ${id}`,
             available: `challenge ${id} was answered; until ${eth.date(until)} staked verifiers can re-run it and vote: ` +
               `provider at fault, it is slashed and you get your price and bond back; answer right, your bond of ${bond} goes to the provider` };
  }
  if (status === "escalated") return { note: `challenge ${id} of this result is with the dispute committee: follow it under Challenges & slashes` };
  return { note: `challenge ${id} of this result: follow it under Challenges & slashes` };
}

// IJobEscrow.Job: JobEscrow keeps only its hash, so calls carry the job (a static tuple, which
// encodes as its ten words) and a wallet checks the backend's copy against the on-chain hash.
const JOB_TUPLE = "(uint256,address,address,address,uint256,bytes32,uint64,bytes32,uint256,bytes32)";
function jobWords(job, root = job.output_root, count = job.item_count, digest = job.result_digest) {
  return [job.job_id, job.renter, job.provider, job.token, job.price, job.spec_hash, job.deadline,
    root ?? 0, count ?? 0, digest ?? 0];
}

// Cancelling takes two steps (the provider may have handed out a signed result it has not
// committed yet): requestCancel, then cancel once the grace has passed with no commit.
function refundAction(job) {
  const open = job.status === "funded" || job.status === "cancel requested";
  if (job.renter !== state.account || !open || job.frozen) return null;
  const now = state.chainNow ?? Date.now() / 1000;
  if (now > job.deadline) return { fn: `refundExpired(${JOB_TUPLE})`, label: "Refund (deadline passed)" };
  if (job.status === "funded") return { fn: `requestCancel(${JOB_TUPLE})`, label: "Request cancel" };
  if (now < job.cancellable_at) {
    return { note: `Cancel requested: cancel possible from ${eth.date(job.cancellable_at)}, unless the provider ` +
      "commits a result first." };
  }
  return { fn: `cancel(${JOB_TUPLE})`, label: "Cancel and refund" };
}

// "verified" only against a root read from the chain (the job's on-chain state, through the
// wallet or a read-only RPC URL), never the backend's: each item is downloaded, hashed here and
// must rebuild that root at its index in a tree of the committed size. A result whose root is not
// the committed one is refused; with no chain to read, nothing is called verified.
async function verifyResults(job, result) {
  const button = $("verify");
  button.disabled = true;
  const checks = { rootSource: "" };
  state.checks.set(job.job_id, checks);
  let committed = null;
  try {
    const reader = await chainReader();
    if (!reader) {
      checks.rootSource = `cannot verify: connect a wallet on chain ${state.deployment.chain_id} or give a read-only ` +
        "RPC URL (the backend's root is not evidence)";
    } else {
      committed = (await chainJob(reader, job)).result;
      if (!committed) {
        checks.rootSource = `cannot verify: job ${job.job_id} has no result committed on ${reader.source} yet ` +
          "(a signed root is the provider's promise, not the chain's record)";
      } else if (result.output_root.toLowerCase() !== committed.root || Number(result.item_count) !== committed.count) {
        checks.rootSource = `REFUSED: the backend's result root ${result.output_root} (${result.item_count} items) is not ` +
          `the root committed on ${reader.source}: ${committed.root} (${committed.count} items)`;
      } else {
        checks.rootSource = `root checked against ${reader.source}: ${committed.root}`;
      }
    }
  } catch (e) { checks.rootSource = `cannot verify: ${e.message}`; }
  try {
    if (!state.token && state.account) await signIn();
    for (const item of result.items.filter((i) => i.digest)) {
      try {
        const response = await fetch(`/jobs/${job.job_id}/outputs/${item.index}`, { headers: authHeaders() });
        if (!response.ok) throw new Error(`download: ${response.status} ${detailText(await response.json().catch(() => ""))}`);
        const bytes = new Uint8Array(await response.arrayBuffer());
        const url = URL.createObjectURL(new Blob([bytes]));
        state.itemBytes.set(`${job.job_id}:${item.index}`, bytes);
        let preview;
        try { preview = items.describe(items.decode(bytes)); } catch (e) { preview = `not an item file: ${e.message}`; }
        if (!committed) { checks[item.index] = { ok: false, url, preview, error: "no root read from the chain to check it against" }; continue; }
        try {
          merkle.verifyItem(bytes, item.index, committed.count, item.proof, committed.root);
          checks[item.index] = { ok: true, url, preview };
        } catch (e) { checks[item.index] = { ok: false, url, preview, error: e.message }; }
      } catch (e) { checks[item.index] = { ok: false, error: e.message }; }
    }
  } catch (e) { checks.rootSource += ` (download: ${e.message})`; }
  state.shownJob = "";
  await renderJob();
}

// A sent transaction is reported by its receipt: a reverted one says so instead of "sent".
async function mined(txHash) {
  for (let i = 0; i < 120; i++) {  // bounded: about a minute
    const receipt = await wallet("eth_getTransactionReceipt", [txHash]);
    if (receipt) {
      if (BigInt(receipt.status) !== 1n) throw new Error(`transaction ${txHash} reverted in block ${BigInt(receipt.blockNumber)}`);
      return receipt;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`transaction ${txHash} is not mined after a minute; check your wallet`);
}

async function sendTx(contract, fn, args, what, value = 0n, data = eth.encode(fn, args)) {
  try {
    await checkChain();
    const txHash = await wallet("eth_sendTransaction", [{ from: state.account, to: state.deployment.contracts[contract],
      data, value: "0x" + value.toString(16) }]);
    await mined(txHash);
    say(`${what}: transaction ${txHash} confirmed`);
    await refresh();
  } catch (e) { say(`error: ${what}: ${e.message}`); }
}

// ---- leases ----
// What the chain says about an active lease's hand-over, read through the wallet (the backend is
// not trusted for it): the offer deadline, the LeaseAccess digest the provider offered and when,
// the renter's confirmation, until when stopping refunds everything, and whether it counts as
// delivered (LeaseManager: confirmed by the renter, or offered and not disputed in time).
async function leaseChainView(l) {
  if (!state.account || $("chain-warning").hidden === false) return null;
  const [deadline, delivery, confirmBy, delivered] = await Promise.all([
    call("LeaseManager", "deliveryDeadline(uint256)", [l.lease_id]), call("LeaseManager", "getDelivery(uint256)", [l.lease_id]),
    call("LeaseManager", "confirmDeadline(uint256)", [l.lease_id]), call("LeaseManager", "isDelivered(uint256)", [l.lease_id])]);
  const [offered, , confirmedAt] = eth.words(delivery);
  return { deadline: Number(BigInt(deadline)), offered: BigInt(offered) === 0n ? null : offered.toLowerCase(),
           confirmed: BigInt(confirmedAt) !== 0n, confirmBy: Number(BigInt(confirmBy)), delivered: BigInt(delivered) !== 0n };
}
const leaseDomain = () => lease.domain(state.deployment.chain_id, state.deployment.contracts.LeaseManager);

// The connection cell says what was checked and by whom: the backend accepted the details only
// with the provider's EIP-712 signature; the page checks them against the digest the provider
// offered on-chain (offerAccess, a transaction only the lease's provider can send). Delivery is
// the renter's to certify (confirmDelivery, from its wallet, once it logged in); until then, and
// until the confirm deadline, stopping the lease refunds all of it.
function connectionCell(l, view, now, mine) {
  const missed = view && !view.offered && now >= view.deadline;
  const matches = view?.offered && l.access &&
    view.offered === lease.typedHash(lease.typedData("LeaseAccess", leaseDomain(), l.access));
  const delivery = !view ? ""
    : view.confirmed ? `<div class="delivery ok">delivered: you confirmed your login</div>`
    : view.delivered ? `<div class="delivery ok">delivered: offered and not disputed by ${eth.date(view.confirmBy)}</div>`
    : view.offered ? `<div class="delivery">offered: log in with the command below, then confirm delivery; until ` +
        `${eth.date(view.confirmBy)} stopping refunds the whole lease</div>` +
        (mine && matches ? `<button class="confirm-lease" data-lease="${l.lease_id}" data-access="${view.offered}">` +
                           "I logged in: confirm delivery</button>" : "")
    : missed ? `<div class="delivery bad">not offered by ${eth.date(view.deadline)}: stopping refunds the whole lease</div>`
    : `<div class="delivery">not offered yet: the provider must offer by ${eth.date(view.deadline)}</div>`;
  if (!l.access) return delivery || "no connection details yet";
  let check;
  if (!view) check = `<span>signature checked by the backend only; connect your wallet on chain ${state.deployment.chain_id} to check against the chain</span>`;
  else if (!view.offered) check = `<span class="bad">not verified: signed, but not offered on-chain</span>`;
  else if (matches) check = `<span class="ok">verified in this page: the provider offered exactly these details on-chain</span>`;
  else check = `<span class="bad">NOT verified: these details differ from what the provider offered on-chain; do not connect</span>`;
  return `${delivery}<div class="ssh-command">${hash(lease.sshCommand(l.access))}</div>
    <div>host key ${hash(l.access.hostKeyFingerprint)}</div><div class="access-check">${check}</div>`;
}

async function loadLeases() {
  const leases = await api(state.account ? `/leases?renter=${state.account}` : "/leases");
  const now = state.chainNow ?? Date.now() / 1000;
  const views = await Promise.all(leases.map((l) => l.status === "active" ? leaseChainView(l).catch(() => null) : null));
  render($("leases").tBodies[0], leases.map((l, i) => {
    const active = l.status === "active", mine = l.renter === state.account;
    const key = l.ssh_public_key ? `key bound ${hash(l.ssh_public_key)}`
      : active && mine ? `<button class="bind-key" data-lease="${l.lease_id}">Bind the SSH key above</button>` : "no key";
    return `<tr data-lease="${l.lease_id}"><td>${l.lease_id}</td><td>${hash(l.provider)}</td><td>${l.gpu_count}</td>
      <td>${eth.date(l.ends_at)}</td><td>${active ? eth.duration(l.ends_at - now) : "—"}</td><td>${eth.amount(l.paid)}</td>
      <td>${esc(l.status)}${l.ended_by ? ` by ${hash(l.ended_by)}` : ""}</td><td>${eth.amount(l.renter_refund)}</td>
      <td class="connection">${active ? connectionCell(l, views[i], now, mine) : "—"}<div>${key}</div></td>
      <td>${active && mine ? `<button class="stop-lease" data-lease="${l.lease_id}">Stop (refund unused time)</button>` : ""}</td></tr>`;
  }).join(""));
}

// Signs the key (EIP-712 LeaseKey, as `unchained lease start` does) and hands it to the backend,
// waiting a bounded time for the indexer to have seen the lease.
async function bindKey(leaseId, sshKey) {
  const data = lease.typedData("LeaseKey", leaseDomain(), { leaseId: Number(leaseId), sshPublicKey: sshKey,
                                                          image: lease.NO_IMAGE });
  let signature;
  try {
    signature = await wallet("eth_signTypedData_v4", [state.account, JSON.stringify(data)]);
  } catch (e) {
    throw new Error(`lease ${leaseId}: the wallet did not sign the SSH key (${e.message}); ` +
                    "the lease is paid: bind the key from its row, or stop it for a refund");
  }
  for (let i = 0; ; i++) {
    try {
      await api(`/leases/${leaseId}/key`, { method: "PUT", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify({ sshPublicKey: sshKey, image: lease.NO_IMAGE, signature }) });
      say(`lease ${leaseId}: SSH key bound`);
      return;
    } catch (e) {
      if (e.status !== 404 || i >= 100) throw e;  // 404 while the indexer has not seen the lease
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}

const LEASE_STARTED = merkle.bytesToHex(keccak256(new TextEncoder().encode("LeaseStarted(uint256,address,address,uint256,uint64,uint256)")));
function startedLeaseId(receipt) {
  const manager = state.deployment.contracts.LeaseManager.toLowerCase();
  const log = receipt.logs.find((g) => g.address.toLowerCase() === manager && g.topics[0] === LEASE_STARTED);
  if (!log) throw new Error(`transaction ${receipt.transactionHash} started no lease`);
  return BigInt(log.topics[1]).toString();
}

$("leases").onclick = async (e) => {
  const stop = e.target.closest(".stop-lease"), bind = e.target.closest(".bind-key");
  const confirmed = e.target.closest(".confirm-lease");
  if (confirmed) {
    confirmed.disabled = true;
    sendTx("LeaseManager", "confirmDelivery(uint256,bytes32)", [confirmed.dataset.lease, confirmed.dataset.access],
           `confirm delivery of lease ${confirmed.dataset.lease}`);
    return;
  }
  if (stop) {
    stop.disabled = true;
    sendTx("LeaseManager", "endLease(uint256)", [stop.dataset.lease], `stop lease ${stop.dataset.lease}`);
  } else if (bind) {
    bind.disabled = true;
    try { await checkChain(); await bindKey(bind.dataset.lease, lease.normalizeSshKey($("lease-key").value)); await refresh(); }
    catch (err) { say(`error: ${err.message}`); bind.disabled = false; }
  }
};
$("jobs").onclick = (e) => {
  const row = e.target.closest("tr[data-job]");
  if (row && !e.target.dataset.copy) location.hash = `#/jobs/${row.dataset.job}`;
};
$("lease-start").onclick = async () => {
  const button = $("lease-start");
  button.disabled = true;
  try {
    if (!state.account) throw new Error("connect your wallet first");
    const provider = $("lease-provider").value, gpus = Number($("lease-gpus").value);
    const seconds = Math.round(Number($("lease-hours").value) * 3600);
    if (!(gpus >= 1 && seconds >= 1)) throw new Error("a lease needs at least one GPU and a positive duration");
    // Checked before paying: the provider would refuse this key and leave a paid lease nobody can enter.
    let sshKey;
    try { sshKey = lease.normalizeSshKey($("lease-key").value); } catch (e) { throw new Error(`${e.message}; nothing was paid`); }
    await checkChain();
    const cost = BigInt(await call("LeaseManager", "leaseCost(address,uint256,uint256)", [provider, gpus, seconds]));
    if (!confirm(`Lease ${gpus} GPU(s) of ${provider} for ${eth.duration(seconds)} at ${eth.format(cost)}?`)) return;
    const txHash = await wallet("eth_sendTransaction", [{ from: state.account, to: state.deployment.contracts.LeaseManager,
      data: eth.encode("startLease(address,uint256,uint256)", [provider, gpus, seconds]), value: "0x" + cost.toString(16) }]);
    const leaseId = startedLeaseId(await mined(txHash));
    say(`lease ${leaseId} started: transaction ${txHash} confirmed`);
    await bindKey(leaseId, sshKey);
    await refresh();
  } catch (e) { say(`error: ${e.message}`); } finally { button.disabled = false; }
};

// ---- challenges, disputes, balances ----
async function loadDisputes() {
  const [challenges, disputes, slashes] = await Promise.all([api("/challenges"), api("/disputes"), api("/slashes")]);
  const cause = (x) => x.cause === "signed result" ? `job ${x.job_id}: signed result not committed as signed`
    : x.cause === "challenge" ? `challenge ${x.challenge_id} lost` : "—";
  render($("slashes").tBodies[0], slashes.map((x) => `<tr><td>${hash(x.offender)}</td><td class="bad">${eth.amount(x.slashed)}</td>
    <td>${eth.amount(x.requested)}</td><td>${esc(cause(x))}</td><td>${hash(x.reward_recipient)}</td><td>${eth.amount(x.reward)}</td>
    <td>${x.block_number}</td><td>${hash(x.tx_hash)}</td></tr>`).join(""));
  render($("challenges").tBodies[0], challenges.map((c) => `<tr><td>${c.challenge_id}</td><td>${c.kind === "pog" ? `Proof-of-GPU round ${c.subject}` : c.kind === "job" ? `<a href="#/jobs/${c.subject}">job ${c.subject}</a>` : `${esc(c.kind)} ${c.subject}`}</td>
    <td>${hash(c.challenger)}</td><td>${hash(c.provider)}</td><td>${c.k}</td><td>${eth.amount(c.bond)}</td>
    <td>${eth.date(c.response_deadline)}</td><td>${esc(words(c.status))}</td><td>${c.dispute_id ?? "—"}</td></tr>`).join(""));
  render($("disputes").tBodies[0], disputes.map((d) => `<tr><td>${d.dispute_id}</td><td>${d.ref}</td><td>${hash(d.provider)}</td>
    <td>${hash(d.challenger)}</td><td>${d.votes}</td><td>${eth.date(d.vote_end)}</td>
    <td class="${d.verdict ? "bad" : ""}">${esc(words(d.verdict ?? "voting"))}</td></tr>`).join(""));
}

// What each contract holds for the connected account (pull payments), read through the wallet.
const OWED = [["escrow", "JobEscrow", "owedTo(address,address)", (a) => ["0x0", a], "withdraw(address)", ["0x0"], "the job escrow"],
              ["leases", "LeaseManager", "owedTo(address)", (a) => [a], "withdraw()", [], "leases"],
              ["challenges", "ChallengeManager", "owedTo(address)", (a) => [a], "withdraw()", [], "challenges"]];
async function loadBalances() {
  if (!state.account || $("chain-warning").hidden === false) return;
  const owed = await Promise.all(OWED.map(([, contract, fn, args]) => call(contract, fn, args(state.account))));
  OWED.forEach(([name], i) => {
    $(`owed-${name}`).innerHTML = eth.amount(BigInt(owed[i]));
    $(`withdraw-${name}`).disabled = BigInt(owed[i]) === 0n;
  });
}
for (const [name, contract, , , fn, args, what] of OWED) {
  $(`withdraw-${name}`).onclick = () => { $(`withdraw-${name}`).disabled = true; sendTx(contract, fn, args, `withdraw from ${what}`); };
}

// ---- refresh loop: one poll every POLL_MS, never two at once ----
async function loadHealth() {
  try {
    const h = await api("/health");
    $("health").textContent = `${h.status} · chain ${h.chain_id ?? "?"} · block ${h.indexed_block ?? "?"}/${h.head_block ?? "?"}`;
  } catch (e) { $("health").textContent = "backend unreachable"; }
}
async function chainClock() {
  if (!state.account || $("chain-warning").hidden === false) return;
  const latest = await wallet("eth_getBlockByNumber", ["latest", false]);
  state.chainNow = Number(BigInt(latest.timestamp));
}
async function loadDeals() {
  // The chain's clock only dates "time left" and refund eligibility; without it the browser's stands in.
  await chainClock().catch(() => { state.chainNow = null; });
  await Promise.all([loadJobs(), renderJob(), loadLeases()]);
}
let refreshing = null;
function refresh() {
  if (document.hidden) return Promise.resolve();  // a background tab does not poll
  refreshing ??= Promise.allSettled([loadHealth(), loadDeals(), loadProviders(), loadDisputes(), loadBalances()])
    .then((results) => {
      const failed = results.filter((r) => r.status === "rejected").map((r) => r.reason.message);
      // Each reason is a sentence already ("The backend could not load the jobs: ...").
      $("refresh-error").textContent = [...new Set(failed)].join(" ");
    }).finally(() => { refreshing = null; });
  return refreshing;
}

$("pog-provider").onchange = (e) => loadPog(e.target.value);
$("only-mine").onchange = () => loadJobs();
// The read-only RPC comes from the user (typed, or ?rpc= in the page's address), never the backend.
$("rpc-url").value = new URLSearchParams(location.search).get("rpc") ?? localStorage.getItem("unchained.rpc") ?? "";
$("rpc-url").onchange = () => { localStorage.setItem("unchained.rpc", rpcUrl()); state.shownJob = ""; renderJob(); };
document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });

// ---- views: one at a time, named by the address's hash (#/offers, #/jobs/12, ...) ----
const VIEWS = ["offers", "jobs", "leases", "balances", "challenges"];
function route() {
  const [name, id] = location.hash.replace(/^#\/?/, "").split("/");
  const view = VIEWS.includes(name) ? name : "offers";
  document.querySelectorAll(".view").forEach((v) => { v.hidden = v.dataset.view !== view; });
  document.querySelectorAll("#views a").forEach((a) => {
    if (a.getAttribute("href") === `#/${view}`) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
  // A job's own address shows it above the list; the list's address, the list alone.
  const job = view === "jobs" && /^\d+$/.test(id ?? "") ? Number(id) : null;
  $("job-section").hidden = job == null;
  if (job == null) state.openJob = null;
  else if (job !== state.openJob) openJob(job).catch((e) => { $("refresh-error").textContent = e.message; });
}
window.addEventListener("hashchange", () => { route(); window.scrollTo(0, 0); });
route();
(async () => {
  try { await deployment(); } catch (e) { say(`error: ${e.message}`); }
  await Promise.all([refresh(), loadModels()]);
  setInterval(refresh, POLL_MS);
})();
