#!/usr/bin/env bash
# Citus for ddx's tests: a coordinator and two workers on this machine.
#   scripts/citus.sh build | start | stop | env | psql [args...] | source
#   scripts/citus.sh node-stop N | node-start N   (N = 1, 2: a worker; for fault tests)
#   scripts/citus.sh source   (prints the path of the vendored source it builds from)
#
# build: Debian 12 packages no Citus and no other package source can be
# reached, so Citus 13.2.2 is built from the release source vendored beside
# the repository (../shared/vendor/citus-13.2.2.tar.xz, or $DDX_VENDOR; see
# its README), once: skipped when citus.so is installed. Exit status 3 when
# the source is not there (the tests report Citus as not available).
# start: three throwaway clusters (ports 54340 coordinator, 54341, 54342, or
# DDX_CITUS_PORT and the two after it),
# shared_preload_libraries = 'citus,ddx' (Citus first), TCP on localhost
# with trust (the nodes connect to each other), a database `citus` with both
# extensions on every node, the workers added to the coordinator. As root,
# the servers run as the unprivileged user `ddx`, as scripts/pg.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
# (another major: PG_CONFIG and DDX_PGBIN, as scripts/pgmajor.sh prints them;
# for 17 the script runs inside its root: scripts/pgmajor.sh 17 run ...)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PGBIN=${DDX_PGBIN:-/usr/lib/postgresql/15/bin}
BASE=${DDX_CITUS_DATA:-/tmp/ddx-citus-$(id -u)}
P0=${DDX_CITUS_PORT:-54340}  # the coordinator's port; the workers', the next two
PORTS=("$P0" $((P0 + 1)) $((P0 + 2)))
SOCK=/tmp
RUNAS=()
DBUSER=$(id -un)
if [ "$(id -u)" = 0 ]; then
  id ddx >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ddx
  RUNAS=(runuser -u ddx --)
  DBUSER=ddx
fi
TARBALL=citus-13.2.2.tar.xz
SHA256=6ffb1af003e08550f20e34a1544d77d82cf92ed896293d44676e2547d1d3372f

find_source() {
  for d in "${DDX_VENDOR:-}" "$PWD/../shared/vendor" /work/shared/vendor; do
    [ -n "$d" ] && [ -f "$d/$TARBALL" ] && { echo "$d/$TARBALL"; return 0; }
  done
  return 1
}

