#!/usr/bin/env bash
# ALTER EXTENSION ddx UPDATE from the previous release, as a user meets it
# (test_upgrade.py says what is compared): the previous release (the newest
# version in sql/upgrades/RELEASES older than the Makefile's EXTVERSION) is
# built from its commit and
# installed, a cluster of its own preloads it and training runs; then this
# tree is installed over it as a package of the newer version would be (its
# library, the newest install script and the upgrade scripts; the old
# install script removed), the server restarts, and the test goes on.
# Leaves this tree's build installed. Run as scripts/test.sh does, with
# PG_CONFIG naming the installation (as root, or through sudo).
# Ends with one line "upgrade: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SUDO=
[ "$(id -u)" != 0 ] && SUDO=sudo
fail() {
  echo "$*"
  echo "upgrade: 0 passed, 1 failed"
  exit 1
}
new=$(sed -n 's/^EXTVERSION = //p' Makefile)
releases=sql/upgrades/RELEASES
prev=$(sed -n 's/^\([0-9][0-9.]*\) .*/\1/p' "$releases" | { cat; echo "$new"; } | sort -uV | grep -B1 -x "$new" | head -1)
[ -n "$prev" ] && [ "$prev" != "$new" ] || fail "no release older than $new in $releases"
commit=$(awk -v v="$prev" '$1 == v { print $2 }' "$releases")
# The commit is in main's history; a shallow clone lacks it.
git cat-file -e "$commit^{commit}" 2>/dev/null ||
  fail "release $prev's commit $commit is not in this clone (a shallow one? git fetch --unshallow)"
if tag=$(git rev-parse -q --verify "refs/tags/v$prev^{commit}"); then
  [ "$tag" = "$commit" ] || fail "tag v$prev is $tag, but $releases says $commit"
fi
echo "upgrading from release $prev (commit ${commit:0:12}) to $new"

src=build/release-$prev-$(basename "$(dirname "$(dirname "$PG_CONFIG")")")
if [ ! -f "$src/ddx.so" ]; then
  rm -rf "$src" && mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src" || fail "git archive $commit failed"
fi
make -C "$src" -s -j2 PG_CONFIG="$PG_CONFIG" >build/upgrade-build.log 2>&1 &&
  $SUDO make -C "$src" -s install PG_CONFIG="$PG_CONFIG" >>build/upgrade-build.log 2>&1 ||
  { tail -20 build/upgrade-build.log; fail "release $prev did not build"; }

export DDX_PGBIN=${DDX_PGBIN:-$("$PG_CONFIG" --bindir)} DDX_PGDATA=/tmp/ddx-upgrade-$(id -u) DDX_PGPORT=54330
scripts/pg.sh start >/dev/null || fail "the cluster did not start"
trap 'scripts/pg.sh stop' EXIT
eval "$(scripts/pg.sh env)"
/usr/bin/python3 test/upgrade/test_upgrade.py before || fail "training with release $prev failed"

# The newer version as its package installs it.
$SUDO make -s install PG_CONFIG="$PG_CONFIG" >>build/upgrade-build.log 2>&1 || fail "make install failed"
$SUDO rm -f "$("$PG_CONFIG" --sharedir)/extension/ddx--$prev.sql"
scripts/pg.sh restart || fail "the cluster did not restart"
/usr/bin/python3 test/upgrade/test_upgrade.py after "$new"
