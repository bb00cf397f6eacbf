"""The one sandboxed model executor: the provider's jobs, the verifiers' re-executions and the
backend's load checks of uploaded models all run here, so they compute with the same code and
get bit-identical outputs.

A job's model is untrusted code (the renter's). It runs in a warm executor: a long-lived
*template* process (`client.sandbox_child`) that imported torch and onnxruntime once and then
forks one fresh child per job, so a job pays milliseconds instead of the second or two an
interpreter takes to import torch, and nothing one job does (a global, a file, a thread) is seen
by the next: each job runs in its own forked copy, which exits after it.

What a template gets:
- Linux namespaces through bubblewrap (`bwrap --unshare-all --die-with-parent`): no network
  (a loopback of its own, nothing listening), its own pids, and a file system made only of
  the system and interpreter directories (read-only) and one job directory (`/job`) that
  holds the current job's files and nothing else; it is emptied after every job, before the next. Where bwrap
  is missing the executor refuses to run unless `UNCHAINED_SANDBOX_ISOLATION=none` says to run
  without namespaces, and then says so in a warning at every template start.
- an allowlisted environment built here, never a copy of the parent's: only what the
  interpreter, torch and the thread pools need (PATH, locale, thread counts, the GPU selection,
  a HOME inside the job directory), so no secret of the agent can reach the model;
- death with its parent: bwrap is started from one long-lived thread with a parent-death
  signal (it fires when the *thread* that started the process ends), `--die-with-parent`
  passes it on, and every job child has its own parent-death signal on the template.
Each job child gets an address-space limit (RLIMIT_AS: an allocation beyond it fails inside the
child), a CPU-time limit (a backstop) and its own session. The parent enforces the wall-clock
budget: a job that overruns it is killed with its whole template, and a template whose job
failed in any way but a clean exception of the model is replaced.

Files cross the boundary: the parent copies the model and inputs into the job directory and
sends the request (one JSON line naming them, with the limits) down the template's stdin; the
child writes one encoded output per item or `error.json`; outputs are untrusted and checked by
the caller. The job directory is emptied in the background once the caller has the outputs, and
a template is handed to no job before that is done. Every way a model can fail ends as one
`SandboxFailed` with a `kind`.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import json
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from client.errors import ClientError
from protocol.execution import PINNED_KERNELS

logger = logging.getLogger(__name__)

# Copied from the parent when set: none of them carries a secret, each changes how the child runs.
INHERITED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
# Set here, whatever the parent has.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "UNCHAINED_JOB_THREADS")
SET_HERE = (*THREAD_VARIABLES, *PINNED_KERNELS, "OMP_WAIT_POLICY", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONNOUSERSITE",
            "PYTHONDONTWRITEBYTECODE")
ALLOWED = frozenset(INHERITED + SET_HERE)
# The directory that holds the `protocol` and `client` packages: the child imports its entry
# module from there, also when the project is not installed. Only those two packages of it are
# visible inside the sandbox (the checkout may hold keystores and a data directory).
PACKAGES_ROOT = Path(__file__).resolve().parent.parent
SANDBOX_PACKAGES = ("protocol", "client")

ISOLATION_ENV = "UNCHAINED_SANDBOX_ISOLATION"
ISOLATIONS = ("namespaces", "none")
JOB_DIR = Path("/job")  # the job directory as the model sees it inside the namespaces


def child_environment(threads: int, home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a model child: the allowlist, `threads` for every thread pool,
    the pinned CPU kernels (every party computes the same bits on any x86-64 host), `home`
    (inside the job directory) as HOME and TMPDIR."""
    parent = os.environ if environ is None else environ
    env = {name: parent[name] for name in INHERITED if name in parent}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env.update({name: str(max(1, threads)) for name in THREAD_VARIABLES})
    env.update(PINNED_KERNELS)
    env.update(OMP_WAIT_POLICY="PASSIVE", HOME=str(home), TMPDIR=str(home), PYTHONPATH=str(PACKAGES_ROOT),
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


class SandboxFailed(ClientError):
    """The model could not produce its outputs; `kind` is one of KINDS (for logs, metrics,
    reports), `stage` where the child was when it failed: load, input or run ("" if unknown)."""

    def __init__(self, kind: str, message: str, stage: str = "") -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.stage = stage


class SandboxUnavailable(ClientError):
    """The sandbox cannot be started as configured (bubblewrap missing, a bad setting)."""


KINDS = ("model-error", "out-of-memory", "timeout", "crashed")
KILLED = "the model process was killed"  # how a "crashed" message starts when a limit's SIGKILL ended it


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    timeout_s: float
    threads: int = 1


@dataclass(frozen=True)
class ItemBatch:
    """Items `start`, `start + 1`, ... (their encoded input files), run in chunks of `batch_size`."""

    start: int
    inputs: tuple[Path, ...]
    batch_size: int


@dataclass(frozen=True)
class ModelRun:
    outputs: dict[int, bytes]  # item index -> encoded output, as the child wrote it (untrusted)
    seconds: float
    executor: int  # the generation of the warm template that ran it (one number per template started)
    child: int  # the job child's pid (in the template's pid namespace): a fresh one per job


def isolation(environ: Mapping[str, str] | None = None) -> str:
    """The configured isolation: "namespaces" (the default; needs bwrap) or "none"."""
    value = (os.environ if environ is None else environ).get(ISOLATION_ENV, "namespaces").strip() or "namespaces"
    if value not in ISOLATIONS:
        raise SandboxUnavailable(f"{ISOLATION_ENV}={value!r}: expected one of {', '.join(ISOLATIONS)}")
    return value


def bwrap_path() -> str:
    """The bubblewrap binary, or SandboxUnavailable saying how to install it or opt out."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so models cannot run without network and file access: "
            f"install it (Debian: apt-get install bubblewrap) or set {ISOLATION_ENV}=none to run them "
            "with limits but no namespace isolation")
    return found


def bwrap_arguments(spool: Path, env: Mapping[str, str]) -> list[str]:
    """bwrap's options: new namespaces of every kind, the system and interpreter directories
    read-only, `spool` as the writable job directory, nothing else of the host's files."""
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):  # merged /usr: the same symlink as the host's
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    read_only = {"/usr", sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)),
                 "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/sys/devices/system/cpu"}
    read_only.update(str(PACKAGES_ROOT / name) for name in SANDBOX_PACKAGES)
    for variable in ("PYTHONPATH", "LD_LIBRARY_PATH"):  # what the environment tells the child to load
        read_only.update(p for p in env.get(variable, "").split(os.pathsep)
                         if p and Path(p).resolve() != PACKAGES_ROOT)
    for path in sorted(read_only):
        args += ["--ro-bind-try", path, path]
    args += ["--dev", "/dev"]
    for device in sorted(Path("/dev").glob("nvidia*")):  # the GPUs, where there are any
        args += ["--dev-bind", str(device), str(device)]
    args += ["--proc", "/proc", "--bind", str(spool), str(JOB_DIR), "--remount-ro", "/", "--chdir", str(JOB_DIR)]
    return args


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in a new process between fork and exec: the kernel kills it when the thread that
    started it ends (Linux PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Spawner:
    """Starts every template from one long-lived daemon thread: a parent-death signal is bound
    to the thread that forked, so a template started from a passing worker thread would die with
    that thread. One per process (a forked process, such as a Celery worker, starts its own)."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]],
                                                Future[subprocess.Popen[bytes]]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="sandbox-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            start, result = self._requests.get()
            try:
                result.set_result(start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                result.set_exception(exc)

    def popen(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        result: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((start, result))
        return result.result()


class _Cleaner:
    """Empties finished jobs' directories and deletes their files from one daemon thread, in the
    order asked, so that no job waits for the cleanup of the last one's (nor for a thread to
    start). One per process, as the spawner."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[float, Callable[[], None]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="sandbox-cleaner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            due, work = self._work.get()
            time.sleep(max(0.0, due - time.monotonic()))
            work()

    def submit(self, work: Callable[[], None], delay_s: float = 0.0) -> None:
        """Runs `work` on the cleaner's thread, `delay_s` from now at the earliest; works run in
        the order submitted, so a work also waits for the delays of those before it."""
        self._work.put((time.monotonic() + delay_s, work))

    def discard(self, directory: Path) -> None:
        self.submit(lambda: shutil.rmtree(directory, onerror=self._not_deleted))

    @staticmethod
    def _not_deleted(_function: object, path: str, exc_info: tuple[type[BaseException], BaseException, object]) -> None:
        if not isinstance(exc_info[1], FileNotFoundError):  # gone with its template already
            logger.warning("finished job's file %s not deleted (%s): it goes with its sandbox", path, exc_info[1])


