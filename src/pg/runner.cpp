// The runner: executes a gradient program and serves each row's gradient.
//
// _ddx.grad_at(program, pidx, tableoid, ctid, value_is_null [, p1, ...]) is
// what grad() becomes after the hook; p1 ... are the values of the statement
// parameters the loss reads, the program's $1 .... On its first call in an execution it runs the
// program (one read-only SPI statement under the statement's own snapshot)
// and keeps the result, a hash (tableoid, ctid, pidx) -> gradient, in the
// function's fn_mcxt: that is the executor's per-query context, so the result
// lives exactly as long as this execution. All grad calls of one program in
// one execution share it through a session list keyed by (context, program,
// parameter values), whose entries unlink themselves when the context is
// reset or deleted. (Parameter values are fixed within an execution, except
// where a set-returning SQL function was inlined with a lateral argument:
// each call checks them, and new values run the program again.)
//
// Why read-only SPI with the active snapshot: _SPI_execute_plan uses
// GetActiveSnapshot() unchanged when read_only is true (no
// CommandCounterIncrement), so the program sees exactly the rows the calling
// statement sees, also in an UPDATE of the parameter table itself, whose own
// changes carry the current command id and are invisible to it.
//
// Why jit = off: see RunProgram.
//
// Why search_path = pg_catalog, then the caller's path, while the program
// runs (SetProgramSearchPath): the emitted SQL names built-in functions and
// operators unqualified and user objects schema-qualified, so nothing planted
// on the user's search_path changes what the program's own text computes;
// the user functions it calls resolve the names in their bodies as they do
// in the caller's statement. Plans are prepared once per session
// (SPI_keepplan); plancache re-plans a kept plan where the path differs from
// the one it was planned under.
//
// Why an error inside a program is rethrown with its context rewritten: SPI
// adds the statement as a CONTEXT line ("SQL statement \"WITH f1 AS ...\""),
// kilobytes of generated SQL that bury the one line a user needs. The line
// becomes "ddx gradient program"; ddx.show_sql = on keeps the text after it
// (and ddx_explain shows the program of any statement).
//
// This file is C-style C++: no object with a destructor lives in a frame that
// a PostgreSQL error can longjmp over.
#include <cctype>
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

PG_FUNCTION_INFO_V1(ddx_grad);
PG_FUNCTION_INFO_V1(ddx_grad_at);
PG_FUNCTION_INFO_V1(ddx_grad_key);
PG_FUNCTION_INFO_V1(ddx_stop_gradient);
PG_FUNCTION_INFO_V1(ddx_jvp_rows);
PG_FUNCTION_INFO_V1(ddx_explain_program);
}

