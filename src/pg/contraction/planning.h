// What the planner's files of the contraction node share (shape.cpp,
// path.cpp, plan.cpp, install.cpp): the path that carries the plan, the
// refusal a check returns, and the planner's entry points.
#pragma once
#include "contraction.h"

extern "C" {
#include "postgres.h"

#include "nodes/pathnodes.h"
#include "optimizer/planner.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so.
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// The create_upper_paths_hook before the node's (install.cpp).
extern create_upper_paths_hook_type prev_upper_hook;

// The node's path: a CustomPath carrying the plan it stands for.
struct ContractionPath {
  CustomPath path;
  ContractionPlan plan;
};

// Why a query keeps PostgreSQL's plan: the value a check returns where it
// decides, for its caller to log, show or pass on (as Citus's deferred
// errors). A refusal is true; kFits, the check passed, is false.
struct Refusal {
  const char *why;  // a string literal, or nullptr: no refusal
  explicit operator bool() const { return why != nullptr; }
};
constexpr Refusal kFits{nullptr};

// Whether evaluating n might raise an error (not leakproof).
bool MayRaise(Node *n);

// The plan of the query over the split into `sides` joined by `clauses`,
// into *p in the split's order: its join keys, group keys, other join
// conditions and the aggregates of `target`; or why the node cannot compute
// it (shape.cpp: the checks that decide).
Refusal ShapeOf(PlannerInfo *root, List *clauses, const Relids sides[2], PathTarget *target, ContractionPlan *p);

// path.cpp: the planner hook. NumberGroups's walkers read the node's group
// keys and sums and the window's winref, and collect the row_number()
// calls in wfuncs; WindowFuncs collects every WindowFunc of n there (plan.cpp
// takes the one the node numbers its groups with).
struct NumberCtx {
  List *gexprs, *aggrefs, *wfuncs;
  Index winref;
};
bool WindowFuncs(Node *n, NumberCtx *ctx);
// The plan of a node that numbers rows itself (NumberGroups, `ddx number`):
// its target list with each row_number() a call of the function (a FuncExpr,
// never evaluated), and that call for the scan tuple's last column, where
// setrefs.c matches the target's calls (equal) and turns them into the
// column. As a WindowFunc, EXPLAIN VERBOSE deparsed it by looking for its
// WindowAgg, which 18 requires ("could not find window clause"); as a call
// it reads `row_number()`.
List *NumberedTargets(List *tlist, Expr **number);
void ContractionUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel, RelOptInfo *output_rel,
                           void *extra);

// The contraction under a subquery rel's path p: a Subquery Scan whose
// path is the node's (under a projection, at most); or null (path.cpp).
const ContractionPlan *ContractionUnder(Path *p);

// appendrels.cpp: the planner_hook that drops from a plan's appendRelations
// the AppendRelInfos that a second plan of a subquery (the node's and the
// fill's fallbacks) offset twice; installed by InstallContraction.
void KeepAppendRels();

// plan.cpp: the plan of the node's path.
Plan *PlanContraction(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses,
                      List *custom_plans);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
