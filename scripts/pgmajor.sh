#!/usr/bin/env bash
# A PostgreSQL major to build and test ddx against, prepared once and cached
# (as root) in $DDX_CACHE (default /var/cache/ddx), outside any clone:
#
#   scripts/pgmajor.sh MAJOR prepare     builds or installs it (once; later a no-op)
#   scripts/pgmajor.sh MAJOR env         prints the exports that select it:
#                                        PG_CONFIG and DDX_PGBIN
#   scripts/pgmajor.sh MAJOR run CMD...  runs CMD where that major's programs run
#
# 15: Debian 12's own packages (scripts/deps.sh installs them).
# 18: the upstream source inside Debian unstable's source package of
#     postgresql-18, fetched with `apt-get source` through a private apt
#     configuration (the machine's sources are left alone), built into
#     $DDX_CACHE/pg18 (a few minutes, once).
# 17: Debian 13's postgresql-17 and postgresql-server-dev-17. Debian's registry
#     lists 13's source package but serves none of its files, and 13's binaries
#     need a newer glibc than Debian 12's, so they run in a Debian 13 root made
#     by debootstrap ($DDX_CACHE/trixie, about 6 minutes once). Commands for 17
#     run in that root (chroot in a private mount namespace) with the clone and
#     /tmp bound at the same paths, so that a server started there is reached
#     through its socket in /tmp from this machine's psql and Python.
set -euo pipefail
CACHE=${DDX_CACHE:-/var/cache/ddx}
MAJOR=${1:?usage: $0 MAJOR prepare|env|run CMD...}
ACTION=${2:-prepare}
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$CACHE/trixie
PG18_SOURCE=${DDX_PG18_SOURCE:-postgresql-18}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() { "$REPO/scripts/deps.sh" "$@"; }

prepare_18() {
  local prefix=$CACHE/pg18
  [ -x "$prefix/bin/pg_config" ] && return 0
  apt_install bison flex libreadline-dev zlib1g-dev libicu-dev pkg-config dpkg-dev debian-archive-keyring
  local apt=$CACHE/apt-unstable src=$CACHE/src18
  rm -rf "$src"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$src"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main" \
    >"$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/none"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=root")
  apt-get "${opts[@]}" -qq update
  (cd "$src" && apt-get "${opts[@]}" -qq source --download-only "$PG18_SOURCE")
  # The upstream tarball, without Debian's packaging patches: ddx is tested
  # against PostgreSQL as its developers release it.
  local orig
  orig=$(ls "$src"/postgresql-18_*.orig.tar.* | head -1)
  tar -xf "$orig" -C "$src"
  local dir
  dir=$(ls -d "$src"/postgresql-18*/ | head -1)
  (cd "$dir" && ./configure -q --prefix="$prefix" --without-llvm >"$src/configure.log" 2>&1 &&
    make -s -j2 >"$src/make.log" 2>&1 && make -s install >"$src/install.log" 2>&1) ||
    { tail -30 "$src"/*.log; exit 1; }
  echo "PostgreSQL $("$prefix/bin/pg_config" --version) built in $prefix"
}

prepare_17() {
  if [ ! -x "$ROOT/usr/lib/postgresql/17/bin/pg_config" ]; then
    apt_install debootstrap debian-archive-keyring
    rm -rf "$ROOT"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase trixie "$ROOT" http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -30 "$CACHE/debootstrap.log"; exit 1; }
    # No service starts inside the root, and no cluster is made by the package.
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod +x "$ROOT/usr/sbin/policy-rc.d"
    mkdir -p "$ROOT/etc/postgresql-common"
    echo "create_main_cluster = false" >"$ROOT/etc/postgresql-common/createcluster.conf"
  fi
  # What the root needs, installed where missing: a root made before a
  # package joined the list (Eigen, for the unit tests) gets it too.
  local p missing=()
  for p in postgresql-17 postgresql-server-dev-17 g++ make cmake libgtest-dev libpg-query-dev libeigen3-dev; do
    in_root dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    in_root env DEBIAN_FRONTEND=noninteractive apt-get -qq update
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      >"$CACHE/trixie-apt.log" 2>&1 || { tail -30 "$CACHE/trixie-apt.log"; exit 1; }
    in_root apt-get clean
  fi
  # The server runs as `ddx` inside the root as outside, with the same uid, so
  # that files it makes in the shared /tmp belong to the same user.
  local uid
  id ddx >/dev/null 2>&1 || as_root useradd --system --no-create-home --shell /usr/sbin/nologin ddx
  uid=$(id -u ddx)
  if ! grep -q "^ddx:" "$ROOT/etc/passwd"; then
    in_root useradd --system --no-create-home --uid "$uid" --non-unique --shell /usr/sbin/nologin ddx
  elif [ "$(grep "^ddx:" "$ROOT/etc/passwd" | cut -d: -f3)" != "$uid" ]; then
    in_root usermod --non-unique --uid "$uid" ddx
  fi
}

# Runs "$@" inside the Debian 13 root; the binds vanish with the namespace.
in_root() {
  as_root unshare --mount --propagation private -- /bin/sh -c '
    root=$1; repo=$2; cwd=$3; shift 3
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind /tmp "$root/tmp"
    mkdir -p "$root$repo" && mount --bind "$repo" "$root$repo"
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    exec chroot "$root" /bin/sh -c "cd \"$cwd\" 2>/dev/null || cd \"$repo\"; exec \"\$@\"" sh "$@"
  ' sh "$ROOT" "$REPO" "$PWD" "$@"
}

case "$MAJOR:$ACTION" in
  15:prepare) "$REPO/scripts/deps.sh" ;;
  15:env) echo "export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config DDX_PGBIN=/usr/lib/postgresql/15/bin" ;;
  15:run | 18:run) shift 2; exec "$@" ;;
  18:prepare) prepare_18 ;;
  18:env) echo "export PG_CONFIG=$CACHE/pg18/bin/pg_config DDX_PGBIN=$CACHE/pg18/bin" ;;
  17:prepare) prepare_17 ;;
  17:env) echo "export PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config DDX_PGBIN=/usr/lib/postgresql/17/bin" ;;
  17:run) shift 2; in_root "$@" ;;
  *) echo "usage: $0 15|17|18 prepare|env|run CMD..." >&2; exit 2 ;;
esac
