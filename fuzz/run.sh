#!/bin/sh
# Build and run one libFuzzer harness on its kept corpus (fuzz/corpus/NAME).
#   fuzz/run.sh trace|cluster|json [seconds=120]
# Needs clang (clang-14 and libclang-rt-14-dev on Debian). New inputs that
# increase coverage are added to the corpus directory; commit the useful ones.
set -eu
name=${1:?usage: fuzz/run.sh trace|cluster|json [seconds]}
secs=${2:-120}
cd "$(dirname "$0")/.."
CC=${FUZZ_CC:-$(command -v clang-14 || command -v clang)}
out=build-fuzz
mkdir -p "$out" "fuzz/corpus/$name"
srcs="src/core/*.c src/sched/*.c src/sched/*/*.c"
[ "$name" = trace ] && srcs="$srcs src/sim/*.c"
# shellcheck disable=SC2086
$CC -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -o "$out/fuzz_$name" "fuzz/fuzz_$name.c" $srcs -lglpk -lm -pthread
"$out/fuzz_$name" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$out/" \
  "fuzz/corpus/$name"
