// _ddx.jvp_rows and _ddx.explain_program: set-returning functions that run
// what the runner runs, as it runs it (see README.md in this folder).
#include "ddx/pg/dense.h"
#include "internal.h"

extern "C" {
PG_FUNCTION_INFO_V1(ddx_jvp_rows);
PG_FUNCTION_INFO_V1(ddx_explain_program);
}

using namespace ddx::pg;

extern "C" {

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
  int rc = ExecuteProgram(ProgramText{sql, nullptr}, &params);
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
// program (a WITH query, and in_place its variant over Citus tables in
// place, or NULL).
Datum ddx_explain_program(PG_FUNCTION_ARGS) {
  ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
  if (!rsinfo || !IsA(rsinfo, ReturnSetInfo) || !(rsinfo->allowedModes & SFRM_Materialize))
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ddx_explain_program must be called in FROM")));
  if (PG_ARGISNULL(0) || PG_ARGISNULL(2)) PG_RETURN_NULL();
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  char *in_place = PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1));
  char *options = text_to_cstring(PG_GETARG_TEXT_PP(2));
  for (const char *c = options; *c; c++)
    if (!isalpha((unsigned char)*c) && *c != ',' && *c != ' ' && *c != '_')
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid EXPLAIN options \"%s\"", options)));
  if (pg_strncasecmp(sql, "WITH ", 5) != 0 || (in_place && pg_strncasecmp(in_place, "WITH ", 5) != 0))
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
  if (in_place && citus_in_place) {
    SPIPlanPtr plan = PlanInPlace(in_place, 0, NULL);
    if (plan) {
      SPI_freeplan(plan);
      text = in_place;
      pushed = true;
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
  // where the runner would run the program's dense statement (RunDense),
  // that statement, planned with the node (the planner sees the whole
  // EXPLAIN text: that is what is armed)
  char *dense = !in_place && dense_enabled ? DenseStatement(sql) : nullptr;
  StringInfoData q;
  initStringInfo(&q);
  appendStringInfo(&q, "EXPLAIN (%s) %s", options, dense ? dense : text);
  // not read-only: SPI refuses a utility statement there (CommandIsReadOnly)
  volatile int rc = 0;
  const char *volatile before = dense ? ArmDense(q.data) : nullptr;
  PG_TRY();
  { rc = SPI_execute(q.data, false, 0); }
  PG_FINALLY();
  {
    if (dense) ArmDense(before);
  }
  PG_END_TRY();
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
