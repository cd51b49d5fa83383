// The C side of ddx's SQL API (ddx--<version>.sql): the shim in front of
// every public function written in SQL or plpgsql, the locks that let one
// session at a time train a run, whether a procedure may commit, and the
// guard on DROP EXTENSION.
//
// Why a shim (ddx_forward): a public function such as ddx_adamw_step is
// declared LANGUAGE C with this symbol, and its body is _ddx.<the same name>
// with the same arguments. The shim calls the body with the caller's own
// call data (arguments, result set, the CALL's transaction context), so the
// body behaves exactly as if it were called itself, and it gives an error
// from inside back as it came, but for the CONTEXT lines of ddx's internal
// frames (PL/pgSQL function _ddx.optimizer_step(text,text,text[],double
// precision,...) line 93 at EXECUTE, and the statements they ran): those are
// dropped, those of the user's own functions inside (a plpgsql helper of the
// loss) and around the call kept. A context line of the shim's own marks
// where the frames inside end.
// Calling it also loads the library, so the hook is in place before the body
// prepares any statement that calls grad (a session without
// shared_preload_libraries).
//
// Why session-level locks for ddx_train: its steps commit one by one, and a
// run must stay one session's between them (two CALLs of one run would
// interleave their steps). A session lock outlives COMMIT; it is released
// when ddx_train ends, and by a transaction callback when a transaction
// aborts while one is held (an error or a cancel ends ddx_train so: nothing
// else can abort while it runs), so that an interrupted run is free again.
//
// C-style C++: no object with a destructor lives in a frame that a
// PostgreSQL error can longjmp over.
#include <cstring>

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "storage/lock.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "catalog/pg_proc.h"

PG_FUNCTION_INFO_V1(ddx_forward);
PG_FUNCTION_INFO_V1(ddx_run_lock);
PG_FUNCTION_INFO_V1(ddx_run_unlock);
PG_FUNCTION_INFO_V1(ddx_params_lock);
PG_FUNCTION_INFO_V1(ddx_nonatomic);
PG_FUNCTION_INFO_V1(ddx_first_time);
PG_FUNCTION_INFO_V1(ddx_library_version);
}

#include "ddx/pg/sql_api.h"

namespace {

// --- the shim ------------------------------------------------------------

struct Forward {
  FmgrInfo target;
  char name[NAMEDATALEN];  // the public function's name (the shim's CONTEXT mark)
};

// The body of public function `self`: _ddx.<its name>(its argument types),
// a function or a procedure as `self` is.
Oid ForwardTarget(Oid self) {
  Oid nsp = get_namespace_oid("_ddx", false);
  HeapTuple tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(self));
  if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for function %u", self);
  Form_pg_proc p = (Form_pg_proc)GETSTRUCT(tp);
  char *name = pstrdup(NameStr(p->proname));
  Oid target = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
                               PointerGetDatum(&p->proargtypes), ObjectIdGetDatum(nsp));
  ReleaseSysCache(tp);
  if (!OidIsValid(target))
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("ddx's SQL objects do not match its library: _ddx.%s is missing", name),
                    errhint("ALTER EXTENSION ddx UPDATE, or DROP EXTENSION ddx and CREATE EXTENSION ddx again.")));
  return target;
}

// Whether a CONTEXT line from inside the call is a user's own frame, kept: a
// plpgsql or SQL function of the user's that ddx's statements called (a
// helper of the loss), which names it. The rest are ddx's own frames (its
// bodies in _ddx, named _ddx.* or ddx_*) and the statements they ran, whose
// text may span lines.
bool UsersLine(const char *line, size_t n) {
  auto starts = [&](const char *p) { return n >= strlen(p) && strncmp(line, p, strlen(p)) == 0; };
  if (starts("PL/pgSQL function ")) return !starts("PL/pgSQL function _ddx.");
  if (starts("SQL function \"")) return !starts("SQL function \"ddx_") && !starts("SQL function \"_ddx");
  return false;
}

// The shim's own CONTEXT line, which splits an error's context in two: the
// lines of the frames inside the call before it, those of the caller's
// frames after it (PostgreSQL runs every frame's callback when an error is
// raised, innermost first).
void MarkShim(void *arg) { errcontext("ddx: %s", static_cast<const char *>(arg)); }

