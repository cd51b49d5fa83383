#!/usr/bin/env bash
# Runs every test from nothing: installs what is missing, builds and installs
# ddx, runs the GoogleTest suite of the core (under ASan and UBSan), starts a
# throwaway PostgreSQL cluster and runs the pg_regress suites and the PyTorch
# oracle tests against it. Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
IN_MAJOR=
passed=0
failed=0
note() { printf '\n== %s\n' "$*"; }
# Adds a suite's closing line "TAG: N passed, N failed" (in $2) to the totals;
# no such line counts as one failure.
tally() {
  local p f
  p=$(echo "$2" | sed -n "s/^$1: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p")
  f=$(echo "$2" | sed -n "s/^$1: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-1}))
}
# The pg_regress suites, their log in build/$1, their results in test/out
# or $2 (run by $IN_MAJOR: another major's root).
run_regress() {
  local out=${2:-test/out}
  $IN_MAJOR make -s installcheck PG_CONFIG="$PG_CONFIG" REGRESS_OUT="$out" 2>&1 | tee "build/$1" |
    grep -E "^(ok|not ok|test|#)|tests" || true
  local p f
  p=$(grep -cE "^(ok|test) .*\.\.\. ok|^ok " "build/$1")
  f=$(grep -cE "FAILED|^not ok " "build/$1")
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -gt 0 ] && [ -f "$out/regression.diffs" ] && head -200 "$out/regression.diffs"
  return 0
}
# The soak at the CI seed; $1 lines of its report shown.
run_soak() {
  local out
  out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/soak.py --queries "${DDX_SOAK_QUERIES:-150}" --seed 20261130 2>&1)
  echo "$out" | tail -"$1"
  tally soak "$out"
}
# The PyTorch oracle tests; $1 lines of each report shown.
run_torch() {
  if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "python3-torch is not installed: PyTorch oracle tests skipped"
    return 0
  fi
  local t out
  for t in test_models:torch test_optim:optim test_attention_steps:attention test_gpt:gpt test_jvp:jvp; do
    out=$(/usr/bin/python3 "test/torch/${t%%:*}.py" 2>&1)
    echo "$out" | tail -"$1"
    tally "${t##*:}" "$out"
  done
}

scripts/deps.sh || exit 1
scripts/build.sh || exit 1

# The GoogleTest suite of the core, built in $1 (by $IN_MAJOR's compiler).
run_unit() {
  local out p f
  if $IN_MAJOR cmake -S test/unit -B "$1" -DCMAKE_BUILD_TYPE=Debug >"$1.log" 2>&1 &&
     $IN_MAJOR cmake --build "$1" -j2 >>"$1.log" 2>&1; then
    out=$($IN_MAJOR sh -c "cd '$1' && ./ddx_unit_tests" 2>&1)
    echo "$out" | tail -3
    p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p')
    f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed.*/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    [ -z "$p" ] && failed=$((failed + 1))
  else
    cat "$1.log"
    failed=$((failed + 1))
  fi
}

mkdir -p build
note "unit tests (GoogleTest, ASan + UBSan)"
run_unit build/unit

note "pg_regress"
scripts/pg.sh start || exit 1
trap 'scripts/pg.sh stop' EXIT
eval "$(scripts/pg.sh env)"
run_regress regress.log

note "a session that has not loaded ddx: a clear error, then the right answer"
DATA=${DDX_PGDATA:-/tmp/ddx-pg-$(id -u)}
sed -i "s/^shared_preload_libraries = 'ddx'/shared_preload_libraries = ''/" "$DATA/postgresql.conf"
scripts/pg.sh restart
psql -X -q -d contrib_regression -c "CREATE TABLE IF NOT EXISTS public.np (val float8); TRUNCATE public.np; INSERT INTO public.np VALUES (3);" >/dev/null
out=$(psql -X -At -d contrib_regression -v VERBOSITY=sqlstate 2>&1 <<'SQL'
\set VERBOSITY sqlstate
WITH loss AS (SELECT sum(val * val) FROM public.np) SELECT grad('loss', val) FROM public.np;
WITH loss AS (SELECT sum(val * val) FROM public.np) SELECT grad('loss', val) FROM public.np;
SQL
)
echo "$out"
if [ "$(echo "$out" | tr '\n' ' ')" = "ERROR:  55000 6 " ]; then passed=$((passed + 1)); echo ok; else failed=$((failed + 1)); echo FAILED; fi
# ... and the training functions work from a session's first statement (their
# C shim loads the library before their body prepares a grad statement)
psql -X -q -d contrib_regression -c "SELECT ddx_schedule_constant('np_lr', 0.1, 5)" >/dev/null
out=$(psql -X -At -d contrib_regression -c "SELECT step FROM ddx_adamw_step('SELECT sum(val * val) FROM public.np', ARRAY['public.np.val'], 0.1, state_name => 'np_step')" 2>&1)
out="$out $(psql -X -At -d contrib_regression -c "CALL ddx_train('SELECT sum(val * val) FROM public.np', ARRAY['public.np.val'], 2, 'np_lr', state_name => 'np_train')" 2>&1 | grep -c ERROR)"
out="$out $(psql -X -At -d contrib_regression -c "SELECT step FROM ddx_runs WHERE name = 'np_train'" 2>&1)"
echo "$out"
if [ "$out" = "1 0 2" ]; then passed=$((passed + 1)); echo ok; else failed=$((failed + 1)); echo FAILED; fi
psql -X -q -d contrib_regression -c "SELECT ddx_run_drop(name) FROM ddx_runs WHERE name IN ('np_step', 'np_train')" >/dev/null
sed -i "s/^shared_preload_libraries = ''/shared_preload_libraries = 'ddx'/" "$DATA/postgresql.conf"
scripts/pg.sh restart

