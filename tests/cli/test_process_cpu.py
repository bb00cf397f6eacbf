"""The load bench's CPU meter: a process tree's time includes children that already exited."""

import subprocess
import sys
import time

import psutil

from devtools.process_cpu import CpuMeter, Root, cpu_seconds

# A parent that runs a child burning about `BURN_S` CPU seconds, waits for it (so its time
# moves into the parent's children times), says so, and then idles until stdin closes.
BURN_S = 0.5
PARENT = f"""
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + {BURN_S}\\nwhile time.process_time() < end: pass"], check=True)
print("child done", flush=True)
sys.stdin.read()
"""


def test_a_tree_counts_its_reaped_children_and_a_lone_root_does_not():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        meter = CpuMeter({"tree": [Root(parent.pid)], "root": [Root(parent.pid, tree=False)],
                          "children": [Root(parent.pid, without_root=True)]}).start()
        assert parent.stdout.readline().strip() == "child done"
        usage = meter.stop()
        assert usage.seconds["children"] >= BURN_S * 0.9  # the child's time, though it exited
        assert usage.seconds["tree"] >= usage.seconds["children"] + usage.seconds["root"] - 1e-6
        assert usage.seconds["root"] < usage.seconds["children"]  # the parent only waited
        assert usage.cores == psutil.cpu_count() and usage.wall_s > 0 and usage.total > BURN_S
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)


def test_a_process_that_is_gone_counts_nothing():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)  # reaped: its pid names nothing now
    assert cpu_seconds(Root(gone.pid)) == 0.0
    assert cpu_seconds(Root(gone.pid, tree=False)) == 0.0


def test_usage_against_the_cores():
    meter = CpuMeter({"this process": [Root(psutil.Process().pid, tree=False)]}).start()
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    usage = meter.stop()
    assert usage.seconds["this process"] >= 0.15
    assert 0 < usage.utilisation <= 1.0 + 1e-6
    assert usage.machine_busy_s >= usage.seconds["this process"] * 0.9