// The error `e` (from the body, copied and flushed) raised again with only
// the user's own frames of its inner CONTEXT lines (UsersLine), without the
// shim's mark, and everything else as it was (ReThrowError).
[[noreturn]] void Reraise(ErrorData *e, const char *mark) {
  if (e->context) {
    StringInfoData kept;
    initStringInfo(&kept);
    bool inner = true;
    const char *p = e->context;
    while (*p) {
      const char *nl = strchr(p, '\n');
      size_t n = nl ? static_cast<size_t>(nl - p) : strlen(p);
      bool is_mark = inner && n == strlen(mark) + 5 && strncmp(p, "ddx: ", 5) == 0 && strncmp(p + 5, mark, n - 5) == 0;
      if (is_mark) {
        inner = false;
      } else if (!inner || UsersLine(p, n)) {
        if (kept.len) appendStringInfoChar(&kept, '\n');
        appendBinaryStringInfo(&kept, p, static_cast<int>(n));
      }
      p += n;
      if (*p == '\n') p++;
    }
    e->context = kept.len ? kept.data : nullptr;
  }
  ReThrowError(e);
}

// The shim's call data for its body, made on its first call (fn_extra).
pg_noinline Forward *ForwardOf(FmgrInfo *self) {
  auto *fw = static_cast<Forward *>(self->fn_extra);
  if (fw) return fw;
  Oid target = ForwardTarget(self->fn_oid);
  fw = static_cast<Forward *>(MemoryContextAllocZero(self->fn_mcxt, sizeof(Forward)));
  fmgr_info_cxt(target, &fw->target, self->fn_mcxt);
  fw->target.fn_expr = self->fn_expr;
  char *name = get_func_name(self->fn_oid);
  strlcpy(fw->name, name ? name : "?", sizeof fw->name);
  self->fn_extra = fw;
  return fw;
}

// --- run locks -----------------------------------------------------------

// An advisory lock on a run, keyed (kRunLockClass, the hash of its name:
// _ddx.run_key) in the current database: pg_locks shows it as classid
// kRunLockClass, objid the key, objsubid 2 (ddx_runs reads it there).
constexpr uint32 kRunLockClass = 0x44445801;  // "DDX" 1

void RunTag(LOCKTAG *tag, int32 key) {
  SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, kRunLockClass, static_cast<uint32>(key), 2);
}

// The runs whose session lock this backend holds (ddx_train's), in
// TopMemoryContext.
List *session_runs = NIL;
bool callback_registered = false;

// An advisory lock on a parameter column (a table's column that a step
// moves), keyed (the table's oid, the column's number) in the current
// database, objsubid 3 in pg_locks (1 and 2 are pg_advisory_lock's): one
// session steps a parameter column at a time (_ddx.params_lock).
void ParamTag(LOCKTAG *tag, Oid table, AttrNumber att) {
  SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, table, static_cast<uint32>(att), 3);
}

// A parameter column's session lock, taken by a step of a run held for the
// session (ddx_train's), released with the run's.
struct ParamLock {
  int32 run;
  Oid table;
  AttrNumber att;
};
List *session_params = NIL;  // of ParamLock *, in TopMemoryContext

// Releases the session locks of the parameter columns of run `run` (all
// runs': all).
void ReleaseSessionParams(bool all, int32 run) {
  ListCell *lc;
  foreach (lc, session_params) {
    ParamLock *p = static_cast<ParamLock *>(lfirst(lc));
    if (!all && p->run != run) continue;
    LOCKTAG tag;
    ParamTag(&tag, p->table, p->att);
    (void)LockRelease(&tag, ExclusiveLock, true);
    pfree(p);
    session_params = foreach_delete_current(session_params, lc);
  }
}

void ReleaseSessionRuns() {
  ListCell *lc;
  foreach (lc, session_runs) {
    LOCKTAG tag;
    RunTag(&tag, lfirst_int(lc));
    (void)LockRelease(&tag, ExclusiveLock, true);
  }
  list_free(session_runs);
  session_runs = NIL;
  ReleaseSessionParams(true, 0);
}

void AbortReleasesRuns(XactEvent event, void *) {
  if ((event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) && session_runs != NIL) ReleaseSessionRuns();
}

// The keys _ddx.first_time has seen in this session, in TopMemoryContext.
List *seen_keys = NIL;

// --- DROP EXTENSION ddx ----------------------------------------------------

ProcessUtility_hook_type prev_process_utility = nullptr;

