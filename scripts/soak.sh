#!/usr/bin/env bash
# The long soak: scripts/soak.sh [queries] [seed]  (default 5000 queries, seed 1)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
eval "$(scripts/pg.sh env)"
PGDATABASE=postgres /usr/bin/python3 test/soak/soak.py --queries "${1:-5000}" --seed "${2:-1}"
