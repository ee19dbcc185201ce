#!/usr/bin/env bash
# Snapshot build and retry-load against the build before snapshot parts
# (3ad07c9: whole snapshot blobs, serde_jcs everywhere), in the same session.
# Both `context` benches run their 60 turns with a 64 KiB memory.md; the
# runs alternate, and each prints its medians. Prints every pair and the
# median of each column with the ratios after/before.
#
#   bash crates/stream-context/benches/before_parts.sh [RUNS]
#
# The old build gets a worktree and a target directory of its own: cargo
# must never share a target directory between two source trees.
set -euo pipefail
runs=${1:-8}
before=3ad07c9
root=$(git rev-parse --show-toplevel)
work=${THESTREAM_BEFORE_DIR:-${TMPDIR:-/tmp}/thestream-before-parts}
mkdir -p "$work"
if [ ! -e "$work/src/.git" ]; then
    git -C "$root" worktree add --force --detach "$work/src" "$before" >/dev/null
fi
bench_binary() { # DIR TARGET
    (cd "$1" && CARGO_TARGET_DIR="$2" cargo bench -p stream-context --bench context --no-run \
        --message-format=json 2>/dev/null) |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "context" and m.get("executable"):
        print(m["executable"])'
}
old=$(bench_binary "$work/src" "$work/target")
new=$(bench_binary "$root" "${CARGO_TARGET_DIR:-$root/target}")
# "snapshot build  median  X ms" and "snapshot retry-load  median  X ms".
medians() { awk '/^  snapshot (build|retry-load) +median/ { printf "%s ", $4 }'; }
echo "run  before: build retry-load   after: build retry-load"
for i in $(seq 1 "$runs"); do
    printf '%3d  %s  %s\n' "$i" "$("$old" 3 | medians)" "$("$new" 3 | medians)"
done | tee "$work/pairs"
python3 - "$work/pairs" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1])]
med = [statistics.median(c) for c in zip(*rows)]
print(f"median  before: build {med[0]:.3f} ms, retry-load {med[1]:.3f} ms")
print(f"        after:  build {med[2]:.3f} ms, retry-load {med[3]:.3f} ms")
print(f"        after/before: build {med[2] / med[0]:.2f}, retry-load {med[3] / med[1]:.2f}")
EOF
