#!/usr/bin/env bash
# Builds ddx and installs it into the system's PostgreSQL 15 (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=
[ "$(id -u)" != 0 ] && SUDO=sudo
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}  # (another installation: PG_CONFIG)
make -s -j2 PG_CONFIG="$PG_CONFIG"
$SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
