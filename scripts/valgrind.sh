#!/usr/bin/env bash
# The pg_regress suites against a server running under valgrind memcheck.
# Reports valgrind errors whose stack passes through ddx.so (PostgreSQL itself
# is not built for valgrind here, so errors elsewhere are not ours to judge).
# Usage: scripts/valgrind.sh     (takes a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/deps.sh valgrind
scripts/build.sh
export DDX_PGDATA=/tmp/ddx-pg-valgrind-$(id -u) DDX_PGPORT=54331
scripts/pg.sh start
scripts/pg.sh stop
RUNAS=()
[ "$(id -u)" = 0 ] && RUNAS=(runuser -u ddx --)
LOG=$DDX_PGDATA.valgrind.log
rm -f "$LOG"
"${RUNAS[@]}" valgrind --quiet --trace-children=yes --track-origins=yes --num-callers=30 \
  --error-limit=no --log-file="$LOG.%p" \
  /usr/lib/postgresql/15/bin/postgres -D "$DDX_PGDATA" >"$DDX_PGDATA.server.log" 2>&1 &
for i in $(seq 120); do
  PGHOST=/tmp PGPORT=$DDX_PGPORT psql -X -q -d postgres -c 'select 1' >/dev/null 2>&1 && break
  sleep 1
done
eval "$(scripts/pg.sh env)"
status=0
make -s installcheck PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config || status=1
scripts/pg.sh stop
sleep 2
cat "$LOG".* > "$LOG" 2>/dev/null || true
rm -f "$LOG".*
# error blocks end with an empty "==pid== " line; count those that pass through ddx.so
ours=$(awk 'BEGIN { RS = "==[0-9]+== \n" } /ddx\.so/ { n++ } END { print n + 0 }' "$LOG")
total=$(grep -cE "^==[0-9]+== (Invalid|Conditional|Use of uninit|Syscall param|Mismatched)" "$LOG" || true)
echo "valgrind: $total errors in all, $ours with ddx.so on the stack (log: $LOG)"
[ "$ours" -eq 0 ] && [ "$status" -eq 0 ]
