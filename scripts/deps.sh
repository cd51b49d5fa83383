#!/usr/bin/env bash
# Installs Debian packages that are missing (as root, or through sudo):
#   scripts/deps.sh            what ddx and its tests need on Debian 12
#   scripts/deps.sh PKG...     those packages (the other scripts' needs: the
#                              majors, Citus, valgrind, the Debian package)
set -euo pipefail
PKGS="postgresql-15 postgresql-server-dev-15 libpg-query-dev libgtest-dev libeigen3-dev cmake g++ make python3-torch python3-numpy python3-psycopg2 gnuplot-nox"
[ $# -gt 0 ] && PKGS="$*"
missing=()
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=
  [ "$(id -u)" != 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
