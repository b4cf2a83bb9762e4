#!/usr/bin/env bash
# Runs every tenure benchmark (BENCHMARKS.md lists each command alone) and, unless ETCD=0,
# etcd's own lessor benchmarks (bench/etcd-lessor-bench.sh) in the same session.
# Results: one line per figure in $BENCH_OUT/results.txt (default target/bench/).
#
#   bash bench/run.sh              # everything (about 3 minutes on 2 cores)
#   ETCD=0 bash bench/run.sh       # without etcd's benchmarks
#   QUICK=1 bash bench/run.sh      # smaller populations, for checking the harness
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=${BENCH_OUT:-$TARGET/bench}
ETCD_SCRIPT=${ETCD_SCRIPT:-bench/etcd-lessor-bench.sh}
mkdir -p "$OUT"
RESULTS=$OUT/results.txt
: >"$RESULTS"
log() { echo "$*" | tee -a "$RESULTS"; }

log "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- core 2>/dev/null || echo ' (core/ modified)')"
log "# nproc=$(nproc) cpu=\"$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)\" kernel=$(uname -r) load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""

$CARGO build -q --profile profiling -p tenure-bench --no-default-features
BIN=$TARGET/profiling
N=100000 M=1000000 SECS=3
if [[ ${QUICK:-0} == 1 ]]; then N=10000 M=100000 SECS=1; fi

# 1. etcd's workloads (criterion; medians in ns per lease, per 50 leases for find_expired).
$CARGO bench -q -p tenure --bench lessor 2>&1 | tee "$OUT/criterion.txt" | grep -E 'time:|^[a-z_]+/[0-9]+$' || true
python3 bench/criterion_medians.py "$TARGET/criterion" | sed 's/^/criterion /' | tee -a "$RESULTS"

# 2. Beyond etcd.
for m in memory buffered immediate; do "$BIN/lateness" --mode $m --leases $N | tee -a "$RESULTS"; done
# The same under SCHED_FIFO (root only): separates the engine's lateness from CPU contention
# with other processes on a shared machine. Its threads block, they never spin.
if chrt -f 10 true 2>/dev/null; then
  for m in memory buffered; do
    chrt -f 10 "$BIN/lateness" --mode $m --leases $N | sed 's/^lateness /lateness sched=fifo /' | tee -a "$RESULTS"
  done
fi
for m in memory buffered immediate; do "$BIN/mass_expiry" --mode $m --leases $N | tee -a "$RESULTS"; done
"$BIN/durable" --threads 1,8,64 --secs $SECS | tee -a "$RESULTS"
for k in 0 1; do "$BIN/memory" --leases $M --keys $k | tee -a "$RESULTS"; done
"$BIN/recovery" --leases $M --runs 3 | tee -a "$RESULTS"
"$BIN/snapshot" --keys $M --threads 8 | tee -a "$RESULTS"
"$BIN/wait_pool" | tee -a "$RESULTS"

# 3. etcd's lessor benchmarks, same session (installs Go and etcd's source from Debian once).
if [[ ${ETCD:-1} == 1 && -f $ETCD_SCRIPT ]]; then
  bash "$ETCD_SCRIPT" | sed 's/^/etcd /' | tee -a "$RESULTS"
fi
log "# done $(date -u +%FT%TZ) load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
