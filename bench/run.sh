#!/usr/bin/env bash
# Benchmarks: forward vs gradient, side by side in one run, on a throwaway
# cluster. Usage: bench/run.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
eval "$(scripts/pg.sh env)"
/usr/bin/python3 bench/bench.py "${1:-5}"