note "soak: generated loss queries against finite differences and metamorphic relations"
run_soak 15

note "faults and concurrency"
out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/faults.py 2>&1)
echo "$out"
tally faults "$out"

note "contraction node fuzz: random grouped queries over joins, the node against PostgreSQL's own plan"
out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/contraction_fuzz.py --queries 2000 --seed 20261203 2>&1)
echo "$out" | tail -5
tally "contraction fuzz" "$out"

note "scalar rules: PostgreSQL's values and ddx's gradients against test/fixtures/scalar_cases.tsv"
out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/scalar_cases.py 2>&1)
echo "$out" | tail -5
tally "scalar cases" "$out"

note "golden snapshots: the gradient programs of the bench workloads and the GPT"
out=$(PGDATABASE=postgres /usr/bin/python3 test/golden/programs.py 2>&1)
echo "$out" | tail -3
tally golden "$out"

note "pg_regress under valgrind memcheck"
if [ "${DDX_SKIP_VALGRIND:-}" = 1 ]; then
  echo "skipped (DDX_SKIP_VALGRIND=1)"
elif scripts/valgrind.sh >build/valgrind.log 2>&1; then
  tail -1 build/valgrind.log
  passed=$((passed + 1))
else
  tail -20 build/valgrind.log
  failed=$((failed + 1))
fi
eval "$(scripts/pg.sh env)"

note "PyTorch oracle tests"
run_torch 1000

note "the GPT's PyTorch oracle with every gradient in two parts (ddx.shards = 2: a background worker computes one)"
out=$(PGOPTIONS="-c ddx.shards=2" /usr/bin/python3 test/torch/test_gpt.py 2>&1)
echo "$out" | tail -3
tally gpt "$out"

note "again with the contraction node in every query (ddx.contraction = all): pg_regress, soak, PyTorch oracles"
export PGOPTIONS="-c ddx.contraction=all"
run_regress regress_node.log
run_soak 2
run_torch 1
unset PGOPTIONS

note "again with the contraction node off (ddx.contraction = off): pg_regress, soak"
export PGOPTIONS="-c ddx.contraction=off"
run_regress regress_off.log
run_soak 2
unset PGOPTIONS

note "again with dense execution (ddx.dense = on): pg_regress, soak, PyTorch oracles"
export PGOPTIONS="-c ddx.dense=on"
run_regress regress_dense.log
run_soak 2
run_torch 1
unset PGOPTIONS

note "dense fuzz: random model losses with ddx.dense on and off, and their values against PostgreSQL's plan"
out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/dense_fuzz.py --queries 1000 --seed 20261207 2>&1)
echo "$out" | tail -2
tally "dense fuzz" "$out"

# Citus on this major ($1; by $IN_MAJOR), twice, each on a fresh cluster:
# programs over the Citus tables gathered (ddx.citus_in_place = off), then
# with the data in place (the default); $2 lines of each report shown.
run_citus() {
  local setting rc out
  for setting in off on; do
    note "Citus on $1: a coordinator and two workers (scripts/citus.sh; Citus built once from the vendored source), ddx.citus_in_place = $setting"
    $IN_MAJOR scripts/citus.sh start >build/citus.log 2>&1
    rc=$?
    if [ $rc -eq 3 ]; then
      tail -1 build/citus.log
      echo "Citus tests skipped: its source is not beside the repository (../shared/vendor)"
      break
    elif [ $rc -ne 0 ]; then
      tail -30 build/citus.log
      failed=$((failed + 1))
    else
      tail -1 build/citus.log
      out=$(eval "$(scripts/citus.sh env)" && DDX_IN_MAJOR="${IN_MAJOR:+$PWD/$IN_MAJOR}" \
        PGOPTIONS="-c ddx.citus_in_place=$setting" /usr/bin/python3 test/citus/test_citus.py 2>&1)
      echo "$out" | tail -"$2"
      tally citus "$out"
    fi
    $IN_MAJOR scripts/citus.sh stop
  done
}
run_citus 15 1000

