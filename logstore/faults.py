"""Disk-fault injection for tests: a shim around the log store's append-path writes.

Off by default and free then: ``pwrite`` is ``os.pwrite`` itself. A test sets the environment
variable ``ODRADEK_FAULT_INJECT=<control file>`` before starting the broker; from then on each
append-path write reads the control file, whose text names the faults to raise, one per line:

* ``append:ENOSPC`` / ``append:EIO`` -- the segment write fails with that errno;
* ``append-partial:ENOSPC`` -- half of the batch is written, then the write fails (a torn write);
* ``index:ENOSPC`` / ``index:EIO`` -- reserving the next index block fails.

An empty or missing file means no fault: the test removes the fault to see service resume.
A real full disk is tested on a small tmpfs where the test can mount one (compat-tests/test_disk_faults
in test_crash_loop.py's family; see docs/reliability.md).
"""

from __future__ import annotations

import errno
import os

_CONTROL = os.environ.get("ODRADEK_FAULT_INJECT")


def _faults() -> set[str]:
    try:
        with open(_CONTROL, encoding="ascii") as f:  # type: ignore[arg-type]
            return {line.strip() for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def _raise_if(point: str, faults: set[str]) -> None:
    for name in ("ENOSPC", "EIO"):
        if f"{point}:{name}" in faults:
            code = getattr(errno, name)
            raise OSError(code, f"{os.strerror(code)} (injected)")


def _pwrite_with_faults(fd: int, data, position: int) -> int:
    faults = _faults()
    if faults:
        for name in ("ENOSPC", "EIO"):
            if f"append-partial:{name}" in faults:
                half = len(data) // 2
                os.pwrite(fd, memoryview(data)[:half], position)
                code = getattr(errno, name)
                raise OSError(code, f"{os.strerror(code)} (injected after {half} bytes)")
        _raise_if("append", faults)
    return os.pwrite(fd, data, position)


def _check_index_with_faults() -> None:
    faults = _faults()
    if faults:
        _raise_if("index", faults)


def _no_index_fault() -> None:
    return None


#: ``os.pwrite`` for segment appends (with injected faults when ODRADEK_FAULT_INJECT is set)
pwrite = _pwrite_with_faults if _CONTROL else os.pwrite
#: called before an index block is reserved; raises the injected index fault if any
check_index = _check_index_with_faults if _CONTROL else _no_index_fault
