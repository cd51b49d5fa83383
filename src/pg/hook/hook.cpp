// The post_parse_analyze_hook and the cache of ddx's function OIDs (see README.md in this folder).
//
// Three phases, as in every entry point: PostgreSQL in (walk the Query, read
// catalogs, build IR; catalog calls through PgCall), the core (differentiate,
// emit SQL), PostgreSQL out (rewrite the FuncExpr nodes in place). Every C++
// exception is caught in the shim and raised as ereport after the C++ frames
// are gone, with the position of the grad call.
//
// Why a rewrite into a call with constant arguments: the program text is a
// Const, and the row identity (tableoid, ctid) plain Vars, so the rewritten
// statement survives plan caching, views and plpgsql unchanged; every
// execution runs the program again under its own snapshot (runner.cpp).
#include "internal.h"

namespace ddx::pg {
namespace {

post_parse_analyze_hook_type prev_post_parse_analyze_hook = nullptr;

void ForgetOids(Datum, int, uint32) { oids.valid = false; }

// The schema ddx is installed in (get_extension_schema is static in PG 15).
Oid ExtensionSchema(Oid ext) {
  Relation rel = table_open(ExtensionRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
  SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
  HeapTuple tup = systable_getnext(scan);
  Oid nsp = HeapTupleIsValid(tup) ? ((Form_pg_extension)GETSTRUCT(tup))->extnamespace : InvalidOid;
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return nsp;
}

void PostParseAnalyze(ParseState *pstate, Query *query, JumbleState *jstate) {
  if (prev_post_parse_analyze_hook) prev_post_parse_analyze_hook(pstate, query, jstate);
  if (!IsTransactionState() || !LookupOids()) return;
  PendingError err;  // plain buffers: safe to longjmp over
  Guard(err, [&] {
    // One walk of the statement: the calls of ddx's functions, each with the
    // Query levels around it; most statements have none.
    Collector c;
    PgCall([&] { Collect((Node *)query, &c); });
    if (c.calls.empty() && c.jvps.empty()) return;
    std::vector<Oid> stop;
    for (Oid o : oids.stop)
      if (OidIsValid(o)) stop.push_back(o);
    RewriteStatement(query, c, stop);
  });
  if (err.set) err.Raise(pstate);
}

}  // namespace

DdxOids oids;

bool LookupOids() {
  if (oids.valid) return oids.present;
  DdxOids o{};
  Oid ext = get_extension_oid("ddx", true);
  if (OidIsValid(ext)) {
    char *nsp = get_namespace_name(ExtensionSchema(ext));
    if (nsp) {
      Oid any2[2] = {ANYOID, ANYOID};
      Oid at[6] = {TEXTOID, TEXTOID, INT4OID, OIDOID, TIDOID, BOOLOID};
      Oid f8[1] = {FLOAT8OID};
      o.grad = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("grad"))), 2, any2, true);
      Oid any3[3] = {ANYOID, ANYOID, ANYOID};
      o.vjp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("vjp"))), 3, any3, true);
      o.value = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_value"))), 1, any2, true);
      o.grad_at = LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_at"))), 6, at, true);
      Oid atp[7] = {TEXTOID, TEXTOID, INT4OID, OIDOID, TIDOID, BOOLOID, ANYOID};
      o.grad_at_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_at"))), 7, atp, true);
      Oid key[6] = {TEXTOID, TEXTOID, INT4OID, OIDOID, TEXTOID, BOOLOID};
      o.grad_key =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_key"))), 6, key, true);
      Oid keyp[7] = {TEXTOID, TEXTOID, INT4OID, OIDOID, TEXTOID, BOOLOID, ANYOID};
      o.grad_key_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_key"))), 7, keyp, true);
      Oid jv[2] = {ANYOID, TEXTARRAYOID};
      o.jvp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("jvp"))), 2, jv, true);
      Oid t1[1] = {TEXTOID}, t2[2] = {TEXTOID, ANYOID};
      o.jvp_rows =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_rows"))), 1, t1, true);
      o.jvp_rows_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_rows"))), 2, t2, true);
      Oid hv[3] = {ANYOID, ANYOID, TEXTARRAYOID};
      o.hvp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("hvp"))), 3, hv, true);
      o.jvp_at = LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_at"))), 1, f8, true);
      o.stop[0] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("stop_gradient"))), 1, f8, true);
      o.stop[1] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_stop_gradient"))), 1, f8, true);
      snprintf(o.stop_sql, sizeof o.stop_sql, "%s", quote_qualified_identifier(nsp, "ddx_stop_gradient"));
    }
  }
  o.present = OidIsValid(o.grad) && OidIsValid(o.grad_at) && OidIsValid(o.grad_at_params);
  o.valid = true;
  oids = o;
  return o.present;
}

int StopGradientOids(Oid out[2]) {
  int n = 0;
  if (!LookupOids()) return 0;
  for (Oid o : oids.stop)
    if (OidIsValid(o)) out[n++] = o;
  return n;
}

void InstallHook() {
  prev_post_parse_analyze_hook = post_parse_analyze_hook;
  post_parse_analyze_hook = PostParseAnalyze;
  CacheRegisterSyscacheCallback(PROCOID, ForgetOids, (Datum)0);
}

}  // namespace ddx::pg