_generations = itertools.count(1)
RESET_DELAY_S = 0.02  # after a job's outputs are read: its caller's reply is out by then


def _pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The template's stdin and stdout (both asked for as pipes)."""
    if process.stdin is None or process.stdout is None:
        raise SandboxUnavailable("the model sandbox started without its pipes")
    return process.stdin, process.stdout


class _Template:
    """One warm template: a sandboxed interpreter with torch imported, forking a child per job."""

    READY_TIMEOUT_S = 180.0  # importing torch on a loaded machine; the job's own budget starts after

    def __init__(self, threads: int, spawner: _Spawner, cleaner: _Cleaner) -> None:
        self.cleaner = cleaner
        self._reset_lock = threading.Lock()
        self._dirty = False  # the job directory still holds the last job's files
        self._reset_error: OSError | None = None
        self.isolation = isolation()
        bwrap = bwrap_path() if self.isolation == "namespaces" else None
        self.generation = next(_generations)
        self.base = Path(tempfile.mkdtemp(prefix="unchained-sandbox-"))  # 0700, ours alone
        self.spool = self.base / "job"
        inside = JOB_DIR if bwrap else self.spool
        self.job_dir = inside  # how the template and its children name the job directory
        self.env = child_environment(threads, inside / "home")
        self.reset()
        argv = [sys.executable, "-m", "client.sandbox_child", str(inside)]
        if bwrap:
            argv = [bwrap, *bwrap_arguments(self.spool, self.env), *argv]
        else:
            logger.warning("model sandbox WITHOUT namespace isolation (%s=none): models can reach the network "
                           "and every file this user can read", ISOLATION_ENV)
        log = (self.base / "template.log").open("wb")  # outside the job directory: the model cannot read it
        try:
            self.process = spawner.popen(lambda: subprocess.Popen(
                argv, preexec_fn=_die_with_parent, start_new_session=True, cwd=self.spool, env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log))
        except OSError as exc:
            shutil.rmtree(self.base, ignore_errors=True)
            raise SandboxUnavailable(f"the model sandbox could not be started: {exc}") from exc
        finally:
            log.close()
        self._stdin, self._stdout = _pipes(self.process)
        self._buffer = b""
        self.ready = False

    def reset_later(self) -> None:
        """Has the job directory emptied a moment from now on the cleaner's thread, once the
        caller's reply to the job is out (emptying it at once took the interpreter's lock from
        that reply); `wait_clean` empties it at once if the next job comes first."""
        with self._reset_lock:
            self._dirty = True
        self.cleaner.submit(self._reset_if_dirty, RESET_DELAY_S)

    def _reset_if_dirty(self) -> None:
        with self._reset_lock:
            if not self._dirty:
                return
            self._dirty = False
            try:
                self.reset()
            except OSError as exc:  # the job left something we cannot remove: this template is done
                self._reset_error = exc

    def wait_clean(self) -> OSError | None:
        """Empties the job directory of the last job's files unless that is done already (or
        waits while the cleaner does it); the error when they could not be moved out (the
        template must not run another job then)."""
        self._reset_if_dirty()
        return self._reset_error

    def reset(self) -> None:
        """Empties the job directory (its contents only: the sandbox holds the directory itself).
        The last job's files are moved out of it, one rename each, into a directory of the
        template's outside the sandbox, and deleted there later: the next job does not wait for
        the deletion (what cannot be deleted goes with the template)."""
        self.spool.mkdir(mode=0o700, exist_ok=True)
        entries = list(self.spool.iterdir())
        if entries:
            done = Path(tempfile.mkdtemp(prefix="done-", dir=self.base))
            for entry in entries:
                entry.rename(done / entry.name)
            self.cleaner.discard(done)
        (self.spool / "home").mkdir()
        (self.spool / "out").mkdir()

    def alive(self) -> bool:
        return self.process.poll() is None

    def _readline(self, deadline: float) -> bytes | None:
        """One line from the template, or None at EOF or when the deadline passes."""
        fd = self._stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self._readline(time.monotonic() + self.READY_TIMEOUT_S)
        if line is None or not line.startswith(b"ready"):
            self.close()
            raise SandboxFailed("crashed", f"the model sandbox did not start: {self.log_tail()}")
        self.ready = True
        logger.debug("sandbox template %s ready: %s", self.generation, line.decode(errors="replace"))

    def log_tail(self) -> str:
        try:
            return (self.base / "template.log").read_bytes()[-800:].decode(errors="replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    def run(self, limits: Limits, request: dict[str, Any]) -> tuple[int, int]:
        """Asks for one job (its files in the job directory, named by `request`): (child pid,
        exit code). SandboxFailed when the wall-clock budget runs out or the template dies."""
        cpu = int(limits.timeout_s * max(1, limits.threads)) + 5
        order = json.dumps({"memory": limits.memory_bytes, "cpu": cpu, "request": request}) + "\n"
        deadline = time.monotonic() + limits.timeout_s
        try:
            self._stdin.write(order.encode())
            self._stdin.flush()
            line = self._readline(deadline)
        except OSError:
            line = None
        if line is not None:
            reply = json.loads(line)
            return int(reply["pid"]), int(reply["status"])
        if time.monotonic() >= deadline:
            raise SandboxFailed("timeout", f"the model ran past its {limits.timeout_s:.1f} s budget and was killed")
        raise SandboxFailed("crashed", f"the model sandbox died: {self.log_tail()}")

    def close(self) -> None:
        """Kills the template and everything in its sandbox, and removes its files."""
        with self._reset_lock:  # a reset under way would put files back into the directory removed here
            self._dirty = False
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        for stream in (self._stdin, self._stdout):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)


