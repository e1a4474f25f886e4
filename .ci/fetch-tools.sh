#!/usr/bin/env bash
# Install everything the compatibility tests need besides Python packages:
#   * Debian packages: kcat (a librdkafka CLI client), and a JDK + Maven if the machine lacks them;
#   * the official Apache Kafka jars (4.4.0, 4.1.1 and 3.9.1), resolved by Maven from compat-tests/pom.xml
#     into .cache/m2, with each release's runtime classpath written to .cache/kafka-<version>.classpath;
#   * Spark's Kafka connector (spark-sql-kafka-0-10) from compat-tests/spark-pom.xml, its classpath
#     written to .cache/spark-kafka.classpath;
#   * MirrorMaker 2 (connect-mirror 4.3.1 repackaged for the 4.4.0 jars) from compat-tests/mirror-pom.xml,
#     its classpath written to .cache/connect-mirror.classpath;
#   * Go (golang-go if missing) and the Go client programs of compat-tests/go/ (franz-go, from the
#     Go module proxy), built into .cache/go/;
#   * the Java client driver (compat-tests/java), compiled into .cache/java-driver/, and JVM
#     class-data-sharing archives for Kafka's tools in .cache/cds/.
# Idempotent and quick when everything is cached: each step checks before it downloads.
# Called by .ci/run and by the README's test command; safe to run by hand.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
CACHE=${ODRADEK_CACHE_DIR:-$ROOT/.cache}
M2=$CACHE/m2
KAFKA_VERSIONS=(4.4.0 4.1.1 3.9.1)
mkdir -p "$CACHE"

