#!/usr/bin/env bash
# A throwaway PostgreSQL cluster with ddx preloaded, for tests and demos
# (15 unless DDX_PGBIN names another installation: scripts/pgmajor.sh).
#   scripts/pg.sh start | restart | stop | env | psql [args...]
# PostgreSQL refuses to run as root: as root, the server runs as the
# unprivileged system user `ddx` (created if missing).
set -euo pipefail
PGBIN=${DDX_PGBIN:-/usr/lib/postgresql/15/bin}  # (another installation: DDX_PGBIN)
DIR=${DDX_PGDATA:-/tmp/ddx-pg-$(id -u)}
PORT=${DDX_PGPORT:-54329}
SOCK=${DDX_PGSOCK:-/tmp}
RUNAS=()
DBUSER=$(id -un)
if [ "$(id -u)" = 0 ]; then
  id ddx >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ddx
  RUNAS=(runuser -u ddx --)
  DBUSER=ddx
fi

case "${1:-}" in
  start)
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$DIR"
    mkdir -p "$DIR"
    [ ${#RUNAS[@]} -gt 0 ] && chown ddx "$DIR"
    # (DDX_INITDB_OPTS: more of initdb's options, such as 18's
    # --no-data-checksums for a cluster that pg_upgrade fills from 15's)
    # shellcheck disable=SC2086
    "${RUNAS[@]}" "$PGBIN/initdb" -D "$DIR" --auth=trust --no-sync -E UTF8 --locale=C ${DDX_INITDB_OPTS:-} >"$DIR.initdb.log" 2>&1 \
      || { cat "$DIR.initdb.log"; exit 1; }
    cat >>"$DIR/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'ddx'
fsync = off
max_connections = 40
CONF
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w start >/dev/null
    echo "PostgreSQL running: PGHOST=$SOCK PGPORT=$PORT PGUSER=$DBUSER (data $DIR)"
    ;;
  restart)
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -m fast -w restart >/dev/null
    ;;
  stop)
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null 2>&1 || true
    ;;
  env)
    echo "export PGHOST=$SOCK PGPORT=$PORT PGUSER=$DBUSER"
    ;;
  psql)
    shift
    PGHOST=$SOCK PGPORT=$PORT PGUSER=$DBUSER exec psql "$@"
    ;;
  *)
    echo "usage: $0 start|stop|env|psql [args]" >&2
    exit 2
    ;;
esac
