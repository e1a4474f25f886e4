"""CRC-32C (Castagnoli), the checksum of record batches and producer-state snapshots.

The computation is the `crc32c` package's C extension (hardware instructions where the CPU has
them). Its package ``__init__`` also imports ``importlib.metadata`` and ``email`` only to set
``__version__``, which costs about 25 ms of every broker start (a tenth of the start-up budget),
so the extension module is loaded on its own. If the package's layout ever changes, the plain
``import crc32c`` is the fallback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from importlib.util import find_spec, module_from_spec

__all__ = ["crc32c"]


def _load_extension() -> Callable[..., int]:
    if "crc32c" in sys.modules:  # someone already paid for the package import
        return sys.modules["crc32c"].crc32c
    package = find_spec("crc32c")
    locations = package.submodule_search_locations if package is not None else None
    spec = PathFinder.find_spec("crc32c._crc32c", locations) if locations else None
    if spec is None or spec.loader is None:
        import crc32c as package_module  # noqa: PLC0415 - the slow but documented way

        return package_module.crc32c
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.crc32c


crc32c: Callable[..., int] = _load_extension()
