#!/usr/bin/env bash
# The main job, from nothing: installs what is missing, builds ddx, starts a
# throwaway PostgreSQL cluster with ddx and trains a small model in plpgsql.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
scripts/pg.sh psql -X -q -v ON_ERROR_STOP=1 postgres -f examples/train_linear.sql
