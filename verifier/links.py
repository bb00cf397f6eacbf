"""How the verifier reaches a provider's prover: Celery tasks on the provider's own queue.

The provider's results are JSON messages (protocol.pog.messages) that the checker parses with
size limits; nothing received is unpickled or executed, and nothing is trusted that the chain
does not confirm (the roots are read back from ProofOfGpu).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from celery import Celery
from celery.exceptions import CeleryError, TimeoutError as CeleryTimeout
from kombu.exceptions import KombuError

from protocol.tasks import TASK_POG_ANSWER, TASK_POG_ROUND, provider_queue, result_backend_url
from verifier.pog_onchain import LinkDown, ProverUnreachable


def make_celery(broker_url: str) -> Celery:
    """The verifier's Celery client. It waits on the provider's replies, so it reads them from
    the broker's result store (raises protocol.tasks.BadBrokerUrl for a broker without one)."""
    app = Celery("unchained-verifier", broker=broker_url, backend=result_backend_url(broker_url), set_as_current=False)
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    return app


@dataclass
class CeleryProverLink:
    app: Celery
    provider: str
    commit_timeout_s: float = 600.0  # a round fills the GPU's memory: minutes on a big card
    answer_timeout_s: float = 60.0

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

    def _call(self, task: str, args: list, timeout_s: float) -> bytes:
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
        if not isinstance(reply, str):
            raise ProverUnreachable(f"{task} for {self.provider}: reply is {type(reply).__name__}, not JSON text")
        return reply.encode()
