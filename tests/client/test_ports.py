"""Ports for services we start come from below the kernel's ephemeral range, where outgoing
connections cannot take them between the choice and the service's bind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from client import ports


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    for _ in range(20):
        port = ports.free_port()
        assert ports.LOWEST <= port < ports.ephemeral_low()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports.free_port()))
        busy.listen()
        taken = busy.getsockname()[1]
        candidates = [taken, ports.free_port()]
        monkeypatch.setattr(ports.random, "sample", lambda _range, _k: list(candidates))
        assert ports.free_port() == candidates[1]


def test_an_ephemeral_range_starting_low_leaves_the_choice_to_the_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configured = tmp_path / "ip_local_port_range"
    configured.write_text("1024\t65535\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", configured)
    assert ports.ephemeral_low() == 1024
    port = ports.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_an_unreadable_range_is_taken_as_the_linux_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert ports.ephemeral_low() == 32_768
