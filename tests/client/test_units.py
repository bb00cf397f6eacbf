"""Amounts and times as people read them: ether exactly, dates with their zone, durations."""

from client.units import amount, duration, eth, iso, when


def test_eth_is_exact_to_the_last_wei() -> None:
    assert eth(10**18) == "1 ETH" and eth(15 * 10**15) == "0.015 ETH" and eth(0) == "0 ETH"
    assert eth(10**18 + 1) == "1.000000000000000001 ETH" and eth(-3 * 10**17) == "-0.3 ETH"
    assert eth(str(2 * 10**18)) == "2 ETH" and eth(None) == "-"
    assert eth(1234567 * 10**15, places=2) == "1,234.57 ETH"


def test_wei_only_on_request() -> None:
    assert amount(5 * 10**17) == "0.5 ETH" and amount(5 * 10**17, in_wei=True) == "500000000000000000 wei"


def test_times_are_iso_dates_with_zone_and_a_duration() -> None:
    assert iso(0) == "1970-01-01T00:00:00+00:00"
    assert when(3600 * 26, now=0) == "1970-01-02T02:00:00+00:00 (in 1 d 2 h)"
    assert when(0, now=5) == "-" and when(100, now=400) == "1970-01-01T00:01:40+00:00 (5 min ago)"
    assert duration(59) == "59 s" and duration(3 * 3600 + 5 * 60 + 7) == "3 h 5 min" and duration(120) == "2 min"
