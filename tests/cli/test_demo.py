"""`unchained demo` end to end on anvil: the cheater is slashed, the honest provider paid."""

from io import StringIO

from rich.console import Console

from unchained_cli.demo import STAKE, run


def test_demo_slashes_the_skipping_prover_and_accounts_for_every_wei():
    out = StringIO()
    changes = run(Console(file=out, width=200))
    text = out.getvalue()
    assert "fraud proven on-chain" in text
    assert "all 32 chunks exact" in text
    assert "every wei accounted for: yes" in text
    # The cheater lost more than its gas: part of its stake is gone for good.
    assert "cheater's PoG round 2 as passed=False" in text
    # The verifier earned the slash reward; the treasury earned fees and its slash share.
    assert changes["treasury"] > 0
    assert changes["verifier"] > -STAKE
