// The planner_hook that keeps PlannedStmt.appendRelations sound where the
// node or the fill planned a subquery twice (planning.h: KeepAppendRels).
//
// PostgreSQL turns each subquery's PlannerInfo into a plan once, and
// set_plan_references relies on it: it adds the subquery's range-table
// offset to the subquery's AppendRelInfos in place and appends them to
// glob->appendRelations (setrefs.c, the same in 15 to 18). The node's
// fallback (PostgreSQL's aggregate over the same children) and the fill's
// (PostgreSQL's join of the same subquery and fill) plan a child a second
// time, and a Subquery Scan in each copy processes its subquery's
// PlannerInfo again: its AppendRelInfos (a UNION ALL inside it: the sum of
// contractions under a fill, or a grouping of one relation over a UNION
// ALL) are offset twice and listed twice. Only EXPLAIN reads the list
// (ruleutils.c, deparse_context_for_plan_tree, which indexes an array of the
// range table's length by each child_relid: past its end, a write into the
// heap, which the node fuzz found); the executor does not (execParallel.c
// drops it for workers). So an AppendRelInfo listed more than once is
// dropped from the list, all its entries: EXPLAIN then names that child
// relation by its own name, where it would have named it by its parent's.
// A plan no ddx node is in never lists one twice: the hook changes nothing
// there.
#include <algorithm>
#include "planning.h"

extern "C" {
#include "postgres.h"

#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
}

namespace ddx::pg::contraction {

namespace {

planner_hook_type prev_planner_hook = nullptr;

// appendRelations without the AppendRelInfos it lists more than once.
List *WithoutRepeated(List *appinfos) {
  int n = list_length(appinfos);
  const void **sorted = static_cast<const void **>(palloc(sizeof(void *) * n));
  int i = 0;
  ListCell *lc;
  foreach (lc, appinfos) sorted[i++] = lfirst(lc);
  std::sort(sorted, sorted + n);
  if (std::adjacent_find(sorted, sorted + n) == sorted + n) {
    pfree(sorted);
    return appinfos;
  }
  List *kept = NIL;
  foreach (lc, appinfos) {
    const void *a = lfirst(lc);
    auto range = std::equal_range(sorted, sorted + n, a);
    if (range.second - range.first == 1) kept = lappend(kept, lfirst(lc));
  }
  pfree(sorted);
  return kept;
}

PlannedStmt *Planner(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params) {
  PlannedStmt *stmt = prev_planner_hook ? prev_planner_hook(parse, query_string, cursor_options, bound_params)
                                        : standard_planner(parse, query_string, cursor_options, bound_params);
  if (list_length(stmt->appendRelations) > 1) stmt->appendRelations = WithoutRepeated(stmt->appendRelations);
  return stmt;
}

}  // namespace

void KeepAppendRels() {
  prev_planner_hook = planner_hook;
  planner_hook = Planner;
}

}  // namespace ddx::pg::contraction