# Another major ($1, 17 or 18; scripts/pgmajor.sh prepares it once): ddx
# built in build/pg$1 and installed there, a cluster of that major, and the
# suites whose answers may depend on it: pg_regress, the PyTorch oracles,
# the soak, the node fuzz, faults and the program goldens. On 17 the unit
# tests too, built by Debian 13's compiler with its libpg_query of 17's
# grammar; on 18 they would be the binary above again (the core includes no
# PostgreSQL header). On 17 Citus too (13.2 supports 15 to 17; its source
# copied into the tree for the root to read). The rest stays on 15:
# valgrind, the node on and off, the session without ddx loaded.
test_major() {
  local m=$1 saved_pg_config=$PG_CONFIG
  note "PostgreSQL $m: build, pg_regress, PyTorch oracles, soak, node fuzz, dense fuzz, faults, goldens"
  if ! scripts/pgmajor.sh "$m" prepare >"build/pg$m-prepare.log" 2>&1; then
    tail -30 "build/pg$m-prepare.log"
    failed=$((failed + 1))
    return
  fi
  eval "$(scripts/pgmajor.sh "$m" env)"
  export DDX_PGDATA=/tmp/ddx-pg$m-$(id -u) DDX_PGPORT=543$m
  IN_MAJOR="scripts/pgmajor.sh $m run"
  # (built in a copy of the tree: a VPATH build would take this tree's
  # ddx.so, built for 15, for its own)
  local repo=$PWD src=build/pg$m/src
  mkdir -p "$src"
  git ls-files -z | xargs -0 cp -p -u --parents -t "$src"
  if ! (cd "$src" && $repo/$IN_MAJOR make -s -j2 PG_CONFIG="$PG_CONFIG" &&
        $repo/$IN_MAJOR make -s install PG_CONFIG="$PG_CONFIG") \
        >"build/pg$m-build.log" 2>&1 || grep -q "warning:" "build/pg$m-build.log"; then
    cat "build/pg$m-build.log"
    failed=$((failed + 1))
  elif $IN_MAJOR scripts/pg.sh start; then
    eval "$(scripts/pg.sh env)"
    [ "$m" = 17 ] && run_unit "build/unit$m"
    run_regress "regress$m.log" "build/pg$m/out"
    run_torch 1
    run_soak 1
    out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/contraction_fuzz.py --queries 2000 --seed 20261203 2>&1)
    echo "$out" | tail -1
    tally "contraction fuzz" "$out"
    out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/dense_fuzz.py --queries 500 --seed 20261207 2>&1)
    echo "$out" | tail -1
    tally "dense fuzz" "$out"
    out=$(PGDATABASE=postgres /usr/bin/python3 test/soak/faults.py 2>&1)
    echo "$out" | tail -1
    tally faults "$out"
    out=$(PGDATABASE=postgres /usr/bin/python3 test/golden/programs.py 2>&1)
    echo "$out" | tail -1
    tally golden "$out"
    $IN_MAJOR scripts/pg.sh stop
    if [ "$m" -le 17 ]; then
      local tarball
      if tarball=$(scripts/citus.sh source 2>/dev/null); then
        mkdir -p build/vendor && cp -u "$tarball" build/vendor/
        export DDX_VENDOR=$PWD/build/vendor
      fi
      run_citus "$m" 1
      unset DDX_VENDOR
    fi
  else
    failed=$((failed + 1))
  fi
  IN_MAJOR=
  PG_CONFIG=$saved_pg_config
  unset DDX_PGBIN DDX_PGDATA DDX_PGPORT
  eval "$(scripts/pg.sh env)"
}

for m in ${DDX_MAJORS-17 18}; do test_major "$m"; done

if [[ " ${DDX_MAJORS-17 18} " == *" 18 "* ]]; then
  note "pg_upgrade from 15 to 18 of a cluster with training runs: they train on as without it"
  out=$(test/upgrade/pg_upgrade.sh 2>&1)
  echo "$out" | grep -E "^(from|Upgrade|FAIL)|pg_upgrade:"
  tally pg_upgrade "$out"
fi

note "ALTER EXTENSION ddx UPDATE from the previous release (its commit in sql/upgrades/RELEASES, built from git): runs train on as without it"
out=$(test/upgrade/run.sh 2>&1)
echo "$out" | grep -E "^(upgrading|FAIL)|upgrade:"
tally upgrade "$out"

note "the Debian package: dpkg-buildpackage, installed into PostgreSQL 15, CREATE EXTENSION and a gradient"
out=$(test/package/run.sh 2>&1)
echo "$out" | grep -vE "^ok "
tally package "$out"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
