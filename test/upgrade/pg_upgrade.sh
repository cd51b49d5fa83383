#!/usr/bin/env bash
# pg_upgrade from PostgreSQL 15 to 18 keeps a run trainable, as users move
# majors: a 15 cluster trains (test_upgrade.py before), pg_upgrade copies it
# into an 18 cluster, which trains on and is compared with training on 18
# alone (test_upgrade.py after-pg_upgrade). ddx of this tree must be
# installed in both (scripts/test.sh has done it; 18 from scripts/pgmajor.sh).
# Ends with one line "pg_upgrade: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
fail() {
  echo "$*"
  echo "pg_upgrade: 0 passed, 1 failed"
  exit 1
}
OLD=/usr/lib/postgresql/15/bin
NEW=$(eval "$(scripts/pgmajor.sh 18 env)" && echo "$DDX_PGBIN")
[ -x "$NEW/pg_upgrade" ] || fail "PostgreSQL 18 is not prepared (scripts/pgmajor.sh 18 prepare)"
version=$(sed -n 's/^EXTVERSION = //p' Makefile)
OLD_DATA=/tmp/ddx-pgu15-$(id -u)
NEW_DATA=/tmp/ddx-pgu18-$(id -u)
RUNAS=()
[ "$(id -u)" = 0 ] && RUNAS=(runuser -u ddx --)

# The 15 cluster, trained.
DDX_PGBIN=$OLD DDX_PGDATA=$OLD_DATA DDX_PGPORT=54331 scripts/pg.sh start >/dev/null || fail "15 did not start"
(eval "$(DDX_PGPORT=54331 scripts/pg.sh env)" && /usr/bin/python3 test/upgrade/test_upgrade.py before) ||
  fail "training on 15 failed"
DDX_PGBIN=$OLD DDX_PGDATA=$OLD_DATA scripts/pg.sh stop

# An empty 18 cluster of the same settings (18's initdb would turn on data
# checksums, which 15's cluster does not have), then pg_upgrade.
DDX_PGBIN=$NEW DDX_PGDATA=$NEW_DATA DDX_PGPORT=54332 DDX_INITDB_OPTS=--no-data-checksums scripts/pg.sh start >/dev/null ||
  fail "18 did not start"
DDX_PGBIN=$NEW DDX_PGDATA=$NEW_DATA scripts/pg.sh stop
work=/tmp/ddx-pgu-work-$(id -u)
rm -rf "$work" && mkdir -p "$work"
[ ${#RUNAS[@]} -gt 0 ] && chown ddx "$work"
if ! (cd "$work" && "${RUNAS[@]}" "$NEW/pg_upgrade" -b "$OLD" -B "$NEW" -d "$OLD_DATA" -D "$NEW_DATA" \
      -p 54331 -P 54332 -s /tmp >"$work/pg_upgrade.log" 2>&1); then
  tail -30 "$work/pg_upgrade.log"
  fail "pg_upgrade failed"
fi
grep -E "^Upgrade Complete" "$work/pg_upgrade.log"

DDX_PGBIN=$NEW DDX_PGDATA=$NEW_DATA scripts/pg.sh restart || fail "the upgraded 18 cluster did not start"
trap 'DDX_PGBIN=$NEW DDX_PGDATA=$NEW_DATA scripts/pg.sh stop; rm -rf "$OLD_DATA" "$NEW_DATA" "$work"' EXIT
eval "$(DDX_PGPORT=54332 scripts/pg.sh env)"
/usr/bin/python3 test/upgrade/test_upgrade.py after-pg_upgrade "$version"
