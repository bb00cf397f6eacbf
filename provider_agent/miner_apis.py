"""External miners driven through their own documented HTTP APIs (the `Miner` protocol).

- XMRig: `GET /2/summary` (hash rate: `hashrate.total[0]`, the 10-second average; `paused`) and
  `POST /json_rpc` with methods `pause`, `resume`, `stop`, authenticated with
  `Authorization: Bearer <access-token>` (the HTTP API must run with `restricted: false`).
- T-Rex: `GET /summary` (`hashrate`, per-GPU `gpus[].hashrate`, `paused`) and
  `GET /control?pause=true[:i,j]` / `pause=false[:i,j]`, `GET /control?command=shutdown`.
- lolMiner: `GET /summary` (`Algorithms[].Total_Performance` in `Performance_Unit`); its API is
  read-only, so pause and resume are SIGSTOP / SIGCONT of the miner process we started (the
  process keeps its state: no DAG rebuild), and stop is SIGTERM.

None of these miners installs here; the tests drive the adapters against a local stand-in
server that speaks these APIs. Pausing keeps a miner's state; only `stop` ends it. External
miners have no throttle in their APIs, so co-running with them degrades to yielding.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from typing import Any

import httpx

from provider_agent.mining import MiningError

logger = logging.getLogger(__name__)

_UNITS = {"h/s": 1.0, "kh/s": 1e3, "mh/s": 1e6, "gh/s": 1e9, "th/s": 1e12, "sol/s": 1.0, "g/s": 1.0}


class _HttpMiner:
    name = "external"

    def __init__(self, base_url: str, command: list[str] | None = None, timeout: float = 5.0,
                 switch_timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.command = command
        self.process: subprocess.Popen | None = None
        self.timeout = timeout
        self.switch_timeout_s = switch_timeout_s

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = httpx.request(method, self.base_url + path, timeout=self.timeout, **kwargs)
            response.raise_for_status()
            return response.json() if response.content else None
        except httpx.HTTPStatusError as exc:
            raise MiningError(f"{self.name} {method} {path}: HTTP {exc.response.status_code}") from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise MiningError(f"{self.name} {method} {path}: {exc}") from exc

    def _spawn(self) -> None:
        if self.command and (self.process is None or self.process.poll() is not None):
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            logger.info("%s started (pid %s)", self.name, self.process.pid)

    def _wait(self, predicate: Any) -> float:
        """Polls the miner until `predicate(summary)` holds: the switch is confirmed, not assumed."""
        t = time.perf_counter()
        while not predicate(self.summary()):
            if time.perf_counter() - t > self.switch_timeout_s:
                raise MiningError(f"{self.name} did not switch within {self.switch_timeout_s} s")
            time.sleep(0.02)
        return time.perf_counter() - t

    def summary(self) -> dict[str, Any]:
        raise NotImplementedError

    def set_duty(self, duty: float) -> None:
        if duty < 1.0:
            self.pause()
        else:
            self.resume()

    def pause(self) -> float:
        raise NotImplementedError

    def resume(self) -> None:
        raise NotImplementedError


class XmrigMiner(_HttpMiner):
    name = "xmrig"

    def __init__(self, base_url: str, access_token: str, command: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, command, **kwargs)
        self._headers = {"Authorization": f"Bearer {access_token}"}
        self._rpc_id = 0

    def summary(self) -> dict[str, Any]:
        return self._request("GET", "/2/summary", headers=self._headers)

    def _rpc(self, method: str) -> Any:
        self._rpc_id += 1
        answer = self._request("POST", "/json_rpc", headers=self._headers,
                               json={"jsonrpc": "2.0", "id": self._rpc_id, "method": method})
        if isinstance(answer, dict) and answer.get("error"):
            raise MiningError(f"xmrig {method}: {answer['error']}")
        return answer

    def start(self) -> None:
        self._spawn()
        self.resume()

    def pause(self) -> float:
        self._rpc("pause")
        return self._wait(lambda s: s.get("paused") is True)

    def resume(self) -> None:
        self._rpc("resume")

    def stop(self) -> None:
        self._rpc("stop")
        if self.process:
            self.process.terminate()
            self.process.wait()

    def hashrate(self) -> float:
        total = (self.summary().get("hashrate") or {}).get("total") or [None]
        return float(total[0] or 0.0)


class TrexMiner(_HttpMiner):
    name = "t-rex"

    def __init__(self, base_url: str = "http://127.0.0.1:4067", gpus: list[int] | None = None,
                 command: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, command, **kwargs)
        self.gpus = gpus

    def _which(self) -> str:
        return ":" + ",".join(str(g) for g in self.gpus) if self.gpus else ""

    def summary(self) -> dict[str, Any]:
        return self._request("GET", "/summary")

    def start(self) -> None:
        self._spawn()
        self.resume()

    def pause(self) -> float:
        self._request("GET", "/control", params={"pause": "true" + self._which()})
        return self._wait(lambda s: self._hashrate_of(s) == 0.0)

    def resume(self) -> None:
        self._request("GET", "/control", params={"pause": "false" + self._which()})

    def stop(self) -> None:
        self._request("GET", "/control", params={"command": "shutdown"})

    def _hashrate_of(self, summary: dict[str, Any]) -> float:
        if self.gpus:
            return float(sum(g.get("hashrate", 0) for g in summary.get("gpus", []) if g.get("device_id") in self.gpus))
        return float(summary.get("hashrate", 0))

    def hashrate(self) -> float:
        return self._hashrate_of(self.summary())


class LolMiner(_HttpMiner):
    name = "lolminer"

    def summary(self) -> dict[str, Any]:
        return self._request("GET", "/summary")

    def start(self) -> None:
        self._spawn()
        self.resume()

    def _signal(self, sig: int) -> None:
        if self.process is None or self.process.poll() is not None:
            raise MiningError("lolMiner's API is read-only: pausing needs the process this agent started")
        os.kill(self.process.pid, sig)

    def pause(self) -> float:
        t = time.perf_counter()
        self._signal(signal.SIGSTOP)
        return time.perf_counter() - t

    def resume(self) -> None:
        if self.process is not None:
            self._signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            self.process.wait()

    def hashrate(self) -> float:
        total = 0.0
        for algo in self.summary().get("Algorithms", []):
            unit = _UNITS.get(str(algo.get("Performance_Unit", "h/s")).lower(), 1.0)
            total += float(algo.get("Total_Performance", 0.0)) * unit
        return total
