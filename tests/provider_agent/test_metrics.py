"""The agent's /metrics text: every metric name, label and value a scrape reads, parsed back with
prometheus_client's own parser (so the text is valid exposition format, not only alike)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from provider_agent.metrics import render

STATUS = {"address": "0xAbC0000000000000000000000000000000000001", "registered": True, "active": False,
          "stake_wei": 2 * 10**18, "earnings_owed_wei": 5, "jobs": {"committed": 3, "failed": 1},
          "hashrate": 1234.5, "shares": 7, "items_per_s": 0.25, "mining_state": "paused"}
WHO = "0xabc0000000000000000000000000000000000001"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_carry_every_status_field_under_its_name_and_labels() -> None:
    text = render(STATUS, [0.5, 0.125])
    who = (("provider", WHO),)
    assert _samples(text) == {
        ("unchained_provider_up", who): 1.0,
        ("unchained_provider_registered", who): 1.0,
        ("unchained_provider_active", who): 0.0,
        ("unchained_provider_stake_wei", who): 2e18,
        ("unchained_provider_earnings_owed_wei", who): 5.0,
        ("unchained_provider_jobs", (("provider", WHO), ("status", "committed"))): 3.0,
        ("unchained_provider_jobs", (("provider", WHO), ("status", "failed"))): 1.0,
        ("unchained_provider_hashrate_hps", who): 1234.5,
        ("unchained_provider_shares_found_total", who): 7.0,
        ("unchained_provider_job_items_per_second", who): 0.25,
        ("unchained_provider_mining_state", (("provider", WHO), ("state", "paused"))): 1.0,
        ("unchained_provider_last_switch_seconds", who): 0.125,
    }
    assert f'unchained_provider_jobs{{provider="{WHO}",status="committed"}} 3.0' in text.splitlines()
    assert "# TYPE unchained_provider_shares_found_total counter" in text.splitlines()


def test_no_switch_yet_means_no_switch_metric_and_labels_are_escaped() -> None:
    text = render({**STATUS, "mining_state": 'odd"state\\'}, [])
    assert "last_switch_seconds" not in text
    assert 'state="odd\\"state\\\\"' in text