class _Pool:
    """The warm templates of this process, idle ones keyed by their environment (which holds the
    thread count): a template runs one job at a time; concurrent jobs get one each."""

    MAX_IDLE = 4

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.spawner = _Spawner()
        self.cleaner = _Cleaner()
        self.lock = threading.Lock()
        self.idle: list[tuple[tuple[object, ...], _Template]] = []

    @staticmethod
    def key(threads: int) -> tuple[object, ...]:
        return isolation(), *sorted(child_environment(threads, JOB_DIR / "home").items())

    def take(self, threads: int) -> _Template:
        key = self.key(threads)
        with self.lock:
            found = next((i for i, (k, _) in enumerate(self.idle) if k == key), None)
            template = self.idle.pop(found)[1] if found is not None else None
        if template is not None:
            if (error := template.wait_clean()) is not None:
                logger.warning("job directory of sandbox %s not emptied (%s): replacing it", template.generation, error)
            elif template.alive():
                return template
            template.close()
        return _Template(threads, self.spawner, self.cleaner)

    def give_back(self, threads: int, template: _Template) -> None:
        with self.lock:
            self.idle.append((self.key(threads), template))
            evicted = self.idle[:-self.MAX_IDLE] if len(self.idle) > self.MAX_IDLE else []
            del self.idle[:len(evicted)]
        for _, old in evicted:
            old.close()

    def prewarm(self, threads: int) -> None:
        key = self.key(threads)
        with self.lock:
            if any(k == key and t.alive() for k, t in self.idle):
                return
        self.give_back(threads, _Template(threads, self.spawner, self.cleaner))

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for _, template in idle:
            template.close()


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _the_pool() -> _Pool:
    """This process's pool; a forked process (a Celery prefork worker) builds its own and leaves
    its parent's templates alone."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Pool()
        return _pool


@atexit.register
def close_idle() -> None:
    """Stops this process's idle templates (at exit, or to make the next job start a fresh one)."""
    if _pool is not None and _pool.pid == os.getpid():
        _pool.close()


