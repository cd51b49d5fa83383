// The runner's parts (see README.md in this folder): what its files share.
// Internal to src/pg/runner. C-style C++: no object with a destructor lives
// in a frame that a PostgreSQL error can longjmp over.
#pragma once

#include <cctype>
#include <cmath>
#include <cstring>

#include "ddx/core/program.h"
#include "ddx/pg/runner.h"

extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/itemptr.h"

#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "lib/stringinfo.h"
#include "utils/hsearch.h"
#include "common/hashfn.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
}

namespace ddx::pg {

extern bool show_sql;        // ddx.show_sql
extern bool citus_in_place;  // ddx.citus_in_place
extern int retain_memory;    // ddx.retain_memory (kB)

struct GradKey {
  Oid toid;
  ItemPointerData tid;
  int32 pidx;
};

struct GradEntry {
  GradKey key;
  double g;
  bool has;  // a row with a gradient that is not NULL (AddRow)
};

// A gradient of a row identified by its primary key (a Citus table's row:
// the program's column `key`, ROW(key columns)::text), hashed by its text
// and the parameter's index, which names the table within the program. Not
// by the program's toid: Citus deparses a task's regclass constant of one
// of its tables as the shard (a branch of the program's output pushed down
// with the table's saved copy gave the shard's OID, so that every gradient
// of the MLP's w1 read 0 on Citus in place).
struct KeyedGrad {
  int32 pidx;
  const char *key;  // in the result's context
};

struct KeyedEntry {
  KeyedGrad key;
  double g;
  bool has;
};

// A program's result for one execution (allocated in that execution's context).
struct ExecResult {
  MemoryContext owner;
  char *sql;
  int nparams;  // the program's $1 .. $n, as this result was computed with
  Oid *types;
  Datum *values;
  char *nulls;  // ' ' or 'n', as SPI takes them
  int16 *typlens;
  bool *typbyvals;
  HTAB *grads;
  HTAB *keyed;       // KeyedEntry, or NULL when no row is identified by key
  bool loss_isnull;  // the loss's value, for ddx_value(loss)
  double loss;
  MemoryContextCallback cb;
  ExecResult *next;
};

// A gradient program as the hook hands it to the runner (the first two
// arguments of _ddx.grad_at and _ddx.grad_key): `sql`, and where the loss
// reads Citus tables without parameters (program.h, CitusPlacement),
// `in_place`, the program that reads them in place, which the runner runs
// where Citus can plan it and ddx.citus_in_place is on (else `sql`, which
// reads them gathered); NULL otherwise.
struct ProgramText {
  const char *sql;
  const char *in_place;
};

// grad_at(program, in_place, pidx, tableoid or table, ctid or key, value is
// NULL [, p1, ...]): the first statement parameter's argument.
constexpr int kFirstParam = 6;

// settings.cpp: the settings programs run under; returns the GUC nest level
// to restore with AtEOXact_GUC
int ProgramSettings();
// Keeps up to ddx.retain_memory of freed memory in the backend (settings.cpp).
void RetainMemory();
void InPlaceSettings();
void NoRepartition();
void FreeJoinOrder();

// plans.cpp: kept plans, and running one
SPIPlanPtr PlanInPlace(const char *sql, int nparams, Oid *types);
SPIPlanPtr KeptPlanFor(const ProgramText &prog, int nparams, Oid *types, const char **ran, bool *pushed);
int ExecuteProgram(const ProgramText &prog, const ExecResult *p);

// runner.cpp
void TakeParams(FunctionCallInfo fcinfo, MemoryContext owner, ExecResult *r, int first = kFirstParam);
void RunProgram(const ProgramText &prog, MemoryContext owner, ExecResult *out);
void ReadFinals(MemoryContext owner, ExecResult *out);

// dense.cpp: the program's dense statement where ddx.dense is on and one is
// kept for it (ddx/pg/dense.h); false where the SQL program is to run.
bool RunDense(const ProgramText &prog, MemoryContext owner, ExecResult *out);
uint32 HashKeyed(const void *k, Size);
int MatchKeyed(const void *a, const void *b, Size);
HTAB *KeyedOf(ExecResult *r, MemoryContext owner);

// shards.cpp: a program in ddx.shards parts
extern int shards;  // ddx.shards
void RunSharded(const ProgramText &prog, MemoryContext owner, ExecResult *out);
void DefineShardSettings();

// One row of a parameter row's gradient into its entry (found: it had one
// before): the rows of one parameter row are summed as sum(float8) sums
// them, in the order they come (NULLs skipped, the first value as it is, so
// a lone -0.0 stays -0.0; a finite sum that overflows is float8pl's error),
// and an entry of NULL rows only is 0. The program has no GROUP BY of its
// own (program.cpp). `table` names the parameter's table in the error.
template <typename Entry>
void AddRow(Entry *e, bool found, double g, bool isnull, Oid table) {
  if (!found) {
    e->g = isnull ? 0.0 : g;
    e->has = !isnull;
    return;
  }
  if (isnull) return;
  double sum = e->has ? e->g + g : g;
  if (unlikely(std::isinf(sum)) && !std::isinf(e->g) && !std::isinf(g)) {
    char *name = OidIsValid(table) ? get_rel_name(table) : nullptr;
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("value out of range: overflow"),
                    errdetail("A row of %s gets a gradient from each place the loss reads it; their sum leaves "
                              "float8's range (%g + %g).",
                              name ? name : "a parameter table", e->g, g)));
  }
  e->g = sum;
  e->has = true;
}

}  // namespace ddx::pg
