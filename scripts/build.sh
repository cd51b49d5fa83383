#!/usr/bin/env bash
# Builds ddx and installs it into the system's PostgreSQL 15 (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=
[ "$(id -u)" != 0 ] && SUDO=sudo
make -s -j2 PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
$SUDO make -s install PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config >/dev/null
