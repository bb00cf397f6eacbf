"""The gas benchmark runs every settlement step for real; gas is deterministic, so its goals
(job lifecycles, Proof of GPU) double as regression guards."""

from devtools.bench_gas import BATCH, PAID, measure, uniform_tree
from protocol.merkle import MerkleTree, leaf_hash


def test_uniform_tree_is_a_real_tree_of_identical_leaves():
    leaf = b"\x07" * 256
    root, path = uniform_tree(leaf, 3)
    tree = MerkleTree([leaf_hash(leaf)] * 8)
    assert root == tree.root and path == tree.proof(5)


def test_gas_benchmark_measures_every_step_and_meets_every_goal():
    rows = {row.step: row for row in measure()}
    assert all(row.gas > 21_000 for step, row in rows.items() if "per job" not in step)  # whole transactions
    totals = {}
    for phase in ("cold: fresh deployment", "steady: same provider again"):
        job = f"job ({phase})"
        assert rows[f"{job}: total (create..paid)"].gas == sum(
            rows[f"{job}: {s}"].gas for s in ("create", "commit (accepts)", PAID))
        group = f"{BATCH} jobs batched ({phase})"
        per_job = [rows[f"{group}: {s}, per job"].gas for s in ("create", "commitResults", PAID)]
        batched = rows[f"{group}: total per job (create..paid)"].gas
        assert sum(per_job) <= batched < sum(per_job) + len(per_job)  # each row is floored separately
        # Batching pays the base cost and the shared balances once: a batched job costs less.
        assert batched < rows[f"{job}: total (create..paid)"].gas
        totals[phase] = rows[f"{job}: total (create..paid)"].gas
    # The steady state never costs more than the first job of a fresh deployment.
    assert totals["steady: same provider again"] <= totals["cold: fresh deployment"]
    # Every goal is met (the job lifecycles' and Proof of GPU's): gas is deterministic, so the
    # goals guard against regressions.
    for step, row in rows.items():
        if row.goal:
            assert row.gas <= row.goal, f"{step}: {row.gas} > {row.goal}"
