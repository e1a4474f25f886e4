"""The CRC-32C loader: same function as the crc32c package, without its slow package import."""

import subprocess
import sys

import crc32c as crc32c_package

from odradek.wire.checksum import crc32c


def test_matches_the_crc32c_package_and_the_standard_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    for data in (b"", b"a", bytes(range(256)) * 17, memoryview(b"kafka record batch")[3:]):
        assert crc32c(data) == crc32c_package.crc32c(data)


def test_loading_it_does_not_import_the_package() -> None:
    code = (
        "import sys; from odradek.wire.checksum import crc32c; "
        "assert crc32c(b'123456789') == 0xE3069283; "
        "print(sorted(m for m in sys.modules if m.startswith(('crc32c', 'importlib.metadata', 'email'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