namespace {

bool show_sql = false;       // ddx.show_sql
bool citus_in_place = true;  // ddx.citus_in_place

struct GradKey {
  Oid toid;
  ItemPointerData tid;
  int32 pidx;
};

struct GradEntry {
  GradKey key;
  double g;
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
};

uint32 HashKeyed(const void *k, Size) {
  const KeyedGrad *x = (const KeyedGrad *)k;
  uint32 h = hash_bytes((const unsigned char *)x->key, (int)strlen(x->key));
  return hash_combine(h, hash_uint32((uint32)x->pidx));
}

int MatchKeyed(const void *a, const void *b, Size) {
  const KeyedGrad *x = (const KeyedGrad *)a, *y = (const KeyedGrad *)b;
  return x->pidx == y->pidx && strcmp(x->key, y->key) == 0 ? 0 : 1;
}

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

ExecResult *exec_results = nullptr;

void ForgetResult(void *arg) {
  ExecResult **p = &exec_results;
  while (*p && *p != arg) p = &(*p)->next;
  if (*p) *p = (*p)->next;
}

// Session cache of prepared programs (TopMemoryContext), most recent first.
struct KeptPlan {
  char *sql;
  SPIPlanPtr plan;
  char *ran;      // the statement the plan runs: sql, or one of its two parts (kInPlace)
  bool in_place;  // ddx.citus_in_place when it was chosen
  bool pushed;    // the in-place program runs (not the gathered one)
  KeptPlan *next;
};
KeptPlan *kept_plans = nullptr;
constexpr int kMaxKeptPlans = 64;

SPIPlanPtr Prepare(const char *sql, int nparams, Oid *types) {
  SPIPlanPtr plan = SPI_prepare(sql, nparams, types);
  if (!plan) elog(ERROR, "ddx: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan)) elog(ERROR, "ddx: SPI_keepplan failed");
  return plan;
}

// The in-place program does not keep its joins in their written order
// (join_collapse_limit = 1, ProgramSettings): Citus decides which joins stay
// on the workers from the join clauses the planner finds between the
// relations it joins (its restriction equivalence), and with the JOINs kept
// nested it did not see the linear model's transpose join its per-sample
// cotangents to the data on the distribution column. It pulled them to the
// coordinator: 168 kB a step, against 352 bytes of partial sums.
void FreeJoinOrder() {
  (void)set_config_option("join_collapse_limit", GetConfigOptionResetString("join_collapse_limit"), PGC_USERSET,
                          PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

// A program over Citus tables in place runs much of itself on the workers,
// as Citus's tasks, under the workers' settings, not the ones set here: with
// JIT on, a worker compiled each task of a 60-sample MLP's gradient for 2.7 s
// (12 s against 59 ms with jit = off). Citus sends a SET LOCAL of the
// transaction to its workers where citus.propagate_set_commands = 'local':
// the planner settings go with the program (restored here at the end of
// the program's GUC level; on the workers they last to the end of the
// transaction, like any SET LOCAL, and only price plans).
//
// Nor does the in-place program repartition: where its joins need it (an
// embedding distributed by token joined to samples distributed by sample),
// Citus refuses it at planning with repartition joins off, and the gathered
// program runs (PlanInPlace). With them on, as a user sets them for such a
// forward, the embedding's gradient took 10.7 s in place against 1 s
// gathered (bench/citus.py).
//
// Only the in-place program: the gathered one, where the runner falls back,
// runs as any statement does.
void NoRepartition() {
  if (GetConfigOption("citus.enable_repartition_joins", true, false))
    (void)set_config_option("citus.enable_repartition_joins", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true,
                            0, false);
}
void InPlaceSettings() {
  NoRepartition();
  FreeJoinOrder();
  if (!GetConfigOption("citus.propagate_set_commands", true, false)) return;
  (void)set_config_option("citus.propagate_set_commands", "local", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  const char *sets[] = {"SET LOCAL jit = off", "SET LOCAL enable_nestloop = off", "SET LOCAL enable_mergejoin = off",
                        "SET LOCAL enable_sort = off"};
  for (const char *s : sets)
    if (SPI_execute(s, false, 0) != SPI_OK_UTILITY) elog(ERROR, "ddx: %s failed", s);
  // The workers' tasks are the program's grouped sums of products: they
  // plan them with the contraction node as the coordinator would (its
  // ddx.contraction; ddx.in_program for `programs`). Where a worker has not
  // loaded ddx, the two are placeholders there and change nothing. The MLP's
  // gradient in place (bench/citus.py): see the README.
  // (Saved first at the program's GUC level, as ddx.in_program is, so that
  // the SET LOCAL ends with the program here.)
  std::string mode = GetConfigOption("ddx.contraction", false, false);
  (void)set_config_option("ddx.contraction", mode.c_str(), PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  std::string contraction = "SET LOCAL ddx.contraction = '" + mode + "'";
  for (const char *s : {contraction.c_str(), "SET LOCAL ddx.in_program = on"})
    if (SPI_execute(s, false, 0) != SPI_OK_UTILITY) elog(ERROR, "ddx: %s failed", s);
}

// The in-place program over Citus tables (kInPlace), prepared and planned
// now, in a subtransaction: Citus plans a statement when it is first planned
// and refuses (0A000, or XX000 for a join it would repartition) what it
// cannot distribute, such as a join of two distributed tables on other
// columns than their distribution columns. NULL, with the reason at DEBUG1,
// where it refuses; any other error is raised. (Planning is all the
// subtransaction does: nothing runs in it. Within SPI, as PL/pgSQL's
// exception blocks: AtEOSubXact_SPI cleans up.) It is planned as it runs
// (InPlaceSettings), without repartition joins and in a free join order.
SPIPlanPtr PlanInPlace(const char *sql, int nparams, Oid *types) {
  MemoryContext cxt = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  SPIPlanPtr volatile plan = NULL;
  BeginInternalSubTransaction(NULL);
  MemoryContextSwitchTo(cxt);
  PG_TRY();
  {
    NoRepartition();  // (both restored when the subtransaction ends)
    FreeJoinOrder();
    plan = Prepare(sql, nparams, types);
    CachedPlan *cp = SPI_plan_get_cached_plan(plan);
    if (cp) ReleaseCachedPlan(cp, CurrentResourceOwner);
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    ErrorData *e = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
    if (plan) SPI_freeplan(plan);
    plan = NULL;
    // Citus refuses some plans without a code of their own: "the query
    // contains a join that requires repartitioning" (XX000, from
    // JobExecutorType at planning, where citus.enable_repartition_joins is
    // off), as a join of the data with a distributed parameter table read in
    // place by another column than its distribution column
    if (ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_FEATURE_NOT_SUPPORTED && e->sqlerrcode != ERRCODE_INTERNAL_ERROR)
      ReThrowError(e);
    ereport(DEBUG1, (errmsg_internal("ddx: Citus cannot run the gradient program with its tables in place (%s); "
                                     "it runs over them gathered on the coordinator",
                                     e->message)));
    FreeErrorData(e);
  }
  PG_END_TRY();
  return plan;
}

SPIPlanPtr KeptPlanFor(const char *sql, int nparams, Oid *types, const char **ran, bool *pushed) {
  KeptPlan **p = &kept_plans;
  int n = 0;
  for (; *p; p = &(*p)->next, n++) {
    if (strcmp((*p)->sql, sql) == 0 && (*p)->in_place == citus_in_place) {
      KeptPlan *hit = *p;
      *p = hit->next;  // move to front
      hit->next = kept_plans;
      kept_plans = hit;
      *ran = hit->ran;
      *pushed = hit->pushed;
      return hit->plan;
    }
  }
  SPIPlanPtr plan = NULL;
  bool in_place_runs = false;
  char *keep = MemoryContextStrdup(TopMemoryContext, sql);
  char *text = keep;
  size_t lead = strlen(ddx::pg::kInPlace);
  const char *cut = strncmp(sql, ddx::pg::kInPlace, lead) == 0 ? strstr(sql, ddx::pg::kGathered) : NULL;
  if (cut) {
    char *in_place = MemoryContextStrdup(TopMemoryContext, sql + lead);
    in_place[cut - sql - lead] = '\0';
    plan = citus_in_place ? PlanInPlace(in_place, nparams, types) : NULL;
    if (plan) {
      text = in_place;
      in_place_runs = true;
    } else {
      pfree(in_place);
      text = MemoryContextStrdup(TopMemoryContext, cut + strlen(ddx::pg::kGathered));
    }
  }
  if (!plan) plan = Prepare(text, nparams, types);
  KeptPlan *k = (KeptPlan *)MemoryContextAlloc(TopMemoryContext, sizeof(KeptPlan));
  k->sql = keep;
  k->plan = plan;
  k->ran = text;
  k->in_place = citus_in_place;
  k->pushed = in_place_runs;
  *ran = text;
  *pushed = k->pushed;
  k->next = kept_plans;
  kept_plans = k;
  if (n + 1 > kMaxKeptPlans) {  // drop the least recently used
    KeptPlan **last = &kept_plans;
    while ((*last)->next) last = &(*last)->next;
    KeptPlan *old = *last;
    *last = nullptr;
    SPI_freeplan(old->plan);
    if (old->ran != old->sql) pfree(old->ran);
    pfree(old->sql);
    pfree(old);
  }
  return plan;
}

// Marks an error raised while the program ran as the program's: the SPI
// context line that quotes it becomes one short line (or, with
// ddx.show_sql, is prefixed), and a parse error's internal query is
// forgotten unless ddx.show_sql (see the file comment).
void MarkProgramError(ErrorData *e, const char *sql) {
  if (!show_sql && e->internalquery && strcmp(e->internalquery, sql) == 0) {
    e->internalquery = NULL;
    e->internalpos = 0;
  }
  const char *at = e->context ? strstr(e->context, sql) : NULL;
  if (!at) return;
  const char *start = at;  // the line that quotes the program ...
  while (start > e->context && start[-1] != '\n') start--;
  const char *end = at + strlen(sql);  // ... ends with the closing quote
  if (*end == '"') end++;
  StringInfoData buf;
  initStringInfo(&buf);
  appendBinaryStringInfo(&buf, e->context, (int)(start - e->context));
  if (show_sql) {
    appendStringInfoString(&buf, "ddx gradient program: ");
    appendBinaryStringInfo(&buf, start, (int)(end - start));
  } else {
    appendStringInfoString(&buf, "ddx gradient program (SET ddx.show_sql = on to see its SQL, or use ddx_explain)");
  }
  appendStringInfoString(&buf, end);
  e->context = buf.data;
}

// Prepares (once per session) and runs the program: SPI_OK_SELECT, or an
// error marked as the program's.
int ExecuteProgram(const char *sql, const ExecResult *p) {
  MemoryContext cxt = CurrentMemoryContext;
  volatile int rc = 0;
  const char *volatile ran = sql;
  PG_TRY();
  {
    const char *text = sql;
    bool pushed = false;
    SPIPlanPtr plan = KeptPlanFor(sql, p->nparams, p->types, &text, &pushed);
    ran = text;
    if (pushed) InPlaceSettings();  // (restored with the program's settings)
    rc = SPI_execute_plan(plan, p->values, p->nulls, true, 0);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    MarkProgramError(edata, ran);
    ReThrowError(edata);
  }
  PG_END_TRY();
  return rc;
}

// Runs the program with the parameters in `out`; fills `out` with its
// gradients (a hash allocated in `owner`) and the loss's value.
// The settings a program runs under (see the comments); returns the GUC
// nest level to restore with AtEOXact_GUC.
int ProgramSettings() {
  int nest = NewGUCNestLevel();
  ddx::pg::SetProgramSearchPath();
  // A program of many CTEs looks expensive to the planner, and JIT
  // compilation of it cost 1.2 s against a 5 ms run (measured).
  (void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The planner estimates a chain of CTEs at a few rows and then pairs
  // cotangents with forward rows by nested loops: 4096 x 16384 comparisons
  // took 4 s of an MLP's 21 s backward; with nested loops off, 17 s (measured).
  (void)set_config_option("enable_nestloop", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The same estimates made it sort 1.28M region rows for a merge join with
  // an 80k-row aggregate instead of hashing the aggregate (matmul backward
  // 3.1 s -> 2.2 s with merge joins off, measured). Both settings only price
  // plans; a join with no other method still runs.
  (void)set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // A NULL-safe key join is priced far too high (its hash keys are
  // expressions without statistics), and within the planner's 1% fuzz a
  // sorted GROUP BY then wins over hashing: the matmul's backward sorted
  // 1.28M rows onto disk. Sorts that windows need still run. Matmul program
  // 1886 -> 1401 ms (median of 5, interleaved).
  (void)set_config_option("enable_sort", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The planner estimates CTE scans with no statistics (a join of two at one
  // row), so it reorders a program's joins on noise: a GPT's saved final
  // LayerNorm joined the token embedding to the MLP's output on the channel
  // alone, 77,824 rows, before the batch picked the token. The program's
  // joins are written in the order of the user's query, roots first; kept
  // so, the GPT's program took 556 ms instead of 897, the bench's matmul,
  // MLP and attention programs changed within noise (0.94-1.10, interleaved).
  (void)set_config_option("join_collapse_limit", "1", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // A program with statement parameters (a training step's batch, $1) would
  // be planned anew for each of its first executions (custom plans): ~200 ms
  // of a GPT step's 900. Its parameters select rows (a batch, a LIMIT); the
  // generic plan is planned once and kept.
  (void)set_config_option("plan_cache_mode", "force_generic_plan", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  // Where ddx.contraction = programs, the contraction node plans the
  // program's grouped sums of products (src/pg/contraction_node.cpp).
  (void)set_config_option("ddx.in_program", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  return nest;
}

void RunProgram(const char *sql, MemoryContext owner, ExecResult *out) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  int rc = ExecuteProgram(sql, out);
  if (rc != SPI_OK_SELECT) elog(ERROR, "ddx: gradient program failed: %s", SPI_result_code_string(rc));
  AtEOXact_GUC(true, nest);

  HASHCTL ctl;
  memset(&ctl, 0, sizeof ctl);
  ctl.keysize = sizeof(GradKey);
  ctl.entrysize = sizeof(GradEntry);
  ctl.hcxt = owner;
  HTAB *h = hash_create("ddx gradients", (long)Max(SPI_processed, 16), &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  double loss_rows = 0, tied_rows = 0;
  out->loss_isnull = true;
  out->loss = 0;
  TupleDesc td = SPI_tuptable->tupdesc;
  for (uint64 i = 0; i < SPI_processed; i++) {
    HeapTuple tup = SPI_tuptable->vals[i];
    bool n_toid, n_tid, n_pidx, n_g;
    Datum d_toid = SPI_getbinval(tup, td, 1, &n_toid);
    Datum d_tid = SPI_getbinval(tup, td, 2, &n_tid);
    Datum d_pidx = SPI_getbinval(tup, td, 3, &n_pidx);
    Datum d_g = SPI_getbinval(tup, td, 4, &n_g);
    int32 pidx = n_pidx ? -2 : DatumGetInt32(d_pidx);
    double g = n_g ? 0.0 : DatumGetFloat8(d_g);
    if (pidx == -1) {
      loss_rows = g;
      continue;
    }
    if (pidx == -3) {
      tied_rows += g;
      continue;
    }
    if (pidx == -4) {
      out->loss_isnull = n_g;
      out->loss = g;
      continue;
    }
    if (n_toid || pidx < 0) continue;
    if (n_tid) {  // identified by key (or no row at all)
      bool n_key;
      Datum d_key = td->natts >= 5 ? SPI_getbinval(tup, td, 5, &n_key) : (Datum)0;
      if (td->natts < 5 || n_key) continue;
      if (!out->keyed) {
        HASHCTL kc;
        memset(&kc, 0, sizeof kc);
        kc.keysize = sizeof(KeyedGrad);
        kc.entrysize = sizeof(KeyedEntry);
        kc.hash = HashKeyed;
        kc.match = MatchKeyed;
        kc.hcxt = owner;
        out->keyed =
            hash_create("ddx keyed gradients", 64, &kc, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
      }
      KeyedGrad k;
      k.pidx = pidx;
      k.key = MemoryContextStrdup(owner, TextDatumGetCString(d_key));
      KeyedEntry *e = (KeyedEntry *)hash_search(out->keyed, &k, HASH_ENTER, NULL);
      e->g = g;
      continue;
    }
    GradKey key;
    memset(&key, 0, sizeof key);
    key.toid = DatumGetObjectId(d_toid);
    key.tid = *(ItemPointer)DatumGetPointer(d_tid);
    key.pidx = pidx;
    GradEntry *e = (GradEntry *)hash_search(h, &key, HASH_ENTER, NULL);
    e->g = g;
  }
  SPI_finish();
  if (tied_rows > 0)
    ereport(ERROR, (errcode(ERRCODE_WINDOWING_ERROR), errmsg("a window's ORDER BY does not break ties"),
                    errdetail("row_number(), lag(), lead() and ROWS frames depend on the order of tied rows, which "
                              "PostgreSQL leaves unspecified; %.0f rows of the loss's windows are tied.",
                              tied_rows),
                    errhint("Add a column that is unique within each partition, such as the primary key, to the "
                            "window's ORDER BY.")));
  if (loss_rows > 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("the loss must be one row and one number"),
                    errdetail("The loss returned %.0f rows.", loss_rows),
                    errhint("Aggregate the loss to a single row, e.g. SELECT avg(...) AS l.")));
  out->grads = h;
}

// The statement parameters of this call (arguments 6 ...), copied into
// `owner` as `r`'s.
void TakeParams(FunctionCallInfo fcinfo, MemoryContext owner, ExecResult *r, int first = 5) {
  int n = PG_NARGS() - first;
  r->nparams = n;
  if (n <= 0) return;
  MemoryContext old = MemoryContextSwitchTo(owner);
  r->types = (Oid *)palloc(sizeof(Oid) * n);
  r->values = (Datum *)palloc(sizeof(Datum) * n);
  r->nulls = (char *)palloc(n);
  r->typlens = (int16 *)palloc(sizeof(int16) * n);
  r->typbyvals = (bool *)palloc(sizeof(bool) * n);
  for (int i = 0; i < n; i++) {
    r->types[i] = get_fn_expr_argtype(fcinfo->flinfo, first + i);
    if (!OidIsValid(r->types[i])) elog(ERROR, "ddx: could not determine the type of parameter %d", i + 1);
    get_typlenbyval(r->types[i], &r->typlens[i], &r->typbyvals[i]);
    r->nulls[i] = PG_ARGISNULL(first + i) ? 'n' : ' ';
    r->values[i] =
        PG_ARGISNULL(first + i) ? (Datum)0 : datumCopy(PG_GETARG_DATUM(first + i), r->typbyvals[i], r->typlens[i]);
  }
  MemoryContextSwitchTo(old);
}

// Whether `r` was computed with this call's parameter values.
bool SameParams(FunctionCallInfo fcinfo, const ExecResult *r) {
  int n = PG_NARGS() - 5;
  if (n != r->nparams) return false;
  for (int i = 0; i < n; i++) {
    bool isnull = PG_ARGISNULL(5 + i);
    if (isnull != (r->nulls[i] == 'n')) return false;
    if (!isnull && !datumIsEqual(PG_GETARG_DATUM(5 + i), r->values[i], r->typbyvals[i], r->typlens[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" {

// grad(), vjp() and ddx_value() as written: only reached when the hook did
// not see the statement.
Datum ddx_grad(PG_FUNCTION_ARGS) {
  char *name = get_func_name(fcinfo->flinfo->fn_oid);
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                  errmsg("%s() was not rewritten by ddx", name ? name : "grad"),
                  errdetail("The ddx library was not loaded in this session when the statement was parsed."),
                  errhint("Add ddx to shared_preload_libraries; or run the statement again: the library is loaded "
                          "now and cached plans have been reset.")));
  PG_RETURN_NULL();
}

}  // extern "C"

namespace {

// This execution's result of the program that a grad_at/grad_key call names
// (run on first use; see the file comment).
ExecResult *ResultFor(FunctionCallInfo fcinfo) {
  ExecResult *r = (ExecResult *)fcinfo->flinfo->fn_extra;
  if (r && (PG_NARGS() <= 5 || SameParams(fcinfo, r))) return r;
  MemoryContext owner = fcinfo->flinfo->fn_mcxt;
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  for (r = exec_results; r; r = r->next)
    if (r->owner == owner && strcmp(r->sql, sql) == 0 && SameParams(fcinfo, r)) break;
  if (!r) {
    ExecResult result;
    memset(&result, 0, sizeof result);
    TakeParams(fcinfo, owner, &result);
    RunProgram(sql, owner, &result);
    r = (ExecResult *)MemoryContextAllocZero(owner, sizeof(ExecResult));
    *r = result;
    r->owner = owner;
    r->sql = MemoryContextStrdup(owner, sql);
    r->cb.func = ForgetResult;
    r->cb.arg = r;
    MemoryContextRegisterResetCallback(owner, &r->cb);
    r->next = exec_results;
    exec_results = r;
  }
  pfree(sql);
  fcinfo->flinfo->fn_extra = r;
  return r;
}

}  // namespace

extern "C" {

Datum ddx_grad_at(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(4) || PG_GETARG_BOOL(4)) PG_RETURN_NULL();  // NULL value: NULL gradient
  if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3)) PG_RETURN_NULL();
  ExecResult *r = ResultFor(fcinfo);
  if (PG_GETARG_INT32(1) == ddx::kLossValue) {  // ddx_value(loss)
    if (r->loss_isnull) PG_RETURN_NULL();
    PG_RETURN_FLOAT8(r->loss);
  }
  GradKey key;
  memset(&key, 0, sizeof key);
  key.toid = PG_GETARG_OID(2);
  key.tid = *(ItemPointer)PG_GETARG_POINTER(3);
  key.pidx = PG_GETARG_INT32(1);
  GradEntry *e = (GradEntry *)hash_search(r->grads, &key, HASH_FIND, NULL);
  PG_RETURN_FLOAT8(e ? e->g : 0.0);
}

// _ddx.grad_key(program, pidx, table, key, value_is_null [, p1, ...]): grad
// of a row that the program identifies by primary key (a Citus table's:
// key is ROW(key columns in attribute order)::text, as in the program).
Datum ddx_grad_key(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(4) || PG_GETARG_BOOL(4)) PG_RETURN_NULL();  // NULL value: NULL gradient
  if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3)) PG_RETURN_NULL();
  ExecResult *r = ResultFor(fcinfo);
  if (!r->keyed) PG_RETURN_FLOAT8(0.0);
  KeyedGrad key;
  key.pidx = PG_GETARG_INT32(1);
  key.key = text_to_cstring(PG_GETARG_TEXT_PP(3));
  KeyedEntry *e = (KeyedEntry *)hash_search(r->keyed, &key, HASH_FIND, NULL);
  pfree((void *)key.key);
  PG_RETURN_FLOAT8(e ? e->g : 0.0);
}

Datum ddx_stop_gradient(PG_FUNCTION_ARGS) { PG_RETURN_FLOAT8(PG_GETARG_FLOAT8(0)); }

// _ddx.jvp_rows(query [, p1, ...]): the rows of jvp's tangent query (an
// output relation's rows with their tangents), which the hook puts in place
// of the output's range table entry. It runs as a program does: one
// read-only SPI statement under the caller's snapshot, prepared once per
// session, with the programs' planner settings. (Planned inside the user's
// statement instead, its chain of CTEs, without statistics, made the
// default planner nest loops over them: the GPT's jvp took minutes.)
Datum ddx_jvp_rows(PG_FUNCTION_ARGS) {
  ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
  if (!rsinfo || !IsA(rsinfo, ReturnSetInfo) || !(rsinfo->allowedModes & SFRM_Materialize) || !rsinfo->expectedDesc)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("_ddx.jvp_rows must be called in FROM")));
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  ExecResult params;
  memset(&params, 0, sizeof params);
  MemoryContext per_query = rsinfo->econtext->ecxt_per_query_memory;
  TakeParams(fcinfo, per_query, &params, 1);
  MemoryContext old = MemoryContextSwitchTo(per_query);
  TupleDesc desc = CreateTupleDescCopy(rsinfo->expectedDesc);
  Tuplestorestate *store = tuplestore_begin_heap(true, false, work_mem);
  MemoryContextSwitchTo(old);
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  int rc = ExecuteProgram(sql, &params);
  if (rc != SPI_OK_SELECT) elog(ERROR, "ddx: jvp query failed: %s", SPI_result_code_string(rc));
  AtEOXact_GUC(true, nest);
  if (SPI_tuptable->tupdesc->natts != desc->natts) elog(ERROR, "ddx: jvp query returned an unexpected row type");
  Datum *values = (Datum *)palloc(sizeof(Datum) * Max(desc->natts, 1));
  bool *nulls = (bool *)palloc(sizeof(bool) * Max(desc->natts, 1));
  for (uint64 i = 0; i < SPI_processed; i++) {
    heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
    old = MemoryContextSwitchTo(per_query);
    tuplestore_putvalues(store, desc, values, nulls);
    MemoryContextSwitchTo(old);
  }
  SPI_finish();
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = desc;
  PG_RETURN_NULL();
}

// ddx_explain_program(program, options): the lines of EXPLAIN (options) of a
// gradient program, planned as the runner plans it: under the programs'
// settings and, over Citus tables, the variant the runner runs (in place
// where ddx.citus_in_place is on and Citus can plan it, with the in-place
// settings sent to the workers; else gathered). That is the plan a user
// needs to see where the work runs: Citus's EXPLAIN shows each distributed
// subplan's tasks and the workers they ran on and, with ANALYZE, the bytes
// of each intermediate result. ddx_explain and ddx_explain_plan call it.
// Not a kept plan: planned anew, as EXPLAIN does. options is a list of
// EXPLAIN options (letters, commas, spaces only); the program must be a
// program (a WITH query, or the two Citus variants).
Datum ddx_explain_program(PG_FUNCTION_ARGS) {
  ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
  if (!rsinfo || !IsA(rsinfo, ReturnSetInfo) || !(rsinfo->allowedModes & SFRM_Materialize))
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ddx_explain_program must be called in FROM")));
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  char *options = text_to_cstring(PG_GETARG_TEXT_PP(1));
  for (const char *c = options; *c; c++)
    if (!isalpha((unsigned char)*c) && *c != ',' && *c != ' ' && *c != '_')
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid EXPLAIN options \"%s\"", options)));
  size_t lead = strlen(ddx::pg::kInPlace);
  bool variants = strncmp(sql, ddx::pg::kInPlace, lead) == 0;
  if (!variants && pg_strncasecmp(sql, "WITH ", 5) != 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("not a ddx gradient program"),
                    errhint("ddx_explain and ddx_explain_plan show the programs behind a statement.")));
  MemoryContext per_query = rsinfo->econtext->ecxt_per_query_memory;
  MemoryContext old = MemoryContextSwitchTo(per_query);
  TupleDesc desc = CreateTemplateTupleDesc(1);
  TupleDescInitEntry(desc, (AttrNumber)1, "line", TEXTOID, -1, 0);
  Tuplestorestate *store = tuplestore_begin_heap(true, false, work_mem);
  MemoryContextSwitchTo(old);
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  const char *text = sql;
  bool pushed = false;
  if (variants) {
    const char *cut = strstr(sql, ddx::pg::kGathered);
    if (!cut) elog(ERROR, "ddx: a program over Citus tables without its gathered variant");
    char *in_place = pnstrdup(sql + lead, cut - sql - lead);
    SPIPlanPtr plan = citus_in_place ? PlanInPlace(in_place, 0, NULL) : NULL;
    if (plan) {
      SPI_freeplan(plan);
      text = in_place;
      pushed = true;
    } else {
      text = cut + strlen(ddx::pg::kGathered);
    }
  }
  // A program is one SELECT and writes nothing; with ANALYZE, EXPLAIN runs
  // what it explains, so anything else is refused before it runs.
  SPIPlanPtr check = SPI_prepare(text, 0, NULL);
  if (!check) elog(ERROR, "ddx: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  ListCell *lc;
  foreach (lc, SPI_plan_get_plan_sources(check)) {
    CachedPlanSource *ps = (CachedPlanSource *)lfirst(lc);
    ListCell *qc;
    bool writes = ps->commandTag != CMDTAG_SELECT;
    foreach (qc, ps->query_list) writes = writes || ((Query *)lfirst(qc))->hasModifyingCTE;
    if (writes) ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("not a ddx gradient program")));
  }
  SPI_freeplan(check);
  if (pushed) InPlaceSettings();  // (restored with the program's settings)
  StringInfoData q;
  initStringInfo(&q);
  appendStringInfo(&q, "EXPLAIN (%s) %s", options, text);
  // not read-only: SPI refuses a utility statement there (CommandIsReadOnly)
  int rc = SPI_execute(q.data, false, 0);
  if (rc != SPI_OK_UTILITY && rc != SPI_OK_SELECT) elog(ERROR, "ddx: EXPLAIN failed: %s", SPI_result_code_string(rc));
  for (uint64 i = 0; i < SPI_processed; i++) {
    bool isnull;
    Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
    old = MemoryContextSwitchTo(per_query);
    Datum line = isnull ? (Datum)0 : datumCopy(d, false, -1);
    tuplestore_putvalues(store, desc, &line, &isnull);
    MemoryContextSwitchTo(old);
  }
  AtEOXact_GUC(true, nest);
  SPI_finish();
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = desc;
  PG_RETURN_NULL();
}

}  // extern "C"

namespace ddx::pg {

void SetProgramSearchPath() {
  const char *path = namespace_search_path ? namespace_search_path : "";
  char *full = psprintf("pg_catalog%s%s", *path ? ", " : "", path);
  (void)set_config_option("search_path", full, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  pfree(full);
}

void DefineRunnerSettings() {
  DefineCustomBoolVariable("ddx.show_sql", "Shows the generated SQL in the context of errors raised inside it.",
                           "Off: an error inside a gradient program, or inside an optimizer step, names the step "
                           "and the statement instead of quoting kilobytes of generated SQL; ddx_explain shows "
                           "the program of any statement.",
                           &show_sql, false, PGC_USERSET, 0, NULL, NULL, NULL);
  DefineCustomBoolVariable("ddx.citus_in_place",
                           "Runs gradient programs over Citus tables with the data in place, on the workers.",
                           "On (the default): the data tables are read in place where Citus can plan it, so that "
                           "the per-row work runs on the workers and only partial sums cross the network; where "
                           "Citus cannot, the program reads them gathered on the coordinator. Off: always gathered "
                           "(every program runs so; bench/citus.py measures both).",
                           &citus_in_place, true, PGC_USERSET, 0, NULL, NULL, NULL);
  MarkGUCPrefixReserved("ddx");
}

}  // namespace ddx::pg
