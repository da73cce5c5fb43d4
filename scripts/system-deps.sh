#!/usr/bin/env bash
# Make sure the system programs that Partitionlet's run or tests need are present,
# installing the missing ones from Debian's packages. Called by the Makefile:
#
#   scripts/system-deps.sh java                   # make run: PySpark needs Java 17+
#   scripts/system-deps.sh java chromium redis kcat   # make test: + browser e2e, benchmark peer,
#                                                     #   a Kafka client for the wire tests
#
# Idempotent and quick when everything is there: it only looks for files, and runs
# `apt-get update` (once) and `apt-get install` only for what is missing.
set -euo pipefail

say() { printf 'setup: %s\n' "$*" >&2; }
die() {
    say "ERROR: $*"
    exit 1
}

missing=()     # Debian packages to install
wants_java=0

need_java() {
    wants_java=1
    if [[ -n "${JAVA_HOME:-}" && ! -x "${JAVA_HOME}/bin/java" ]]; then
        say "warning: JAVA_HOME=${JAVA_HOME} has no bin/java; PySpark will fail until it is fixed or unset"
    fi
    if ! command -v java >/dev/null 2>&1; then
        say "Java not found: PySpark (Spark replays, the 'partitionlet' data source) needs Java 17 or later."
        say "Installing Debian's openjdk-17-jre-headless."
        missing+=(openjdk-17-jre-headless)
    fi
}

check_java_version() {
    local line major
    line="$(java -version 2>&1 | head -n 1)"
    # `openjdk version "17.0.15" 2025-04-15` or, for old releases, `java version "1.8.0_392"`
    major="$(sed -E 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/' <<<"${line}")"
    if [[ "${major%% *}" == "1" ]]; then major="${major#* }"; else major="${major%% *}"; fi
    if ! [[ "${major}" =~ ^[0-9]+$ ]]; then
        say "warning: could not read Java's version from: ${line}"
        return 0
    fi
    if ((major < 17)); then
        die "Java ${major} found at $(command -v java), but PySpark 4 needs Java 17 or later.
       Install one (on Debian: apt-get install openjdk-17-jre-headless) and put it first on
       PATH, or set JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64"
    fi
    say "Java ${major} ok ($(command -v java))"
}

need_chromium() {
    # Debian's own build: the end-to-end tests drive it with Playwright through
    # executable_path, since downloading Playwright's browsers is not possible here.
    if [[ ! -x /usr/bin/chromium ]]; then
        say "Chromium not found at /usr/bin/chromium (browser tests need it): installing Debian's chromium."
        missing+=(chromium fonts-liberation)
    fi
}

need_redis() {
    # Redis Streams is the peer of the benchmark; its tests start their own redis-server
    # on a loopback port.
    if ! command -v redis-server >/dev/null 2>&1; then
        say "redis-server not found (benchmark tests need it): installing Debian's redis-server."
        missing+=(redis-server)
    fi
}

need_kcat() {
    # Debian's kcat (librdkafka's command-line client) is one of the real Kafka clients the
    # wire listener's tests run against (tests/engine/wire).
    if ! command -v kcat >/dev/null 2>&1; then
        say "kcat not found (the Kafka wire tests need it): installing Debian's kcat."
        missing+=(kcat)
    fi
}

for what in "$@"; do
    case "${what}" in
        java) need_java ;;
        chromium) need_chromium ;;
        redis) need_redis ;;
        kcat) need_kcat ;;
        *) die "unknown requirement '${what}' (known: java chromium redis kcat)" ;;
    esac
done

if ((${#missing[@]} > 0)); then
    if ! command -v apt-get >/dev/null 2>&1; then
        die "apt-get not found; please install these yourself: ${missing[*]}"
    fi
    sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 ||
            die "not root and no sudo; please run: apt-get update && apt-get install -y ${missing[*]}"
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    # wait for another apt/dpkg run to release its lock instead of failing at once
    apt_opts=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
    say "apt-get update"
    "${sudo[@]}" apt-get "${apt_opts[@]}" update -qq
    say "apt-get install ${missing[*]}"
    "${sudo[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi

if ((wants_java)); then
    command -v java >/dev/null 2>&1 || die "java is still missing after the install"
    check_java_version
fi
exit 0
