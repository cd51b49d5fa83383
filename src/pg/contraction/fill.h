// The node's groups joined to a fill relation: `Custom Scan (ddx fill)`
// (fill_path.cpp: where it applies, its path and plan; fill_exec.cpp: what
// it does). A program joins each contraction of its backward back to the
// relation whose rows the cotangent belongs to,
//
//   SELECT ... FROM (SELECT g0, g1, sum(...) AS d FROM r JOIN a ON ...
//                    GROUP BY g0, g1) t
//   JOIN f9 a0 ON a0.c0 = t.g0 AND a0.c1 = t.g1
//
// and PostgreSQL hashes one of the two (the node's rows or the fill's) and
// probes with the other. Where the equalities bind every group key of the
// node below t, this node reads the fill's rows instead and finds each
// one's group among the node's by its keys' ids: no row of the node is
// formed or hashed (einfold's GradFold: the fill is the dense kernel's
// natural output; ../shared/NOTES-dense.md).
// t may also be a sum of such nodes' groups (a HashAggregate of
// sum(float8) over an Append of them: the program's summed transposes), each
// fill row's group looked up in every node and added in the Append's order.
#pragma once
#include "contraction.h"

extern "C" {
#include "postgres.h"

#include "optimizer/paths.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so.
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// ddx.contraction_fill (install.cpp): whether the node is considered where
// ddx.contraction lets the contraction node be.
extern bool fill_enabled;

extern const CustomPathMethods kFillPathMethods;
extern const CustomScanMethods kFillScanMethods;
extern const CustomExecMethods kFillExecMethods;

// The set_join_pathlist_hook before the node's (install.cpp), and the node's.
extern set_join_pathlist_hook_type prev_join_hook;
void FillJoinPaths(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel, RelOptInfo *innerrel,
                   JoinType jointype, JoinPathExtraData *extra);

// fill_path.cpp: the plan of the node's path.
Plan *PlanFill(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses, List *custom_plans);

// fill_exec.cpp: the executor's callbacks.
Node *CreateFillState(CustomScan *cs);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
