// What differs between the PostgreSQL majors ddx supports (15, 17 and 18),
// in one place, behind PG_VERSION_NUM, as Citus's pg_version_compat.h and
// pg_duckdb's pgduckdb_pg_compat.h keep theirs: the code calls these and
// never tests a version itself. (16 changed most of what is here; it builds
// with the 16+ branches but is not tested.)
#pragma once

extern "C" {
#include "postgres.h"

#include "commands/explain.h"
#include "nodes/parsenodes.h"
#include "nodes/pathnodes.h"
#include "parser/parsetree.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif
#if PG_VERSION_NUM >= 180000
#include "access/cmptype.h"
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#include "rewrite/rewriteManip.h"
#else
#include "access/stratnum.h"
#include "executor/instrument.h"
#include "tcop/tcopprot.h"
#endif
}

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "ddx supports PostgreSQL 15, 17 and 18"
#endif

namespace ddx::pg::compat {

// A (possibly qualified) name as a list of String nodes; an error raises
// (16 added a soft-error context, which ddx does not use).
inline List *QualifiedNameList(const char *name) {
#if PG_VERSION_NUM >= 160000
  return stringToQualifiedNameList(name, nullptr);
#else
  return stringToQualifiedNameList(name);
#endif
}

// A relation's RTE that ddx turns into a function or a subquery no longer
// asks for permissions of its own: in 16+ they live in the query's
// rteperminfos (which the planner keeps only for entries an RTE still points
// to), before that in the RTE itself.
inline void ForgetPermissions(RangeTblEntry *rte) {
#if PG_VERSION_NUM >= 160000
  rte->perminfoindex = 0;
#else
  rte->requiredPerms = 0;
  rte->checkAsUser = InvalidOid;
  rte->selectedCols = rte->insertedCols = rte->updatedCols = rte->extraUpdatedCols = nullptr;
#endif
}

// `inner`, a copy of `outer` (a relation of `from`) as the only relation of
// the new query `to`, asks for the permissions `outer` asked for: in 16+ a
// copy of its RTEPermissionInfo in `to`'s list, before that the RTE's own
// fields, already copied.
inline void MovePermissions(Query *from, RangeTblEntry *outer, Query *to, RangeTblEntry *inner) {
#if PG_VERSION_NUM >= 160000
  if (outer->perminfoindex == 0) return;
  RTEPermissionInfo *p =
      static_cast<RTEPermissionInfo *>(copyObjectImpl(getRTEPermissionInfo(from->rteperminfos, outer)));
  to->rteperminfos = list_make1(p);
  inner->perminfoindex = 1;
#else
  (void)from;
  (void)outer;
  (void)to;
  (void)inner;
#endif
}

// The equalities implied by equivalence classes between an inner join's two
// sides (16 added the outer join's SpecialJoinInfo: none for an inner join).
inline List *JoinImpliedEqualities(PlannerInfo *root, Relids join_relids, Relids outer_relids, RelOptInfo *inner) {
#if PG_VERSION_NUM >= 160000
  return generate_join_implied_equalities(root, join_relids, outer_relids, inner, nullptr);
#else
  return generate_join_implied_equalities(root, join_relids, outer_relids, inner);
#endif
}

// The GROUP BY clause the planner groups by: from 16 on, the query's own
// without the keys it found redundant (a key equal to a constant, one that
// a primary key grouped by determines); in 15 the query's, which
// remove_useless_groupby_columns edits in place. Paths of a grouping must
// use it: the grouping's input target labels only its keys.
inline List *GroupClause(const PlannerInfo *root) {
#if PG_VERSION_NUM >= 160000
  return root->processed_groupClause;
#else
  return root->parse->groupClause;
#endif
}

// A grouping column as the rows below the grouping have it: 18 marks a
// GROUPING SETS query's grouping columns above the grouping (the target
// list, processed_tlist) as nulled by the grouping step (RTE_GROUP,
// root->group_rtindex), and the grouping's input target has them unmarked
// (make_group_input_target); before 18 there is no such mark.
inline Node *BelowGrouping(const PlannerInfo *root, Node *n) {
#if PG_VERSION_NUM >= 180000
  if (root->group_rtindex > 0 && root->parse->groupingSets)
    return remove_nulling_relids(n, bms_make_singleton(root->group_rtindex), nullptr);
#endif
  (void)root;
  return n;
}

// Whether PostgreSQL's WindowAgg path stops early or filters its rows: a run
// condition (row_number() <= n pushed down; 16 moved it from the
// WindowClause to the path) or a lower window's qual.
inline bool WindowStopsEarly(const WindowAggPath *p) {
#if PG_VERSION_NUM >= 160000
  return p->qual != NIL || p->runCondition != NIL;
#else
  return p->qual != NIL || p->winclause->runCondition != NIL;
#endif
}

// A WindowAgg path without run condition or qual (16 moved the run condition
// from the WindowClause to an argument; ddx's paths have none).
inline WindowAggPath *WindowAggPathOf(PlannerInfo *root, RelOptInfo *rel, Path *subpath, PathTarget *target,
                                      List *window_funcs, WindowClause *wc) {
#if PG_VERSION_NUM >= 160000
  return create_windowagg_path(root, rel, subpath, target, window_funcs, NIL, wc, NIL, true);
#else
  return create_windowagg_path(root, rel, subpath, target, window_funcs, wc, NIL, true);
#endif
}

// Whether the btree ordering operator `sortop` sorts descending; false in
// *ok when it is no btree ordering operator (18 names the strategy by a
// CompareType).
inline bool OrderingIsDescending(Oid sortop, bool *ok) {
  Oid opfamily, opcintype;
#if PG_VERSION_NUM >= 180000
  CompareType cmp;
  *ok = get_ordering_op_properties(sortop, &opfamily, &opcintype, &cmp);
  return *ok && cmp == COMPARE_GT;
#else
  int16 strategy;
  *ok = get_ordering_op_properties(sortop, &opfamily, &opcintype, &strategy);
  return *ok && strategy == BTGreaterStrategyNumber;
#endif
}

// The grouping expression a Var of a grouped query's target list or HAVING
// stands for: 18 gives GROUP BY's expressions a range-table entry of their
// own (RTE_GROUP) and points such Vars at it, where 15 and 17 leave the
// expression itself. nullptr for any other Var.
inline Node *GroupedExprOf(const Query *q, const Var *v) {
#if PG_VERSION_NUM >= 180000
  if (v->varlevelsup != 0 || v->varno < 1 || static_cast<int>(v->varno) > list_length(q->rtable)) return nullptr;
  RangeTblEntry *rte = rt_fetch(v->varno, q->rtable);
  if (rte->rtekind != RTE_GROUP || v->varattno < 1 || v->varattno > list_length(rte->groupexprs)) return nullptr;
  return static_cast<Node *>(list_nth(rte->groupexprs, v->varattno - 1));
#else
  (void)q;
  (void)v;
  return nullptr;
#endif
}

// What EXPLAIN does with a query when no hook is set: plan it, timed, and
// explain the plan. 17 exports it; 15's explain.c keeps it static, so here
// is its body as 15 has it.
inline void StandardExplainOneQuery(Query *query, int cursor_options, IntoClause *into, ExplainState *es,
                                    const char *query_string, ParamListInfo params, QueryEnvironment *query_env) {
#if PG_VERSION_NUM >= 170000
  standard_ExplainOneQuery(query, cursor_options, into, es, query_string, params, query_env);
#else
  instr_time planstart, planduration;
  BufferUsage bufusage_start, bufusage;
  if (es->buffers) bufusage_start = pgBufferUsage;
  INSTR_TIME_SET_CURRENT(planstart);
  PlannedStmt *plan = pg_plan_query(query, query_string, cursor_options, params);
  INSTR_TIME_SET_CURRENT(planduration);
  INSTR_TIME_SUBTRACT(planduration, planstart);
  if (es->buffers) {
    memset(&bufusage, 0, sizeof(BufferUsage));
    BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufusage_start);
  }
  ExplainOnePlan(plan, into, es, query_string, params, query_env, &planduration, es->buffers ? &bufusage : nullptr);
#endif
}

}  // namespace ddx::pg::compat
