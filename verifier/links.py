"""How the verifier reaches a provider's prover: Celery tasks on the provider's own queue.

The provider's results are JSON messages (protocol.pog.messages) that the checker parses with
size limits; nothing received is unpickled or executed, and nothing is trusted that the chain
does not confirm (the roots are read back from ProofOfGpu).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from celery.exceptions import CeleryError, TimeoutError as CeleryTimeout
from kombu.exceptions import KombuError

from client.broker import QueueApps
from client.errors import TaskRefused
from client.task_auth import TaskAuth, auth_of
from protocol.pog.residency import FillParams
from protocol.tasks import TASK_POG_ANSWER, TASK_POG_FILL, TASK_POG_PROBE, TASK_POG_ROUND, provider_queue
from verifier.pog_onchain import LinkDown, ProverUnreachable


def make_celery(broker_url: str, auth: Callable[[], TaskAuth]) -> QueueApps:
    """The verifier's Celery clients, one per provider queue, signing with the verifier's key.
    They wait on the providers' replies, so they read them from the broker's result store
    (raises protocol.tasks.BadBrokerUrl for a broker without one)."""
    return QueueApps("unchained-verifier", broker_url, auth, results=True)


@dataclass
class CeleryProverLink:
    apps: QueueApps
    provider: str
    commit_timeout_s: float = 600.0  # a round fills the GPU's memory: minutes on a big card
    answer_timeout_s: float = 60.0
    fill_timeout_s: float = 900.0  # every device fills its memory: about a minute on big cards
    probe_timeout_s: float = 30.0  # the deadline that counts is the checker's, far shorter

    @property
    def app(self):  # type: ignore[no-untyped-def]
        return self.apps.for_provider(self.provider)

    def ready(self) -> None:
        try:
            with self.app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=5)
        except (KombuError, OSError) as exc:
            raise LinkDown(f"broker unreachable: {exc}") from exc

    def commit(self, round_id: int, secret: bytes, sizes: Sequence[int]) -> bytes:
        # The provider checks the secret against the round's secretHash and reads n and the
        # request block's hash from the chain itself: nothing here can mislead it.
        return self._call(TASK_POG_ROUND, [round_id, "0x" + secret.hex()], self.commit_timeout_s)

    def answer(self, round_id: int, randomness: bytes, k: int) -> bytes:
        return self._call(TASK_POG_ANSWER, [round_id, "0x" + randomness.hex(), k], self.answer_timeout_s)

    def fill(self, round_id: int, shapes: Sequence[FillParams]) -> bytes:
        args = [round_id, [[p.lanes, p.steps, p.iterations] for p in shapes]]
        return self._call(TASK_POG_FILL, args, self.fill_timeout_s)

    def probe(self, round_id: int, randomness: bytes, q: int) -> bytes:
        return self._call(TASK_POG_PROBE, [round_id, "0x" + randomness.hex(), q], self.probe_timeout_s)

    def _call(self, task: str, args: list[Any], timeout_s: float) -> bytes:
        try:
            result = self.app.send_task(task, args=args, queue=provider_queue(self.provider))
        except (KombuError, OSError) as exc:
            raise LinkDown(f"{task}: broker unreachable: {exc}") from exc
        try:
            reply = result.get(timeout=timeout_s, disable_sync_subtasks=False)
        except CeleryTimeout as exc:
            raise ProverUnreachable(f"{task} for {self.provider}: no reply in {timeout_s:.0f}s") from exc
        except (CeleryError, KombuError, OSError) as exc:
            raise ProverUnreachable(f"{task} for {self.provider}: {exc}") from exc
        except Exception as exc:  # the provider's task raised: its failure, reported as such
            raise ProverUnreachable(f"{task} for {self.provider} failed: {type(exc).__name__}: {exc}") from exc
        try:  # signed by the provider we asked, for this very task
            reply = auth_of(self.app).open_reply(result.id, reply, [self.provider])
        except TaskRefused as exc:
            raise ProverUnreachable(f"{task} for {self.provider}: {exc}") from exc
        if not isinstance(reply, str):
            raise ProverUnreachable(f"{task} for {self.provider}: reply is {type(reply).__name__}, not JSON text")
        return reply.encode()
