#!/usr/bin/env bash
# The suite on a busy machine: `.ci/run` from a fresh clone of HEAD, beside CPU hogs, some
# times in a row (issue "Groups in one place", item 5). CI may share its cores, so a test
# that passes only on a quiet machine fails here first.
#
#   scripts/busy-test.sh [RUNS=3] [HOGS=2]
#
# Each run clones into a new temporary directory (so its set-up is a fresh machine's, apart
# from pip's and npm's caches), starts HOGS busy loops, runs `CI=true bash .ci/run`, stops the
# loops, and prints one line: the run, its exit code and its time. It stops at the first
# failing run; the run's whole output stays in the log file it names.
set -uo pipefail
# A background job of a non-interactive shell starts with SIGINT ignored, and every process
# below inherits that (bash cannot undo it): tests that stop a child with SIGINT would then
# meet a child unlike CI's. Start this script from a terminal, or through a program that
# resets SIGINT first, e.g. python3 -c 'import signal,subprocess,sys;
# signal.signal(signal.SIGINT, signal.SIG_DFL); sys.exit(subprocess.call(sys.argv[1:]))'
# scripts/busy-test.sh 3 2
ignored=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status)
if (( (16#$ignored & 2) != 0 )); then
    echo "busy-test: SIGINT is ignored in this shell (a background job?); see the script's header" >&2
    exit 2
fi
runs=${1:-3}
hogs=${2:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --short HEAD)
for run in $(seq 1 "$runs"); do
    dir=$(mktemp -d /tmp/plet-busy-XXXXXX)
    log="$dir.log"
    git clone -q "$repo" "$dir/repo"
    pids=()
    for _ in $(seq 1 "$hogs"); do
        python3 -c "while True: pass" &
        pids+=($!)
    done
    start=$(date +%s)
    (cd "$dir/repo" && CI=true bash .ci/run) >"$log" 2>&1
    rc=$?
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    echo "run $run of $runs, commit $commit, $hogs hogs: exit $rc in $(($(date +%s) - start)) s ($(tail -n 1 "$log" | tr -d '='))"
    echo "  log: $log"
    [ "$rc" -eq 0 ] || exit "$rc"
    rm -rf "$dir"
done
