// Dense execution of a gradient program (src/pg/dense/, issue 38): the
// loss's dense program (include/ddx/dense/program.h) run by Custom Scan
// (ddx dense) over the scans of the tables it reads, where ddx.dense is on
// and the program compiles; the SQL program otherwise, and wherever the node
// refuses (a NULL, a duplicate key, memory past the limit, a float error).
//
// The path of one program, from statement to gradient:
//   1. the hook (grad_rewrite.cpp) compiles the loss and keeps the program
//      under the SQL program's text (KeepDenseProgram);
//   2. the runner, on a program's first call in an execution, looks that
//      text up and runs the program's dense statement (DenseStatement) in
//      place of the SQL program, through SPI as it runs any program;
//   3. the dense statement is a UNION ALL of one scan per table the loss
//      reads, and the planner hook puts the node above its plan (only while
//      the runner plans it: ArmDense);
//   4. the node reads its child's rows, runs the program, and returns the
//      rows a program's finals return, after a first row that says whether
//      it ran (the runner runs the SQL program where it did not).
#pragma once

#include <string>

#include "ddx/core/ir.h"

struct Plan;  // (PostgreSQL's)

namespace ddx::pg {

extern bool dense_enabled;  // ddx.dense

// Keeps the dense program of `loss` under its SQL program's text `sql`,
// where it compiles (and the loss reads no statement parameter and no
// Citus table), and returns ""; else returns why not. Pure C++: never
// throws, no PostgreSQL call, so the hook may call it anywhere.
std::string KeepDenseProgram(const std::string &sql, const RelP &loss, bool reads_params) noexcept;

// The dense statement kept for SQL program `sql`, palloc'd in the current
// memory context, or NULL where there is none, or where a column it reads
// no longer has the type it was compiled for (the program is then dropped).
// PostgreSQL calls only.
char *DenseStatement(const char *sql);

// Arms the planner hook with `statement` (NULL: none), which must stay valid
// until the previous arm, returned, is put back: the hook plans only that
// text with the node (the runner's statement, as it prepares or runs it).
const char *ArmDense(const char *statement);

// Whether `plan` (a PlannedStmt's planTree) is the dense node.
bool IsDensePlan(const ::Plan *plan);

// The first row of the node's result: pidx kDenseHeader, g 1 where the dense
// program ran (its rows follow), 0 where it refused (key: why).
constexpr int kDenseHeader = -5;

// ddx.dense, the node's methods and its planner hook; from _PG_init.
void InstallDense();

}  // namespace ddx::pg
