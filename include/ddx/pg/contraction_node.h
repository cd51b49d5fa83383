// The contraction node (src/pg/contraction/, whose README.md says what it
// is): a CustomScan for a grouped SUM of products over an equi-join, chosen
// by the planner where ddx.contraction allows it. What the rest of ddx uses
// of it.
#pragma once

namespace ddx::pg {

// Defines ddx.contraction and installs the planner and EXPLAIN hooks; from
// _PG_init.
void InstallContraction();

// Whether ddx's programs run with the node (ddx.contraction is not off): the
// program the hook builds depends on it (program.h). A changed setting
// invalidates cached plans, whose statements are then analysed again, with
// the hook (plancache.c: RevalidateCachedQuery).
bool ContractionInPrograms();

// Whether one of ddx's programs is being planned or run (ddx.in_program,
// set by the runner's ProgramSettings).
bool InProgram();

// Whether ddx.contraction = 'all': the user has asked for ddx's planning of
// grouped sums of products in every query, the program's estimates of CTE
// columns (src/pg/runner/estimates.cpp) included.
bool ContractionEverywhere();

}  // namespace ddx::pg
