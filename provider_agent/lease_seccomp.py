"""The seccomp filter every process of a lease runs under: a classic BPF program, built here
(no libseccomp needed), that makes the system calls container runtimes deny by default fail with
EPERM (Docker's and Podman's default profiles: mount, namespaces, kernel modules and keyrings,
ptrace and cross-process memory access, bpf, perf, io_uring, clock and reboot...), refuses
clone() with any namespace flag, answers clone3() with ENOSYS (its flags live in memory a filter
cannot read; libc then falls back to clone()), and kills a process that calls in through another
ABI (x32, i386) whose numbers the list would not match.

bubblewrap loads it for the sandbox's own processes (`--seccomp FD`); `lease_enter` loads it into
every SSH session before it runs the renter's shell. Pure: no I/O.
"""

from __future__ import annotations

import platform
import struct

# x86_64 numbers (asm/unistd_64.h).
DENIED_X86_64: dict[str, int] = {
    "ptrace": 101, "uselib": 134, "ustat": 136, "sysfs": 139, "vhangup": 153, "pivot_root": 155, "_sysctl": 156,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "iopl": 172, "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "get_kernel_syms": 177, "query_module": 178, "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212,
    "clock_settime": 227, "mbind": 237, "set_mempolicy": 238, "get_mempolicy": 239, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "move_pages": 279, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "quotactl_fd": 443,
}
CLONE_X86_64 = 56
CLONE3_X86_64 = 435
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
CLONE_NAMESPACE_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
EPERM = 1
ENOSYS = 38
# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64, little-endian)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16


class SeccompUnsupported(Exception):
    """No filter is written for this machine's architecture."""


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter as `struct sock_filter[]` bytes (what bwrap --seccomp and PR_SET_SECCOMP take)."""
    machine = machine or platform.machine()
    if machine not in ("x86_64", "amd64", "AMD64"):
        raise SeccompUnsupported(f"the lease seccomp filter is written for x86_64, not {machine}")
    denied = sorted(set(DENIED_X86_64.values()))
    out = [_insn(_LD_W_ABS, 0, 0, _ARCH),
           _insn(_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
           _insn(_RET_K, 0, 0, RET_KILL_PROCESS),
           _insn(_LD_W_ABS, 0, 0, _NR),
           _insn(_JGE_K, 0, 1, X32_SYSCALL_BIT),
           _insn(_RET_K, 0, 0, RET_KILL_PROCESS)]
    # Layout after here: [clone test][clone3 test][one test per denied call][ALLOW][EPERM][ENOSYS]
    # [clone block: load flags, test, ALLOW, EPERM]. Jumps count instructions skipped.
    n = len(denied)
    tests = 2 + n
    # From test i (0-based among `tests`), the next instruction index is i+1; ALLOW is at `tests`.
    eperm, enosys, clone_block = tests + 1, tests + 2, tests + 3  # ALLOW is at `tests`
    out.append(_insn(_JEQ_K, clone_block - 1, 0, CLONE_X86_64))
    out.append(_insn(_JEQ_K, enosys - 2, 0, CLONE3_X86_64))
    for i, nr in enumerate(denied):
        here = 2 + i
        out.append(_insn(_JEQ_K, eperm - here - 1, 0, nr))
    out.append(_insn(_RET_K, 0, 0, RET_ALLOW))
    out.append(_insn(_RET_K, 0, 0, RET_ERRNO | EPERM))
    out.append(_insn(_RET_K, 0, 0, RET_ERRNO | ENOSYS))
    out.append(_insn(_LD_W_ABS, 0, 0, _ARG0_LOW))  # clone(flags, ...): flags in the low word of args[0]
    out.append(_insn(_JSET_K, 1, 0, CLONE_NAMESPACE_FLAGS))
    out.append(_insn(_RET_K, 0, 0, RET_ALLOW))
    out.append(_insn(_RET_K, 0, 0, RET_ERRNO | EPERM))
    if max(eperm, clone_block) > 255:
        raise AssertionError("a jump of the filter does not fit in 8 bits")
    return b"".join(out)


def evaluate(prog: bytes, nr: int, arch: int = AUDIT_ARCH_X86_64, arg0: int = 0) -> int:
    """Runs the filter on one system call, as the kernel would (the slow obvious reference the
    tests check `program` against): its return value."""
    data = struct.pack("=IIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == _LD_W_ABS:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == _RET_K:
            return k
        elif code in (_JEQ_K, _JGE_K, _JSET_K):
            taken = {_JEQ_K: acc == k, _JGE_K: acc >= k, _JSET_K: bool(acc & k)}[code]
            pc += jt if taken else jf
        else:
            raise ValueError(f"opcode {code:#x}")
        pc += 1


__all__ = ["DENIED_X86_64", "RET_ALLOW", "RET_ERRNO", "RET_KILL_PROCESS", "SeccompUnsupported", "evaluate", "program"]