// Refuses DROP EXTENSION ddx without CASCADE while training runs exist,
// saying what CASCADE drops: every run, its log and the optimizer state
// tables that ddx made in _ddx for each trainer (which PostgreSQL counts as
// objects depending on the extension's schema, and would refuse with a list
// of them).
void RefuseDropWithRuns() {
  Oid ext = get_extension_oid("ddx", true);
  if (!OidIsValid(ext) || !OidIsValid(get_namespace_oid("_ddx", true))) return;
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  // (the extension's owner, who drops it, owns _ddx.run: row-level security
  // does not hide other roles' runs from it)
  int rc = SPI_execute(
      "SELECT (SELECT count(*) FROM _ddx.run)::int4, "
      "(SELECT count(*) FROM pg_catalog.pg_class c WHERE c.relnamespace = '_ddx'::pg_catalog.regnamespace "
      "AND c.relkind IN ('r', 'p') AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d "
      "WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e'))::int4, "
      "(SELECT pg_catalog.string_agg(pg_catalog.quote_literal(x.name), ', ') FROM "
      "(SELECT r.name FROM _ddx.run r ORDER BY r.name LIMIT 5) x)",
      true, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "ddx: could not count the training runs");
  bool isnull;
  int runs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  int tables = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
  char *names = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
  names = names ? pstrdup(names) : pstrdup("");
  SPI_finish();
  if (runs == 0 && tables == 0) return;
  ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
                  errmsg("cannot drop extension ddx because it keeps %d training run%s", runs, runs == 1 ? "" : "s"),
                  errdetail("Schema _ddx holds the runs (%s%s), their logs and %d optimizer state table%s.", names,
                            runs > 5 ? ", ..." : "", tables, tables == 1 ? "" : "s"),
                  errhint("DROP EXTENSION ddx CASCADE drops every run with its state and log; ddx_run_drop(name) "
                          "drops one. The parameter tables and schedules are yours and stay either way.")));
}

void GuardedProcessUtility(PlannedStmt *pstmt, const char *query, bool read_only_tree, ProcessUtilityContext context,
                           ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc) {
  Node *stmt = pstmt->utilityStmt;
  if (IsA(stmt, DropStmt) && castNode(DropStmt, stmt)->removeType == OBJECT_EXTENSION &&
      castNode(DropStmt, stmt)->behavior != DROP_CASCADE) {
    ListCell *lc;
    foreach (lc, castNode(DropStmt, stmt)->objects)
      if (strcmp(strVal(lfirst(lc)), "ddx") == 0) RefuseDropWithRuns();
  }
  if (prev_process_utility)
    prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
  else
    standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

}  // namespace

namespace ddx::pg {

void InstallSqlApi() {
  prev_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = GuardedProcessUtility;
}

}  // namespace ddx::pg