log() { printf '[fetch-tools] %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------------------------
# command -> package; only what is missing is installed, so a warm machine never runs apt.
declare -A NEED=([kcat]=kcat [java]=openjdk-17-jre-headless [javac]=openjdk-17-jdk-headless [mvn]=maven)
missing=()
for cmd in kcat java javac mvn; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
if ((${#missing[@]})); then
  SUDO=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { log "need root or sudo to install: ${missing[*]}"; exit 1; }
    SUDO=(sudo -n)
  fi
  log "apt-get install ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Kafka jars via Maven --------------------------------------------------------------------
# A classpath file is reused while its stamp (hash of the pom + version) matches and every jar it
# names still exists; otherwise Maven resolves again (offline work is then near-instant anyway).
POM=compat-tests/pom.xml
pom_hash=$(sha256sum "$POM" | cut -c1-16)
profile_for() { echo "kafka-${1%.*}"; }   # 4.1.1 -> kafka-4.1

classpath_ok() {
  local cp=$1 stamp=$2 want=$3
  [[ -s $cp && -f $stamp && $(<"$stamp") == "$want" ]] || return 1
  local jar
  IFS=: read -r -a jars <"$cp"
  for jar in "${jars[@]}"; do [[ -f $jar ]] || return 1; done
}

for v in "${KAFKA_VERSIONS[@]}"; do
  cp_file=$CACHE/kafka-$v.classpath
  stamp=$CACHE/kafka-$v.stamp
  want="$pom_hash $v"
  if classpath_ok "$cp_file" "$stamp" "$want"; then
    continue
  fi
  log "resolving Apache Kafka $v jars with Maven (first run downloads ~130 MB)"
  tmp=$cp_file.tmp.$$
  ok=0
  # Two tries: a dropped connection to the registry should not fail a whole CI run.
  for attempt in 1 2; do
    if mvn -B -q -f "$POM" -P "$(profile_for "$v")" -Dmaven.repo.local="$M2" \
        dependency:build-classpath -Dmdep.outputFile="$tmp" >"$CACHE/mvn-$v.log" 2>&1; then
      ok=1
      break
    fi
    log "maven attempt $attempt for Kafka $v failed; see $CACHE/mvn-$v.log"
  done
  if ((!ok)); then
    tail -n 40 "$CACHE/mvn-$v.log" >&2
    exit 1
  fi
  mv "$tmp" "$cp_file"
  echo "$want" >"$stamp"
done

# --- Spark's Kafka connector (issue #10) --------------------------------------------------------
# spark-sql-kafka-0-10 and its runtime jars for the PySpark pipeline tests, from their own pom so the
# broker classpaths above stay Spark-free. Same reuse rule (stamp = pom hash + every jar present).
# The tests pass these jars to Spark with spark.jars: nothing is fetched while tests run.
SPARK_POM=compat-tests/spark-pom.xml
if [[ -f $SPARK_POM ]]; then
  spark_cp=$CACHE/spark-kafka.classpath
  spark_stamp=$CACHE/spark-kafka.stamp
  spark_want="$(sha256sum "$SPARK_POM" | cut -c1-16) spark-kafka"
  if ! classpath_ok "$spark_cp" "$spark_stamp" "$spark_want"; then
    log "resolving Spark's Kafka connector jars with Maven (first run downloads ~70 MB)"
    spark_tmp=$spark_cp.tmp.$$
    spark_ok=0
    for attempt in 1 2; do
      if mvn -B -q -f "$SPARK_POM" -Dmaven.repo.local="$M2" \
          dependency:build-classpath -Dmdep.outputFile="$spark_tmp" >"$CACHE/mvn-spark.log" 2>&1; then
        spark_ok=1
        break
      fi
      log "maven attempt $attempt for the Spark connector failed; see $CACHE/mvn-spark.log"
    done
    if ((!spark_ok)); then
      tail -n 40 "$CACHE/mvn-spark.log" >&2
      exit 1
    fi
    mv "$spark_tmp" "$spark_cp"
    echo "$spark_want" >"$spark_stamp"
  fi
fi

# --- MirrorMaker 2 (issue #27) ------------------------------------------------------------------
# connect-mirror 4.3.1 (4.4.0 is not on the reachable Maven Central) repackaged by the Shade plugin
# to run on Kafka 4.4.0's jars: compat-tests/mirror-pom.xml says why and what is rewritten. The
# classpath file is that jar followed by Kafka 4.4.0's classpath (resolved above). Same reuse rule:
# the stamp holds the pom's hash and the 4.4.0 stamp, and every jar must still exist.
MIRROR_POM=compat-tests/mirror-pom.xml
if [[ -f $MIRROR_POM ]]; then
  mirror_cp=$CACHE/connect-mirror.classpath
  mirror_stamp=$CACHE/connect-mirror.stamp
  mirror_want="$(sha256sum "$MIRROR_POM" | cut -c1-16) connect-mirror on $(<"$CACHE/kafka-4.4.0.stamp")"
  if ! classpath_ok "$mirror_cp" "$mirror_stamp" "$mirror_want"; then
    log "building MirrorMaker 2 (connect-mirror 4.3.1 for the Kafka 4.4.0 jars) with Maven"
    mirror_jar=$CACHE/connect-mirror/connect-mirror-4.3.1-on-kafka-4.4.jar
    mirror_ok=0
    for attempt in 1 2; do
      if mvn -B -q -f "$MIRROR_POM" -Dmaven.repo.local="$M2" -Dmirror.build.dir="$CACHE/connect-mirror/build" \
          -Dmirror.jar="$mirror_jar" package >"$CACHE/mvn-mirror.log" 2>&1; then
        mirror_ok=1
        break
      fi
      log "maven attempt $attempt for connect-mirror failed; see $CACHE/mvn-mirror.log"
    done
    if ((!mirror_ok)) || [[ ! -f $mirror_jar ]]; then
      tail -n 40 "$CACHE/mvn-mirror.log" >&2
      exit 1
    fi
    echo "$mirror_jar:$(<"$CACHE/kafka-4.4.0.classpath")" >"$mirror_cp.tmp.$$"
    mv "$mirror_cp.tmp.$$" "$mirror_cp"
    echo "$mirror_want" >"$mirror_stamp"
  fi
fi

# --- Go client programs (franz-go, issue #22) -------------------------------------------------
# compat-tests/go/<name> is built into $CACHE/go/<name>; rebuilt when its sources change. Modules
# come from the Go module proxy. A go of 1.21 or later switches itself to the toolchain go.mod
# asks for (GOTOOLCHAIN=auto, also a module on the proxy); an older one (Debian 12's golang-go is
# 1.19) cannot, so that toolchain module is downloaded with it and used directly.
if compgen -G "compat-tests/go/*/go.mod" >/dev/null; then
  if ! command -v go >/dev/null 2>&1; then
    SUDO=()
    if [[ $(id -u) != 0 ]]; then
      command -v sudo >/dev/null 2>&1 || { log "need root or sudo to install: golang-go"; exit 1; }
      SUDO=(sudo -n)
    fi
    log "apt-get install golang-go"
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  fi
  GO=go
  go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  for mod in compat-tests/go/*/go.mod; do
    dir=${mod%/go.mod}
    name=${dir##*/}
    bin=$CACHE/go/$name
    want=$(cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go | sha256sum | cut -c1-16)
    [[ -x $bin && -f $bin.stamp && $(<"$bin.stamp") == "$want" ]] && continue
    if ((go_minor < 21)); then
      need=$(awk '$1 == "toolchain" {t = $2} $1 == "go" {g = "go" $2} END {print (t ? t : g)}' "$mod")
      toolchain=golang.org/toolchain@v0.0.1-$need.$(go env GOOS)-$(go env GOARCH)
      log "go $(go env GOVERSION) is too old for $dir: fetching $toolchain"
      tdir=$(cd "$CACHE" && GO111MODULE=on go mod download -json "$toolchain" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      # module zips carry no file modes: make the tools executable, as go's own toolchain switch does
      chmod a+x "$tdir"/bin/* "$tdir"/pkg/tool/*/*
      GO=$tdir/bin/go
    fi
    log "building $dir with franz-go into $bin"
    mkdir -p "$CACHE/go"
    (cd "$dir" && GOTOOLCHAIN=auto GOFLAGS=-mod=readonly "$GO" build -trimpath -buildvcs=false -o "$bin" .)
    echo "$want" >"$bin.stamp"
  done
fi

# --- Java client driver and class-data archives -----------------------------------------------
# Compiles compat-tests/java into a jar per Kafka version and records the JVM class-data archives
# that make DumpLogSegments / StorageTool start faster (both skipped when already there).
python3 compat-tests/kafka_oracle.py warm-up >&2

log "ok: kcat $(command -v kcat), java $(java -version 2>&1 | head -n1), classpaths in $CACHE"