def prewarm(limits: Limits) -> None:
    """Starts a warm template for these limits' thread count now, unless one is idle already
    (the provider agent calls it on start; it does not wait for torch to be imported)."""
    _the_pool().prewarm(limits.threads)


def _stage(source: Path, target: Path, stage: str) -> None:
    """Copies a file into the job directory. Never a hard link: the model may write there, and
    through a link it would write into the caller's file (a cached model, a job's input)."""
    try:
        shutil.copyfile(source, target)
    except OSError as exc:
        raise SandboxFailed("model-error", f"cannot read {source}: {exc.strerror or exc}", stage) from None


def run_model(model: Path, model_format: str, batches: Sequence[ItemBatch], limits: Limits, *,
              label: str = "model") -> ModelRun:
    """Runs the model over the batches' items in a fresh child of a warm sandboxed template;
    returns each item's encoded output. `label` names the run in logs (e.g. "job 7")."""
    pool = _the_pool()
    template = pool.take(limits.threads)
    healthy = False
    try:
        template.wait_ready()
        spool, inside = template.spool, template.job_dir
        _stage(model, spool / "model", "load")
        (spool / "in").mkdir()
        request_batches = []
        for b in batches:
            names = []
            for offset, path in enumerate(b.inputs):
                _stage(path, spool / "in" / f"{b.start + offset}", "input")
                names.append(str(inside / "in" / f"{b.start + offset}"))
            request_batches.append({"start": b.start, "inputs": names, "batch_size": b.batch_size})
        request = {"model": str(inside / "model"), "format": model_format, "threads": limits.threads,
                   "out_dir": str(inside / "out"), "batches": request_batches}
        started = time.monotonic()
        logger.info("%s: model child of sandbox %s (pid %s; %s, %d items, AS limit %d MiB, %.0f s)", label,
                    template.generation, template.process.pid, model_format, sum(len(b.inputs) for b in batches),
                    limits.memory_bytes >> 20, limits.timeout_s)
        child, status = template.run(limits, request)
        seconds = time.monotonic() - started
        if status != 0:
            raise _failure(status, spool, limits)
        outputs = {}
        for batch in batches:
            for index in range(batch.start, batch.start + len(batch.inputs)):
                path = spool / "out" / f"{index}.out"
                if not path.is_file():
                    raise SandboxFailed("crashed", f"the model process wrote no output for item {index}")
                outputs[index] = path.read_bytes()
        healthy = True
        return ModelRun(outputs, seconds, template.generation, child)
    except SandboxFailed as exc:
        healthy = exc.kind == "model-error" and template.alive()  # a clean exception leaves the template sound
        raise
    finally:
        if healthy:  # emptied for the next job while this one's caller goes on
            template.reset_later()
            pool.give_back(limits.threads, template)
        else:  # killed and replaced: the next job gets a fresh template, started now
            template.close()
            try:
                pool.prewarm(limits.threads)
            except ClientError as exc:
                logger.warning("could not start a replacement model sandbox: %s", exc)


