"""A full `unchained bench` rewrites the generated top of docs/BENCHMARKS.md and keeps the hand-written
notes under NOTES_HEADING; a partial run (`--only`) leaves the file alone."""

import pytest

from devtools import bench


@pytest.fixture
def one_section(monkeypatch):
    runs = []

    def section():
        runs.append(1)
        return f"## Gas\n\nrun {len(runs)}"

    monkeypatch.setattr(bench, "SECTIONS", {"gas": section})
    return runs


def test_a_full_run_rewrites_the_results_and_keeps_the_notes(tmp_path, one_section):
    path = tmp_path / "BENCHMARKS.md"
    notes = f"{bench.NOTES_HEADING}\n\nWhy run 1 was slow.\n"
    path.write_text(f"# Benchmarks\n\n## Gas\n\nrun 0\n\n{notes}")
    bench.run(path=path)
    text = path.read_text()
    assert "run 1" in text and "run 0" not in text
    assert text.endswith(f"\n\n{notes}") and text.count(bench.NOTES_HEADING) == 1
    bench.run(path=path)
    assert "run 2" in path.read_text() and path.read_text().endswith(f"\n\n{notes}")


def test_a_file_without_notes_gets_the_results_alone_and_a_partial_run_writes_nothing(tmp_path, one_section):
    path = tmp_path / "BENCHMARKS.md"
    bench.run(path=path)
    assert path.read_text().endswith("## Gas\n\nrun 1\n") and bench.NOTES_HEADING not in path.read_text()
    assert "run 2" in bench.run(["gas"], path=path)
    assert "run 2" not in path.read_text()
