"""A provider agent's terminal while it beats to a real backend: the heartbeats reach the backend
(its last-seen time moves) and none of them shows a line (httpx logged every request)."""

from __future__ import annotations

from pathlib import Path

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import httpx

from client.broker import grant
from client.ports import free_port
from tests.support.e2e_market import ETH, PROVIDER, Market, keystore, market, password_file  # noqa: F401
from tests.support.processes import provider_terminal
from tests.support.waiting import wait_until


def test_heartbeats_reach_the_backend_without_a_line_each(market: Market, tmp_path: Path) -> None:
    key, address = keystore(tmp_path, PROVIDER)
    log = tmp_path / "terminal.txt"
    env = {"UNCHAINED_PASSWORD_FILE": str(password_file(tmp_path)), "UNCHAINED_PROVIDER_HEARTBEAT_S": "0.3",
           "UNCHAINED_PROVIDER_MINING": "false", "UNCHAINED_PROVIDER_STAKE_WEI": str(2 * ETH)}
    args = ["--rpc", market.chain.rpc_url, "--keystore", str(key), "--broker", grant(market.broker_url, "provider", address),
            "--backend", market.backend_url, "--deployment", str(market.deployment_file),
            "--content-dir", str(tmp_path), "--data-dir", str(tmp_path / "provider"), "--metrics-port", str(free_port())]
    with provider_terminal(args, env, log) as proc:
        seen: set[str] = set()

        def beats() -> bool:
            assert proc.poll() is None, log.read_text()
            shown = httpx.get(f"{market.backend_url}/providers/{address.lower()}", timeout=5)
            if shown.status_code == 200 and shown.json()["last_seen_at"]:
                seen.add(shown.json()["last_seen_at"])
            return len(seen) >= 4

        wait_until(beats, 180, "four heartbeats reached the backend")
    said = log.read_text()
    assert "HTTP Request" not in said and "heartbeat to the backend failed" not in said, said
    assert len(said.splitlines()) < 12, said  # start, registration, ready, shutdown: not a line a beat
