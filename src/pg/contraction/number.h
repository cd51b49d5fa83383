// `Custom Scan (ddx number)`: row_number() OVER () of any input, counted as
// its rows stream through (number_path.cpp: where it applies, its path and
// plan; number_exec.cpp: what it does). A program numbers a step's rows so
// where no key of them is one (its rid); PostgreSQL's WindowAgg keeps each
// row in its partition's buffer (the whole input, one partition) and reads
// it back before it returns it, ~360 ns a row at the MLP's 131,072 rows
// (bench/RESULTS.md). Without PARTITION BY or ORDER BY the number is the
// row's place in the input's order, as the WindowAgg gives it: the same
// rows, the same numbers. (The contraction node numbers its own groups:
// NumberGroups, path.cpp.)
#pragma once
#include "contraction.h"

extern "C" {
#include "postgres.h"

#include "nodes/pathnodes.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so.
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

extern const CustomPathMethods kNumberPathMethods;
extern const CustomScanMethods kNumberScanMethods;
extern const CustomExecMethods kNumberExecMethods;

// number_path.cpp: at the window stage, where the window is one
// row_number() OVER (), the node's path beside PostgreSQL's WindowAgg; and
// the plan of that path.
void NumberRows(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel);
Plan *PlanNumber(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses, List *custom_plans);

// number_exec.cpp: the executor's callbacks.
Node *CreateNumberState(CustomScan *cs);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
