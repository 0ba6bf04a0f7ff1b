#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz/): builds them with clang (-fsanitize=fuzzer,address,undefined)
# into BUILD_DIR, replays every input that once crashed (tests/fuzz/regressions/), then fuzzes
# each target for SECONDS from its checked-in corpus (tests/fuzz/corpus/<target>/, read only;
# new finds go to BUILD_DIR/corpus-<target>, a crash to BUILD_DIR/crash-*). Exit 1 on a crash.
#
# Usage: fuzz.sh [SECONDS=60] [BUILD_DIR=build/fuzz]     (`make fuzz`; `make test` runs 5 s each)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out="${2:-build/fuzz}"
targets=(log_codec_fuzz queue_codec_fuzz request_check_fuzz)

cmake -S tests/fuzz -B "$out" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$out" >/dev/null
for t in "${targets[@]}"; do
  prefix="${t%_fuzz}_"
  for input in tests/fuzz/regressions/"$prefix"*; do
    [ -e "$input" ] || continue
    "$out/$t" "$input" >/dev/null 2>&1 || { echo "FAIL: $t crashes again on $input" >&2; exit 1; }
  done
  mkdir -p "$out/corpus-$t"
  if ! "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" \
      "$out/corpus-$t" "tests/fuzz/corpus/$t" > "$out/$t.log" 2>&1; then
    tail -40 "$out/$t.log" >&2
    echo "FAIL: $t found a crash (input in $out/crash-*; keep it in tests/fuzz/regressions/)" >&2
    exit 1
  fi
  echo "$t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$') runs in ${seconds}s, no crash; regressions replayed"
done
