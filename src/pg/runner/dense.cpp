// The runner's side of dense execution (ddx/pg/dense.h): a program's dense
// statement, run in place of the program where ddx.dense is on, one is kept
// for it, and Custom Scan (ddx dense) ran it (its header row says so);
// otherwise the SQL program runs, before any gradient is served.
//
// The statement runs as the SQL program does (ExecuteProgram): read-only
// SPI under the calling statement's snapshot, the programs' settings, a plan
// kept for the session. Only while it is prepared and run is the planner
// hook armed with its text (ArmDense), so only it gets the node.
#include "ddx/pg/dense.h"
#include "internal.h"

namespace ddx::pg {

namespace {

// Whether `td` is the node's: toid, tid, pidx, g, key.
bool DenseColumns(TupleDesc td) {
  static const Oid kTypes[] = {OIDOID, TIDOID, INT4OID, FLOAT8OID, TEXTOID};
  if (td->natts != 5) return false;
  for (int i = 0; i < 5; i++)
    if (TupleDescAttr(td, i)->atttypid != kTypes[i]) return false;
  return true;
}

}  // namespace

bool RunDense(const ProgramText &prog, MemoryContext owner, ExecResult *out) {
  // (statement parameters and Citus tables: KeepDenseProgram keeps no
  // program that reads them; the in-place variant exists only for Citus)
  if (!dense_enabled || out->nparams > 0 || prog.in_place) return false;
  char *statement = DenseStatement(prog.sql);
  if (!statement) return false;
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  volatile int rc = 0;
  volatile bool planned = false;
  const char *volatile before = ArmDense(statement);
  PG_TRY();
  {
    // (the kept plan, planned now where it is not: with the node on top, or
    // the statement does not run, which would read every row for nothing)
    const char *ran = statement;
    bool pushed = false;
    SPIPlanPtr plan = KeptPlanFor(ProgramText{statement, nullptr}, 0, nullptr, &ran, &pushed);
    CachedPlan *cp = SPI_plan_get_cached_plan(plan);
    if (cp) {
      planned = list_length(cp->stmt_list) == 1 && IsDensePlan(linitial_node(PlannedStmt, cp->stmt_list)->planTree);
      ReleaseCachedPlan(cp, CurrentResourceOwner);
    }
    if (planned) rc = ExecuteProgram(ProgramText{statement, nullptr}, out);
  }
  PG_FINALLY();
  { ArmDense(before); }
  PG_END_TRY();
  AtEOXact_GUC(true, nest);
  const char *why = "its plan has no dense node";
  if (planned && rc == SPI_OK_SELECT && SPI_processed >= 1 && DenseColumns(SPI_tuptable->tupdesc)) {
    TupleDesc td = SPI_tuptable->tupdesc;
    HeapTuple first = SPI_tuptable->vals[0];
    bool n_pidx, n_g, n_why;
    Datum pidx = SPI_getbinval(first, td, 3, &n_pidx);
    Datum g = SPI_getbinval(first, td, 4, &n_g);
    Datum reason = SPI_getbinval(first, td, 5, &n_why);
    if (!n_pidx && DatumGetInt32(pidx) == kDenseHeader && !n_g) {
      if (DatumGetFloat8(g) == 1.0) {
        ereport(DEBUG1, (errmsg_internal("ddx: the dense program ran")));
        ReadFinals(owner, out);  // (skips the header: no table, pidx < 0)
        return true;
      }
      why = n_why ? "no reason given" : TextDatumGetCString(reason);
    }
  }
  ereport(DEBUG1, (errmsg_internal("ddx: the dense program did not run (%s); the SQL program runs", why)));
  SPI_finish();
  return false;
}

}  // namespace ddx::pg
