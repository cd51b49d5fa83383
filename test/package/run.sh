#!/usr/bin/env bash
# The Debian package, as a user of Debian 12 would build and install it:
# dpkg-buildpackage over a copy of this tree (debian/: pg_buildext, one
# postgresql-NN-ddx per major of debian/pgversions installed here; its build
# runs the pg_regress suites in a cluster of pg_virtualenv), then the
# package installed into the system's PostgreSQL 15, a cluster that preloads
# it, CREATE EXTENSION ddx and a gradient against its closed form. The
# package is removed afterwards and this tree's build installed again (as
# scripts/build.sh left it). As root, or through sudo.
# Ends with one line "package: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SUDO=
[ "$(id -u)" != 0 ] && SUDO=sudo
passed=0
failed=0
check() {
  if [ "$1" = 0 ]; then
    passed=$((passed + 1))
    echo "ok   $2"
  else
    failed=$((failed + 1))
    echo "FAIL $2"
  fi
}
finish() {
  echo "package: $passed passed, $failed failed"
  exit 0
}

scripts/deps.sh debhelper postgresql-all dpkg-dev >/dev/null

version=$(dpkg-parsechangelog -S Version)
upstream=${version%-*}
[ "$upstream" = "$(sed -n 's/^EXTVERSION = //p' Makefile)" ]
check $? "debian/changelog's version $version is the Makefile's EXTVERSION"
/usr/bin/python3 -c "import json, sys; m = json.load(open('META.json'))
sys.exit(not (m['version'] == m['provides']['ddx']['version'] == '$upstream.0' and m['provides']['ddx']['file'] == 'ddx--$upstream.sql'))"
check $? "META.json (PGXN) describes version $upstream"

dir=build/deb
rm -rf "$dir" && mkdir -p "$dir/ddx"
git ls-files -z | xargs -0 cp --parents -t "$dir/ddx"
(cd "$dir/ddx" && DEB_BUILD_OPTIONS=parallel=2 dpkg-buildpackage -us -uc -b) >"$dir/build.log" 2>&1
rc=$?
grep -E "tests passed|tests failed" "$dir/build.log"
check $rc "dpkg-buildpackage -us -uc -b (its build runs the pg_regress suites)"
[ $rc = 0 ] || { grep -E "error|FAILED" "$dir/build.log" | tail -20; finish; }

deb=$(ls "$dir"/postgresql-15-ddx_"$version"_*.deb)
$SUDO dpkg -i "$deb" >"$dir/install.log" 2>&1
check $? "dpkg -i $(basename "$deb")"
ext=$(/usr/lib/postgresql/15/bin/pg_config --sharedir)/extension
lib=$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)
files=$(dpkg -L postgresql-15-ddx)
for f in "$lib/ddx.so" "$ext/ddx.control" "$ext/ddx--$upstream.sql" $(ls sql/upgrades/*.sql | sed "s|^sql/upgrades|$ext|"); do
  echo "$files" | grep -qx "$f"
  check $? "the package installs $f"
done

export DDX_PGDATA=/tmp/ddx-pkg-$(id -u) DDX_PGPORT=54334
unset DDX_PGBIN
if scripts/pg.sh start >/dev/null; then
  eval "$(scripts/pg.sh env)"
  # d/dw Σ (w x - y)² = Σ 2 (w x - y) x, per row of w
  out=$(psql -X -q -At -d postgres 2>&1 <<'SQL'
CREATE EXTENSION ddx;
CREATE TABLE pw (k int PRIMARY KEY, val float8);
INSERT INTO pw VALUES (1, 0.5), (2, -1.25);
CREATE TABLE px (k int, i int, x float8, y float8);
INSERT INTO px SELECT k, i, sin(k + i), cos(i) FROM generate_series(1, 2) k, generate_series(1, 5) i;
SELECT (SELECT extversion FROM pg_extension WHERE extname = 'ddx') = (ddx_version()).library;
WITH loss AS (SELECT sum(power(pw.val * px.x - px.y, 2)) FROM px JOIN pw ON pw.k = px.k)
SELECT bool_and(abs(g.g - c.g) < 1e-12 * greatest(1, abs(c.g)))
  FROM (SELECT k, grad('loss', val) AS g FROM pw) g
  JOIN (SELECT px.k, sum(2 * (pw.val * px.x - px.y) * px.x) AS g FROM px JOIN pw ON pw.k = px.k GROUP BY px.k) c
    ON c.k = g.k;
SQL
  )
  [ "$(echo "$out" | tr '\n' ' ')" = "t t " ]
  check $? "CREATE EXTENSION ddx from the package; grad equals its closed form ($(echo "$out" | tr '\n' ' '))"
  scripts/pg.sh stop
else
  check 1 "a cluster preloading the packaged ddx started"
fi

$SUDO dpkg --purge postgresql-15-ddx >/dev/null 2>&1
check $? "dpkg --purge postgresql-15-ddx"
$SUDO make -s install PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config >/dev/null
finish