build() {
  [ -f "$($PG_CONFIG --pkglibdir)/citus.so" ] && return 0
  local src
  src=$(find_source) || { echo "Citus source $TARBALL not found (set DDX_VENDOR to its directory)" >&2; exit 3; }
  echo "$SHA256  $src" | sha256sum -c --quiet - || { echo "checksum mismatch: $src" >&2; exit 1; }
  scripts/deps.sh libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev libicu-dev make gcc xz-utils
  local dir
  dir=$(mktemp -d /tmp/ddx-citus-build.XXXXXX)
  tar -xJf "$src" -C "$dir"
  local top
  top=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -1)
  # PostgreSQL 15.20's commands/dbcommands.h declares have_createdb_privilege(),
  # which Citus's compat header defines as static inline for servers before 16.
  # Citus's copy is renamed (the README's one-line fix), before the
  # "static inline bool" line that opens its definition. (On 16 and later
  # that definition is not compiled.)
  sed -i '/^have_createdb_privilege(void)$/i #define have_createdb_privilege citus_have_createdb_privilege' \
    "$top/src/include/pg_version_compat.h"
  grep -q '^#define have_createdb_privilege citus_' "$top/src/include/pg_version_compat.h" ||
    { echo "the compat fix did not apply" >&2; exit 1; }
  echo "building Citus 13.2.2 (about a minute) in $top"
  (cd "$top" && ./configure PG_CONFIG=$PG_CONFIG >"$dir/configure.log" 2>&1 &&
    make -j2 with_llvm=no >"$dir/make.log" 2>&1 && make install with_llvm=no >"$dir/install.log" 2>&1) ||
    { tail -n 30 "$dir"/*.log; exit 1; }
  rm -rf "$dir"
}

start() {
  build
  stop
  for i in 0 1 2; do
    local d=$BASE/$i
    rm -rf "$d"
    mkdir -p "$d"
    [ ${#RUNAS[@]} -gt 0 ] && chown -R ddx "$BASE"
    "${RUNAS[@]}" "$PGBIN/initdb" -D "$d" --auth=trust --no-sync -E UTF8 --locale=C >"$d.initdb.log" 2>&1 ||
      { cat "$d.initdb.log"; exit 1; }
    cat >>"$d/postgresql.conf" <<CONF
port = ${PORTS[$i]}
listen_addresses = 'localhost'
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'citus,ddx'
fsync = off
max_connections = 60
max_prepared_transactions = 60
# (keep the connections to the workers between transactions: with Citus's
# default of one per worker, a statement of 32 tasks opened new ones as it
# ran, and the same forward's time varied fivefold by how many it opened;
# with 16 kept, hardly at all: bench/RESULTS.md)
citus.max_cached_conns_per_worker = 16
# (a connection that reaches a worker while it shuts down gets a "dead-end"
# child that waits for the client's startup packet; PostgreSQL 15 neither
# signals nor waits less for it than authentication_timeout, 60 s by
# default, so an immediate stop of a worker that a training step was
# connecting to took exactly 60 s, as long as pg_ctl waits, and failed now
# and then: "pg_ctl: server does not shut down". Local trust auth needs
# no more than this.)
authentication_timeout = 5s
CONF
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$d" -l "$d/server.log" -w start >/dev/null
    PGHOST=$SOCK PGPORT=${PORTS[$i]} PGUSER=$DBUSER psql -X -q -d postgres -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE citus" >/dev/null
    PGHOST=$SOCK PGPORT=${PORTS[$i]} PGUSER=$DBUSER psql -X -q -d citus -v ON_ERROR_STOP=1 \
      -c "CREATE EXTENSION citus" -c "CREATE EXTENSION ddx" >/dev/null
  done
  PGHOST=$SOCK PGPORT=${PORTS[0]} PGUSER=$DBUSER psql -X -q -d citus -v ON_ERROR_STOP=1 \
    -c "SELECT citus_set_coordinator_host('localhost', ${PORTS[0]})" \
    -c "SELECT citus_add_node('localhost', ${PORTS[1]})" \
    -c "SELECT citus_add_node('localhost', ${PORTS[2]})" >/dev/null
  echo "Citus running: coordinator PGHOST=$SOCK PGPORT=${PORTS[0]} PGUSER=$DBUSER dbname=citus, workers ${PORTS[1]} ${PORTS[2]}"
}

stop() {
  for i in 0 1 2; do
    [ -d "$BASE/$i" ] && { "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$BASE/$i" -m immediate -w stop >/dev/null 2>&1 || true; }
  done
  return 0
}

# A worker stopped as by a crash (-m immediate), and started again. Each
# bounded: where pg_ctl gives up (30 s), what the server was doing is shown,
# its processes are killed and the exit status is 1.
node() {
  local i=${2:-} d pid
  [[ "$i" =~ ^[12]$ ]] || { echo "usage: $0 $1 1|2" >&2; exit 2; }
  d=$BASE/$i
  if [ "$1" = node-stop ]; then
    pid=$(head -1 "$d/postmaster.pid" 2>/dev/null || true)
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$d" -m immediate -w -t 30 stop >"$d.stop.log" 2>&1 && return 0
    echo "worker $i did not stop within 30 s:" >&2
    cat "$d.stop.log" >&2
    [ -n "$pid" ] && ps -o pid,stat,etime,wchan:20,cmd --ppid "$pid" -p "$pid" >&2 || true
    tail -15 "$d/server.log" >&2
    if [ -n "$pid" ]; then
      pkill -KILL -P "$pid" 2>/dev/null || true
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    return 1
  else
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$d" -l "$d/server.log" -w -t 60 start >"$d.start.log" 2>&1 && return 0
    echo "worker $i did not start:" >&2
    cat "$d.start.log" >&2
    tail -15 "$d/server.log" >&2
    return 1
  fi
}

case "${1:-}" in
  build) build ;;
  source) find_source ;;
  node-stop | node-start) node "$@" ;;
  start) start ;;
  stop) stop ;;
  env) echo "export PGHOST=$SOCK PGPORT=${PORTS[0]} PGUSER=$DBUSER PGDATABASE=citus" ;;
  psql)
    shift
    PGHOST=$SOCK PGPORT=${PORTS[0]} PGUSER=$DBUSER PGDATABASE=citus exec psql "$@"
    ;;
  *)
    echo "usage: $0 build|start|stop|env|psql [args]|node-stop N|node-start N|source" >&2
    exit 2
    ;;
esac
