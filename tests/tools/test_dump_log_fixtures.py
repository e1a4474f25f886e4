"""``odradek dump-log`` against real Kafka 3.9 DumpLogSegments output, byte for byte.

* ``kafka-real/dump-outputs-3.9/``: one run of the real tool per file and mode (shallow = no flag,
  deep = ``--deep-iteration``, print = ``--print-data-log``), started in ``kafka-real/`` with
  ``./<path>``; stderr paths are absolute with the folder written as ``<fixtures>``.
* ``kafka-corpus/W*/dump/<partition>/``: one run per mode over all files of a partition, split at
  the ``Dumping`` lines; paths read ``<logdir>`` for the workload's ``logdir-clean``.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from dumplog_util import CORPUS, REAL, assert_same_lines, run_dump

MODE_FLAGS = {
    "shallow": [],
    "deep": ["--deep-iteration"],
    "print": ["--print-data-log"],
    "plain": [],
    "data": ["--print-data-log"],
    "verify-index-only": ["--verify-index-only"],
    "index-sanity-check": ["--index-sanity-check"],
    "offsets-decoder": ["--print-data-log", "--offsets-decoder"],
    "transaction-log-decoder": ["--print-data-log", "--transaction-log-decoder"],
}


def _real_cases() -> list[tuple[str, str, Path]]:
    dumps = REAL / "dump-outputs-3.9"
    if not dumps.is_dir():
        return []
    by_key = {}
    for p in REAL.rglob("*"):
        if p.is_file() and dumps not in p.parents:
            rel = p.relative_to(REAL).as_posix()
            by_key[rel.replace("/", "__")] = rel
    cases = []
    for d in sorted(dumps.iterdir()):
        m = re.fullmatch(r"(.+)\.(shallow|deep|print)\.stdout(\.gz)?", d.name)
        if not m:
            continue
        rel = by_key.get(m.group(1))
        assert rel is not None, f"no fixture file for {d.name}"
        cases.append((rel, m.group(2), d))
    return cases


REAL_CASES = _real_cases()


def test_every_real_dump_is_covered() -> None:
    # 49 files in dump-outputs-3.9, of which 2 are .stderr files
    assert len(REAL_CASES) == 47


@pytest.mark.parametrize(("rel", "mode", "stdout_file"), REAL_CASES, ids=[f"{c[0]}:{c[1]}" for c in REAL_CASES])
def test_real_fixture_dump(rel: str, mode: str, stdout_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REAL)
    raw = stdout_file.read_bytes()
    expected = gzip.decompress(raw) if stdout_file.name.endswith(".gz") else raw
    # the path exactly as the real run was given it (most with "./", a few without)
    arg = expected.split(b"\n", 1)[0].decode().removeprefix("Dumping ")
    assert arg in (rel, f"./{rel}")
    out, err, rc = run_dump(["--files", arg, *MODE_FLAGS[mode]])
    assert rc == 0
    assert_same_lines(out, expected, f"{rel} ({mode}) stdout")
    stderr_file = stdout_file.with_name(re.sub(r"\.stdout(\.gz)?$", ".stderr", stdout_file.name))
    expected_err = stderr_file.read_bytes() if stderr_file.exists() else b""
    # Java's getAbsolutePath keeps the "./": <cwd>/./<rel>; the fixture writes <fixtures>/<rel>
    norm = err.replace(f"{REAL}/./".encode(), b"<fixtures>/").replace(f"{REAL}/".encode(), b"<fixtures>/")
    assert_same_lines(norm, expected_err, f"{rel} ({mode}) stderr")


def _corpus_cases() -> list[tuple[Path, str]]:
    cases = []
    for part in sorted(CORPUS.glob("W*/dump/*")):
        for stderr_file in sorted(part.glob("_all.*.stderr")):
            mode = stderr_file.name[len("_all.") : -len(".stderr")]
            cases.append((part, mode))
    return cases


CORPUS_CASES = _corpus_cases()


def test_corpus_cases_found() -> None:
    assert len(CORPUS_CASES) >= 50


@pytest.mark.parametrize(
    ("part", "mode"), CORPUS_CASES, ids=[f"{c[0].parent.parent.name}/{c[0].name}:{c[1]}" for c in CORPUS_CASES]
)
def test_corpus_dump(part: Path, mode: str) -> None:
    logdir = part.parent.parent / "logdir-clean"
    suffix = f".{mode}.txt"
    names = sorted(p.name[: -len(suffix)] for p in part.glob(f"*{suffix}"))
    assert names, f"no {mode} dumps in {part}"
    files = [str(logdir / part.name / n) for n in names]
    out, err, rc = run_dump(["--files", ",".join(files), *MODE_FLAGS[mode]])
    text = out.replace(str(logdir).encode(), b"<logdir>")
    chunks = re.split(rb"(?m)^(?=Dumping )", text)
    chunks = [c for c in chunks if c]
    assert len(chunks) == len(names)
    for name, chunk in zip(names, chunks, strict=True):
        expected = (part / f"{name}{suffix}").read_bytes()
        assert_same_lines(chunk, expected, f"{part.name}/{name} ({mode})")
    raw_err = (part / f"_all.{mode}.stderr").read_bytes()
    m = re.fullmatch(rb"(.*)\n\[exit (\d+)\]\n", raw_err, re.S)
    assert m is not None
    assert rc == int(m.group(2))
    assert_same_lines(err.replace(str(logdir).encode(), b"<logdir>"), m.group(1), f"{part.name} ({mode}) stderr")


# ---------------------------------------------------------------------------------------------
# modes the kafka-real dumps do not cover: recorded from Kafka 3.9.1 on the same files by
# record_kafka_expectations.py (decoders for KRaft metadata and __consumer_offsets,
# --skip-record-metadata, --verify-index-only, --index-sanity-check)

EXTRA = Path(__file__).parent / "data" / "kafka39_real_extra"


def _extra_cases() -> list[tuple[str, list[str], list[str]]]:
    from record_kafka_expectations import REAL_EXTRA

    return REAL_EXTRA


@pytest.mark.parametrize(("name", "files", "flags"), _extra_cases(), ids=[c[0] for c in _extra_cases()])
def test_real_fixture_extra_modes(name: str, files: list[str], flags: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REAL)
    out, err, rc = run_dump(["--files", ",".join(files), *flags])
    assert_same_lines(out, gzip.decompress((EXTRA / f"{name}.stdout.gz").read_bytes()), f"{name} stdout")
    got = err.replace(str(REAL).encode(), b"<fixtures>") + f"[exit {rc}]\n".encode()
    assert_same_lines(got, (EXTRA / f"{name}.stderr").read_bytes(), f"{name} stderr")
