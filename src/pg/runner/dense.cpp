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

bool RunDense(const ProgramText &prog, MemoryContext owner, ExecResult *out) {
  // (statement parameters and Citus tables: KeepDenseProgram keeps no
  // program that reads them; the in-place variant exists only for Citus)
  if (!dense_enabled || out->nparams > 0 || prog.in_place) return false;
  char *statement = DenseStatement(prog.sql);
  if (!statement) return false;
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ddx: SPI_connect failed");
  int nest = ProgramSettings();
  volatile int rc = 0;
  ArmDense(statement);
  PG_TRY();
  { rc = ExecuteProgram(ProgramText{statement, nullptr}, out); }
  PG_FINALLY();
  { ArmDense(nullptr); }
  PG_END_TRY();
  AtEOXact_GUC(true, nest);
  const char *why = "its plan has no dense node";
  if (rc == SPI_OK_SELECT && SPI_processed >= 1 && SPI_tuptable->tupdesc->natts == 5) {
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
