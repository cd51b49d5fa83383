#!/usr/bin/env bash
# Benchmarks: forward vs gradient side by side (bench.py), a 1,000-step
# training loop (loop.py) and ddx's fixed cost per gradient (overhead.py), on a throwaway
# cluster. Usage: bench/run.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
eval "$(scripts/pg.sh env)"
/usr/bin/python3 bench/bench.py "${1:-5}"
/usr/bin/python3 bench/loop.py 1000
/usr/bin/python3 bench/overhead.py 500
