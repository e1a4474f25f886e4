"""A local SparkSession with Spark's Kafka connector, without any download at run time.

``.ci/fetch-tools.sh`` resolves ``org.apache.spark:spark-sql-kafka-0-10_2.13`` (the version of the
pyspark pin) with Maven into the repo cache and writes its runtime classpath to
``.cache/spark-kafka.classpath``. :func:`connector_jars` reads that file and :func:`build_session`
passes the jars through ``spark.jars``. The jars must be known when the JVM starts (Spark finds
the ``kafka`` data source with a ServiceLoader on the driver's class path), so the first session
of a process decides; :func:`build_session` therefore always adds them when they exist.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Overrides where the classpath file is looked for (default: ``$ODRADEK_CACHE_DIR`` or ``<repo>/.cache``).
CLASSPATH_ENV = "ODRADEK_SPARK_KAFKA_CLASSPATH"

_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")


#: Settings for short local runs (tests, demos): a JVM that starts fast rather than runs fast.
#: C1-only JIT and the serial GC roughly halve session start and first-query time on two busy
#: cores; the console progress bar would only clutter test logs.
FAST_LOCAL_CONF = {
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.ui.showConsoleProgress": "false",
}


def classpath_file() -> Path:
    """Where fetch-tools.sh writes the connector's classpath."""
    if os.environ.get(CLASSPATH_ENV):
        return Path(os.environ[CLASSPATH_ENV])
    cache = Path(os.environ.get("ODRADEK_CACHE_DIR") or REPO_ROOT / ".cache")
    return cache / "spark-kafka.classpath"


def _artifact(jar: str) -> str:
    """``.../kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    return _VERSION_SUFFIX.sub("", os.path.basename(jar))


def pyspark_jars_dir() -> Path:
    """The jars that ship inside the pyspark wheel (Spark itself, Hadoop client, Scala, ...)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def connector_jars(path: Path | None = None) -> list[str]:
    """The connector's jars minus the artifacts pyspark already ships.

    Maven resolves the connector's whole runtime tree, which repeats jars of Spark's own
    distribution at other versions (scala-library, slf4j-api, snappy-java, ...). Two versions of
    one library on a class path is a lottery, so only jars whose artifact is not in pyspark's
    ``jars/`` are kept: the connector, the token provider, kafka-clients and commons-pool2.
    Raises FileNotFoundError when the classpath file or one of its jars is missing.
    """
    path = path or classpath_file()
    text = path.read_text().strip()
    jars = [j for j in text.split(os.pathsep) if j]
    shipped = {_artifact(j.name) for j in pyspark_jars_dir().glob("*.jar")}
    kept = [j for j in jars if _artifact(j) not in shipped]
    for jar in kept:
        if not os.path.isfile(jar):
            raise FileNotFoundError(f"{jar} (listed in {path}) is missing: run .ci/fetch-tools.sh")
    return kept


def build_session(
    app_name: str = "odradek-clickstream",
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    jars: list[str] | None = None,
    conf: Mapping[str, str] | None = None,
):
    """``SparkSession`` for local runs and tests (``getOrCreate``: reuses a running session).

    Small shuffle partition count: the default 200 would make every micro-batch of a stateful
    query run 200 tiny tasks, which on two cores costs seconds per batch. Everything binds to
    loopback, the UI is off, the session time zone is UTC (window bounds print the same
    everywhere). ``jars`` defaults to :func:`connector_jars` when its classpath file exists.
    """
    from pyspark.sql import SparkSession

    # Spark would otherwise look up the host's address (and warn about it) for the driver.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (only needed for Python UDFs, which the pipeline avoids) use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if jars is None:
        jars = connector_jars() if classpath_file().exists() else []
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # getOrCreate on a running session keeps its static settings; the runtime ones follow the call.
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> None:
    """``python pipelines/spark_env.py --jars``: the connector jars, comma-separated, for ``spark-submit --jars``."""
    import argparse

    ap = argparse.ArgumentParser(description="Spark's Kafka connector jars from the repo cache")
    ap.add_argument("--jars", action="store_true", help="print them comma-separated (the default)")
    ap.parse_args(argv)
    print(",".join(connector_jars()))


if __name__ == "__main__":
    main()
