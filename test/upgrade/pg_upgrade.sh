#!/usr/bin/env bash
# pg_upgrade from PostgreSQL 15 to 18 keeps a run trainable, as users move
# majors: a 15 cluster trains (test_upgrade.py before), pg_upgrade copies it
# into an 18 cluster, which trains on and is compared with training on 18
# alone (test_upgrade.py after-pg_upgrade). ddx of this tree must be
# installed in the system's 15 and in 18 (scripts/test.sh has done both).
#
# Which 15: Debian 12's security update 15.20 gives every column an
# attribute option pg_attver that 18.6 (the newest 18 Debian serves) does not
# know, so pg_upgrade from 15.20 to 18.6 fails for any cluster with a table
# ("unrecognized parameter"), ddx or not. The old cluster is therefore Debian
# 12's point release of 15 (bookworm main, 15.18 today), unpacked once from its
# packages (server and headers) into $DDX_CACHE/pg15-point, and ddx built
# against its headers (15.20's headers call functions 15.18 does not have).
# Ends with one line "pg_upgrade: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
fail() {
  echo "$*"
  echo "pg_upgrade: 0 passed, 1 failed"
  exit 1
}
CACHE=${DDX_CACHE:-/var/cache/ddx}
NEW=$(eval "$(scripts/pgmajor.sh 18 env)" && echo "$DDX_PGBIN")
[ -x "$NEW/pg_upgrade" ] || fail "PostgreSQL 18 is not prepared (scripts/pgmajor.sh 18 prepare)"
ROOT=$CACHE/pg15-point
OLD=$ROOT/usr/lib/postgresql/15/bin
if [ ! -x "$OLD/postgres" ]; then
  point=$(apt-cache madison postgresql-15 | awk -F'|' '$3 ~ /bookworm\/main/ { gsub(/ /, "", $2); print $2; exit }')
  [ -n "$point" ] || fail "no point release of postgresql-15 in bookworm main"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download "postgresql-15=$point" "postgresql-server-dev-15=$point" >/dev/null 2>&1 &&
    mkdir -p "$ROOT" && for d in *.deb; do dpkg-deb -x "$d" "$ROOT" || exit 1; done) ||
    fail "could not unpack postgresql-15 $point"
  rm -rf "$tmp"
fi
src=build/pg15-point/src
mkdir -p "$src"
git ls-files -z | xargs -0 cp -p -u --parents -t "$src"
make -C "$src" -s -j2 PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config \
  includedir_server="$ROOT/usr/include/postgresql/15/server" >build/pg15-point.log 2>&1 ||
  { tail -20 build/pg15-point.log; fail "ddx did not build against 15's point release"; }
cp "$src/ddx.so" "$ROOT/usr/lib/postgresql/15/lib/" &&
  cp "$src"/ddx.control "$src"/ddx--*.sql "$src"/sql/upgrades/*.sql "$ROOT/usr/share/postgresql/15/extension/" ||
  fail "could not install ddx into 15's point release"
echo "from $("$OLD/postgres" --version) to $("$NEW/postgres" --version)"
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

# (pg_ctl start, not restart: restart would reuse the options pg_upgrade ran
# the server with, binary-upgrade mode among them)
"${RUNAS[@]}" "$NEW/pg_ctl" -D "$NEW_DATA" -l "$NEW_DATA/server.log" -w start >/dev/null ||
  fail "the upgraded 18 cluster did not start"
trap 'DDX_PGBIN=$NEW DDX_PGDATA=$NEW_DATA scripts/pg.sh stop; rm -rf "$OLD_DATA" "$NEW_DATA" "$work"' EXIT
eval "$(DDX_PGPORT=54332 scripts/pg.sh env)"
/usr/bin/python3 test/upgrade/test_upgrade.py after-pg_upgrade "$version"
