// The runner: executes a gradient program and serves each row's gradient.
//
// _ddx.grad_at(program, in_place, pidx, tableoid, ctid, value_is_null [, p1,
// ...]) is what grad() becomes after the hook; in_place is the program's
// variant over Citus tables in place (ProgramText), p1 ... are the values of
// the statement parameters the loss reads, the program's $1 .... On its
// first call in an execution it runs the
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
#include "internal.h"

extern "C" {
PG_FUNCTION_INFO_V1(ddx_grad);
PG_FUNCTION_INFO_V1(ddx_grad_at);
PG_FUNCTION_INFO_V1(ddx_grad_key);
PG_FUNCTION_INFO_V1(ddx_stop_gradient);
}

namespace ddx::pg {

uint32 HashKeyed(const void *k, Size) {
  const KeyedGrad *x = (const KeyedGrad *)k;
  uint32 h = hash_bytes((const unsigned char *)x->key, (int)strlen(x->key));
  return hash_combine(h, hash_uint32((uint32)x->pidx));
}

int MatchKeyed(const void *a, const void *b, Size) {
  const KeyedGrad *x = (const KeyedGrad *)a, *y = (const KeyedGrad *)b;
  return x->pidx == y->pidx && strcmp(x->key, y->key) == 0 ? 0 : 1;
}

// `r`'s hash of keyed gradients, created in `owner` on first use.
HTAB *KeyedOf(ExecResult *r, MemoryContext owner) {
  if (!r->keyed) {
    HASHCTL kc;
    memset(&kc, 0, sizeof kc);
    kc.keysize = sizeof(KeyedGrad);
    kc.entrysize = sizeof(KeyedEntry);
    kc.hash = HashKeyed;
    kc.match = MatchKeyed;
    kc.hcxt = owner;
    r->keyed = hash_create("ddx keyed gradients", 64, &kc, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
  }
  return r->keyed;
}

namespace {

ExecResult *exec_results = nullptr;

void ForgetResult(void *arg) {
  ExecResult **p = &exec_results;
  while (*p && *p != arg) p = &(*p)->next;
  if (*p) *p = (*p)->next;
}

}  // namespace

// The rows of a program's finals (SPI_tuptable) into `out`: its gradients
// summed per row (AddRow) in `owner`, the loss's value, and the loss's
// checks raised (after SPI_finish).
void ReadFinals(MemoryContext owner, ExecResult *out) {
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
      KeyedGrad k;
      k.pidx = pidx;
      k.key = MemoryContextStrdup(owner, TextDatumGetCString(d_key));
      bool found;
      KeyedEntry *e = (KeyedEntry *)hash_search(KeyedOf(out, owner), &k, HASH_ENTER, &found);
      AddRow(e, found, g, n_g, InvalidOid);
      continue;
    }
    GradKey key;
    memset(&key, 0, sizeof key);
    key.toid = DatumGetObjectId(d_toid);
    key.tid = *(ItemPointer)DatumGetPointer(d_tid);
    key.pidx = pidx;
    bool found;
    GradEntry *e = (GradEntry *)hash_search(h, &key, HASH_ENTER, &found);
    AddRow(e, found, g, n_g, key.toid);
  }
  SPI_finish();
  out->grads = h;
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
}

// Runs the program once (one part, see shards.cpp) into `out`, whose
// parameters are taken (ReadFinals).
void RunProgram(const ProgramText &prog, MemoryContext owner, ExecResult *out) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  int rc = ExecuteProgram(prog, out);
  if (rc != SPI_OK_SELECT) elog(ERROR, "ddx: gradient program failed: %s", SPI_result_code_string(rc));
  AtEOXact_GUC(true, nest);
  ReadFinals(owner, out);
}

namespace {

// Whether `r` was computed with this call's parameter values.
bool SameParams(FunctionCallInfo fcinfo, const ExecResult *r) {
  int n = PG_NARGS() - kFirstParam;
  if (n != r->nparams) return false;
  for (int i = 0; i < n; i++) {
    bool isnull = PG_ARGISNULL(kFirstParam + i);
    if (isnull != (r->nulls[i] == 'n')) return false;
    if (!isnull && !datumIsEqual(PG_GETARG_DATUM(kFirstParam + i), r->values[i], r->typbyvals[i], r->typlens[i]))
      return false;
  }
  return true;
}

}  // namespace

// The statement parameters of this call (arguments 6 ...), copied into
// `owner` as `r`'s.
void TakeParams(FunctionCallInfo fcinfo, MemoryContext owner, ExecResult *r, int first) {
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

}  // namespace ddx::pg

using namespace ddx::pg;

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
  if (r && (PG_NARGS() <= kFirstParam || SameParams(fcinfo, r))) return r;
  MemoryContext owner = fcinfo->flinfo->fn_mcxt;
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  char *in_place = PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1));
  for (r = exec_results; r; r = r->next)
    if (r->owner == owner && strcmp(r->sql, sql) == 0 && SameParams(fcinfo, r)) break;
  if (!r) {
    ExecResult result;
    memset(&result, 0, sizeof result);
    TakeParams(fcinfo, owner, &result);
    if (!RunDense(ProgramText{sql, in_place}, owner, &result)) RunSharded(ProgramText{sql, in_place}, owner, &result);
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
  if (PG_ARGISNULL(5) || PG_GETARG_BOOL(5)) PG_RETURN_NULL();  // NULL value: NULL gradient
  if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4)) PG_RETURN_NULL();
  ExecResult *r = ResultFor(fcinfo);
  if (PG_GETARG_INT32(2) == ddx::kLossValue) {  // ddx_value(loss)
    if (r->loss_isnull) PG_RETURN_NULL();
    PG_RETURN_FLOAT8(r->loss);
  }
  GradKey key;
  memset(&key, 0, sizeof key);
  key.toid = PG_GETARG_OID(3);
  key.tid = *(ItemPointer)PG_GETARG_POINTER(4);
  key.pidx = PG_GETARG_INT32(2);
  GradEntry *e = (GradEntry *)hash_search(r->grads, &key, HASH_FIND, NULL);
  PG_RETURN_FLOAT8(e ? e->g : 0.0);
}

// _ddx.grad_key(program, in_place, pidx, table, key, value_is_null [, p1,
// ...]): grad
// of a row that the program identifies by primary key (a Citus table's:
// key is ROW(key columns in attribute order)::text, as in the program).
Datum ddx_grad_key(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(5) || PG_GETARG_BOOL(5)) PG_RETURN_NULL();  // NULL value: NULL gradient
  if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4)) PG_RETURN_NULL();
  ExecResult *r = ResultFor(fcinfo);
  if (!r->keyed) PG_RETURN_FLOAT8(0.0);
  KeyedGrad key;
  key.pidx = PG_GETARG_INT32(2);
  key.key = text_to_cstring(PG_GETARG_TEXT_PP(4));
  KeyedEntry *e = (KeyedEntry *)hash_search(r->keyed, &key, HASH_FIND, NULL);
  pfree((void *)key.key);
  PG_RETURN_FLOAT8(e ? e->g : 0.0);
}

Datum ddx_stop_gradient(PG_FUNCTION_ARGS) { PG_RETURN_FLOAT8(PG_GETARG_FLOAT8(0)); }

}  // extern "C"