extern "C" {

// The shim of a public function whose body is _ddx.<its name> (see the
// opening comment).
Datum ddx_forward(PG_FUNCTION_ARGS) {
  FmgrInfo *self = fcinfo->flinfo;
  Forward *const fw = ForwardOf(self);
  MemoryContext cxt = CurrentMemoryContext;
  ErrorData *volatile edata = nullptr;
  Datum result = (Datum)0;
  ErrorContextCallback mark;
  mark.callback = MarkShim;
  mark.arg = fw->name;
  mark.previous = error_context_stack;
  error_context_stack = &mark;
  fcinfo->flinfo = &fw->target;
  PG_TRY();
  { result = FunctionCallInvoke(fcinfo); }
  PG_CATCH();
  {
    fcinfo->flinfo = self;
    MemoryContextSwitchTo(cxt);
    edata = CopyErrorData();
    FlushErrorState();
  }
  PG_END_TRY();
  error_context_stack = mark.previous;
  fcinfo->flinfo = self;
  if (edata) Reraise(edata, fw->name);
  return result;
}

// _ddx.run_lock(key int, session boolean) RETURNS boolean: takes the lock of
// the run of that key without waiting, for the transaction or (session)
// until _ddx.run_unlock or an abort; false where another session holds it.
// Taken again by the session that holds it, it is granted (a step of a
// ddx_train).
Datum ddx_run_lock(PG_FUNCTION_ARGS) {
  int32 run_id = PG_GETARG_INT32(0);
  bool session = PG_GETARG_BOOL(1);
  LOCKTAG tag;
  RunTag(&tag, run_id);
  if (session && !callback_registered) {
    RegisterXactCallback(AbortReleasesRuns, nullptr);
    callback_registered = true;
  }
  if (session) {
    ListCell *lc;
    foreach (lc, session_runs)
      if (lfirst_int(lc) == run_id) PG_RETURN_BOOL(true);  // held already
  }
  LockAcquireResult r = LockAcquire(&tag, ExclusiveLock, session, true);
  if (r == LOCKACQUIRE_NOT_AVAIL) PG_RETURN_BOOL(false);
  if (session) {
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    session_runs = lappend_int(session_runs, run_id);
    MemoryContextSwitchTo(old);
  }
  PG_RETURN_BOOL(true);
}

// _ddx.params_lock(run_key int, tables oid[], cols text[]) RETURNS int: takes
// the lock of each parameter column (tables[i], cols[i]) that a step of the
// run of that key moves, without waiting: for the transaction, or for the
// session where the session holds the run (ddx_train: until the run's
// _ddx.run_unlock or an abort, so that no other session steps them between
// its steps). 0, or the position of the first column another session holds
// (the ones before it stay locked until the error that follows ends the
// transaction). A column this session holds already is granted again.
Datum ddx_params_lock(PG_FUNCTION_ARGS) {
  int32 run = PG_GETARG_INT32(0);
  ArrayType *tables = PG_GETARG_ARRAYTYPE_P(1), *cols = PG_GETARG_ARRAYTYPE_P(2);
  Datum *tv, *cv;
  bool *tn, *cn;
  int nt, nc;
  deconstruct_array(tables, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &tv, &tn, &nt);
  deconstruct_array(cols, TEXTOID, -1, false, TYPALIGN_INT, &cv, &cn, &nc);
  if (nt != nc) ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("tables and cols differ in length")));
  bool session = list_member_int(session_runs, run);
  for (int i = 0; i < nt; i++) {
    if (tn[i] || cn[i]) continue;
    Oid table = DatumGetObjectId(tv[i]);
    char *name = TextDatumGetCString(cv[i]);
    AttrNumber att = get_attnum(table, name);
    pfree(name);
    if (att == InvalidAttrNumber) continue;
    bool held = false;
    ListCell *lc;
    foreach (lc, session_params) {
      ParamLock *p = static_cast<ParamLock *>(lfirst(lc));
      held = held || (p->table == table && p->att == att);
    }
    if (held) continue;
    LOCKTAG tag;
    ParamTag(&tag, table, att);
    if (LockAcquire(&tag, ExclusiveLock, session, true) == LOCKACQUIRE_NOT_AVAIL) PG_RETURN_INT32(i + 1);
    if (session) {
      ParamLock *p = static_cast<ParamLock *>(MemoryContextAlloc(TopMemoryContext, sizeof(ParamLock)));
      *p = ParamLock{run, table, att};
      MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
      session_params = lappend(session_params, p);
      MemoryContextSwitchTo(old);
    }
  }
  PG_RETURN_INT32(0);
}

// _ddx.run_unlock(key int): releases the session lock of the run of that key
// (and of the parameter columns its steps took).
Datum ddx_run_unlock(PG_FUNCTION_ARGS) {
  int32 run_id = PG_GETARG_INT32(0);
  ReleaseSessionParams(false, run_id);
  ListCell *lc;
  foreach (lc, session_runs) {
    if (lfirst_int(lc) != run_id) continue;
    LOCKTAG tag;
    RunTag(&tag, run_id);
    (void)LockRelease(&tag, ExclusiveLock, true);
    session_runs = foreach_delete_current(session_runs, lc);
    break;
  }
  PG_RETURN_VOID();
}

// _ddx.nonatomic() RETURNS boolean: whether the procedure calling it may
// COMMIT: CALLed outside a transaction block (not inside BEGIN, not in a
// string of several statements, which runs as one transaction), not from a
// function, and not inside an exception block (a subtransaction).
Datum ddx_nonatomic(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(SPI_inside_nonatomic_context() && !IsSubTransaction()); }

// _ddx.first_time(key text) RETURNS boolean: true the first time this
// session asks about `key`, false after (a NOTICE said once per session).
Datum ddx_first_time(PG_FUNCTION_ARGS) {
  char *key = text_to_cstring(PG_GETARG_TEXT_PP(0));
  ListCell *lc;
  foreach (lc, seen_keys)
    if (strcmp(static_cast<const char *>(lfirst(lc)), key) == 0) PG_RETURN_BOOL(false);
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  seen_keys = lappend(seen_keys, pstrdup(key));
  MemoryContextSwitchTo(old);
  PG_RETURN_BOOL(true);
}

// _ddx.library_version() RETURNS text: the version this library was built
// as (the Makefile's EXTVERSION).
Datum ddx_library_version(PG_FUNCTION_ARGS) { PG_RETURN_TEXT_P(cstring_to_text(DDX_VERSION)); }

}  // extern "C"
