"""The native keccak (unchained_keccak, the provider extra's compiled distribution) against the
reference, its GIL-free batches, and the loud path: without it the prover and `pog run` refuse."""

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import random
import sys
import threading
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from protocol.errors import InvalidParameter
from protocol.merkle import hash_messages
from protocol.pog.workload import WorkloadKeys
from provider_agent import ProviderAgentError, keccak_native
from provider_agent.gpus import resolve
from provider_agent.keccak_native import NativeKeccakMissing, native_hasher
from provider_agent.pog_prover import compute_device
from unchained_cli.main import app


def test_extension_is_compiled_not_built_at_run_time():
    import unchained_keccak

    assert unchained_keccak.__file__.endswith(".so")
    assert not hasattr(keccak_native, "_build")  # no `cc` run from the prover any more


@pytest.mark.parametrize("size", [1, 31, 135, 136, 137, 271, 272, 273, 4096])
def test_every_prefix_and_rate_boundary_equals_the_reference(size):
    data = random.Random(size).randbytes(size * 300)
    hasher = native_hasher(1)
    for prefix in (b"\x00", b"\x01", b"\xff"):
        assert hasher(data, size, prefix) == hash_messages(data, size, prefix)


def test_split_over_threads_equals_one_call():
    data = random.Random(1).randbytes(256 * 10_000)  # 10k > 2 * split minimum: several parts
    assert native_hasher(4)(data, 256, b"\x00") == native_hasher(1)(data, 256, b"\x00") \
        == hash_messages(data, 256, b"\x00")


def test_numpy_panels_hash_without_a_copy_and_strided_views_are_refused():
    panel = np.random.default_rng(2).integers(0, 2**31, (64, 128), dtype=np.int32)
    hasher = native_hasher(2)
    assert hasher(panel, 256, b"\x00") == hash_messages(panel.tobytes(), 256, b"\x00")
    with pytest.raises((TypeError, ValueError, BufferError)):
        hasher(panel[:, ::2], 256, b"\x00")  # not contiguous: never hashed in the wrong order


def test_bad_sizes_are_refused_by_wrapper_and_extension():
    import unchained_keccak

    hasher = native_hasher(1)
    for data, size in ((bytes(100), 3), (bytes(8192), 8192), (bytes(10), 0)):
        with pytest.raises(InvalidParameter):
            hasher(data, size, b"\x00")
    with pytest.raises(InvalidParameter):
        hasher(bytes(64), 32, b"\x00\x01")
    for args in ((bytes(100), 3, 0, bytearray(1024)), (bytes(64), 32, 0, bytearray(32)),
                 (bytes(64), 0, 0, bytearray(0)), (bytes(8192), 8192, 0, bytearray(32))):
        with pytest.raises(ValueError):
            unchained_keccak.hash_into(*args)
    with pytest.raises(TypeError):
        unchained_keccak.hash_into(bytes(64), 32, 0, bytes(64))  # read-only output


def _main_thread_ran_during(call) -> int:
    """How many times the main thread counted while `call` ran on another thread: zero when
    `call` holds the GIL (the switch interval is raised so the GIL is not handed over early)."""
    started, done = threading.Event(), threading.Event()

    def worker():
        started.set()
        call()
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        started.wait(30)
        count = 0
        while not done.is_set():
            count += 1
            time.sleep(0)  # hands the GIL back, so the worker resumes as soon as its call ends
        thread.join(30)
    finally:
        sys.setswitchinterval(old)
    return count


def test_a_batch_hashes_with_the_gil_released():
    import unchained_keccak

    data = bytes(256 << 15)
    out = bytearray(32 << 15)
    numbers = random.Random(4).sample(range(10**9), 300_000)
    # The harness detects a C call that keeps the GIL (list.sort of ints never releases it) ...
    assert _main_thread_ran_during(lambda: sorted(numbers)) == 0
    # ... and the hasher lets the main thread run meanwhile.
    assert _main_thread_ran_during(lambda: unchained_keccak.hash_into(data, 256, 0, out)) > 0


@pytest.fixture
def extension_missing(monkeypatch):
    """As on a machine where the extension was not built: importing it fails."""
    monkeypatch.setitem(sys.modules, "unchained_keccak", None)  # import -> ImportError
    native_hasher.cache_clear()
    yield
    native_hasher.cache_clear()


def test_missing_extension_is_an_error_not_a_slow_fallback(extension_missing):
    with pytest.raises(NativeKeccakMissing) as info:
        native_hasher()
    assert isinstance(info.value, ProviderAgentError)
    assert "native keccak" in str(info.value) and "python3-dev" in str(info.value)
    keys = WorkloadKeys.derive(bytes(32))
    with pytest.raises(NativeKeccakMissing):
        compute_device(resolve("cpu"), 0, keys, 64, "fp32")


def test_pog_run_says_the_native_keccak_is_missing(extension_missing):
    result = CliRunner(env={"COLUMNS": "300"}).invoke(
        app, ["pog", "run", "--n", "64", "--device", "cpu", "--k", "32"])  # through the CLI's one boundary
    assert result.exit_code == 2, result.output
    assert "native keccak" in result.output and "TFLOPS" not in result.output
