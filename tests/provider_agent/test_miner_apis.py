"""External miner adapters against a local stand-in server speaking XMRig's, T-Rex's and
lolMiner's documented HTTP APIs (none of those miners installs here)."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from provider_agent.miner_apis import LolMiner, TrexMiner, XmrigMiner
from provider_agent.mining import MiningError, MiningPolicy, MiningSupervisor
from tests.support.waiting import wait_until

TOKEN = "s3cret"


class StandIn:
    """State of the pretend miner: hash rates per GPU and a paused flag per GPU."""

    def __init__(self) -> None:
        self.paused = {0: False, 1: False}
        self.rates = {0: 1000.0, 1: 2000.0}
        self.calls: list[str] = []

    def rate(self, gpu: int) -> float:
        return 0.0 if self.paused[gpu] else self.rates[gpu]


def serve(state: StandIn):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _json(self, code: int, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlparse(self.path)
            state.calls.append(f"GET {self.path}")
            if url.path == "/2/summary":
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._json(401, {"error": "unauthorized"})
                total = sum(state.rate(g) for g in state.rates)
                return self._json(200, {"paused": all(state.paused.values()), "hashrate": {"total": [total, total, None]}})
            if url.path == "/summary":
                gpus = [{"device_id": g, "hashrate": state.rate(g)} for g in state.rates]
                return self._json(200, {"hashrate": sum(g["hashrate"] for g in gpus), "gpus": gpus,
                                        "Algorithms": [{"Algorithm": "Etchash", "Performance_Unit": "Mh/s",
                                                        "Total_Performance": 61.5}]})
            if url.path == "/control":
                query = parse_qs(url.query)
                if "pause" in query:
                    value, _, which = query["pause"][0].partition(":")
                    for g in ([int(x) for x in which.split(",")] if which else list(state.paused)):
                        state.paused[g] = value == "true"
                return self._json(200, {"success": 1})
            self._json(404, {})

        def do_POST(self):
            state.calls.append(f"POST {self.path}")
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._json(401, {"error": "unauthorized"})
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if body["method"] in ("pause", "stop"):
                state.paused = {g: True for g in state.paused}
            elif body["method"] == "resume":
                state.paused = {g: False for g in state.paused}
            else:
                return self._json(200, {"id": body["id"], "jsonrpc": "2.0", "error": {"code": -32601}})
            self._json(200, {"id": body["id"], "jsonrpc": "2.0", "result": "OK"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def stand_in():
    state = StandIn()
    server = serve(state)
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_xmrig_pause_resume_and_hashrate_through_json_rpc(stand_in):
    state, url = stand_in
    miner = XmrigMiner(url, TOKEN)
    assert miner.hashrate() == 3000.0
    assert miner.pause() >= 0 and all(state.paused.values()) and miner.hashrate() == 0.0
    miner.resume()
    assert miner.hashrate() == 3000.0
    assert "POST /json_rpc" in state.calls


def test_xmrig_wrong_token_is_a_clear_error(stand_in):
    _, url = stand_in
    with pytest.raises(MiningError, match="401"):
        XmrigMiner(url, "wrong").hashrate()


def test_trex_pauses_only_its_gpu(stand_in):
    state, url = stand_in
    miner = TrexMiner(url, gpus=[1])
    assert miner.hashrate() == 2000.0
    miner.pause()
    assert state.paused == {0: False, 1: True} and miner.hashrate() == 0.0
    miner.resume()
    assert state.paused[1] is False and "GET /control?pause=false%3A1" in state.calls


def test_lolminer_hashrate_units_and_pause_by_signal(stand_in):
    _, url = stand_in
    miner = LolMiner(url, command=[sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    miner.start()
    try:
        assert miner.hashrate() == pytest.approx(61.5e6)
        state = lambda: Path(f"/proc/{miner.process.pid}/stat").read_text().split(")")[1].split()[0]  # noqa: E731
        miner.pause()
        assert _eventually(lambda: state() == "T")  # stopped, its state kept
        miner.resume()
        assert _eventually(lambda: state() in ("R", "S"))
    finally:
        miner.stop()
    assert miner.process.poll() is not None


def _eventually(predicate, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_supervisor_drives_an_external_miner(stand_in):
    state, url = stand_in
    supervisor = MiningSupervisor(XmrigMiner(url, TOKEN), MiningPolicy(cooldown_s=0.1))
    supervisor.start()
    supervisor.job_started(1)
    assert all(state.paused.values()) and supervisor.state == "paused"
    supervisor.job_finished(1, 10, 1.0)
    wait_until(lambda: supervisor.state == "mining" and not any(state.paused.values()), 10,
               "the external miner resumed after the cooldown")