def _failure(status: int, spool: Path, limits: Limits) -> SandboxFailed:
    error_file = spool / "error.json"
    if error_file.is_file():
        try:
            error = json.loads(error_file.read_text())
            message = f"{error['type']}: {error['message']}"
            kind, stage = error["kind"], str(error.get("stage", ""))
        except (ValueError, KeyError, TypeError):  # the child is untrusted: so is its report
            return SandboxFailed("crashed", "the model process wrote an unreadable error report")
        if kind == "memory":
            return SandboxFailed("out-of-memory", f"{message} (limit {limits.memory_bytes >> 20} MiB)", stage)
        return SandboxFailed("model-error", message, stage)
    if status == -signal.SIGXCPU:
        return SandboxFailed("timeout", "the model used up its CPU-time limit")
    if status == -signal.SIGKILL:
        return SandboxFailed("crashed", f"{KILLED} (CPU-time hard limit or the kernel's out-of-memory killer)")
    try:
        tail = (spool / "stderr").read_bytes()[-500:].decode(errors="replace")
    except OSError:
        tail = ""
    return SandboxFailed("crashed", f"the model process exited with {status}: {tail}")


__all__ = ["ALLOWED", "INHERITED", "ISOLATIONS", "ISOLATION_ENV", "ItemBatch", "JOB_DIR", "KINDS", "Limits",
           "KILLED", "ModelRun", "PACKAGES_ROOT", "SET_HERE", "SandboxFailed", "SandboxUnavailable", "bwrap_arguments",
           "child_environment", "close_idle", "isolation", "prewarm", "run_model"]
