// The statistics of a program's CTE columns (get_relation_stats_hook), so
// that the planner estimates a program's steps from their keys' numbers of
// distinct values instead of its defaults.
//
// A program is a chain of CTEs, and PostgreSQL has no statistics for a CTE's
// columns: 15 looks none up (selfuncs.c, examine_simple_variable), 17 and 18
// follow a column into the CTE's query only where that query is not grouped
// (a grouped CTE's column is at most unique, where it is the only group key).
// Without them every key has 200 distinct values (DEFAULT_NUM_DISTINCT), a
// join of two steps on three keys is estimated at 1/200³ of their product,
// CTE scans of 33,792 rows at one row, and hash joins hash the larger input
// (bench/RESULTS.md, "The program's row estimates").
//
// A program's keys are the parameter and data tables' key columns carried
// from step to step: a join passes them through, a grouping by them keeps
// each of their values once. So for a CTE column that is, through the CTE's
// queries (their group keys and plain columns, never an aggregate's or an
// expression's result), a column of a table, the hook gives the table's
// number of distinct values of it, as a count (a fraction of the table's rows
// would be wrong after a join or a grouping), with its null fraction and
// width; no most-common values or histogram, which a join or a filter
// changes. It is an estimate as PostgreSQL's own following of a subquery's
// column is: the CTE may hold fewer of the values (a filter, a join), and
// estimate_num_groups and the join selectivities clamp it to the CTE's rows.
//
// While a program is planned (ddx.in_program, set by ProgramSettings), and
// in every statement under ddx.contraction = 'all', the setting by which a
// user asks for ddx's planning of model queries in their own statements: a
// user's loss over a chain of CTEs is a program's shape, planned by
// PostgreSQL on its estimates of one or two rows a CTE into nested loops
// over what are thousands (the GPT's loss at the demo's size: 754 ms with
// the node and PostgreSQL's estimates, 103 with these; bench/RESULTS.md).
// Otherwise a user's own statements keep PostgreSQL's estimates: only
// estimates change, never a result, but a plan the user has tuned stays
// as it was. No value of a table reaches the planner this way (no
// most-common values, no histogram), so the statistics' privilege test
// (acl_ok) has nothing to protect: a table's number of distinct values is
// what PostgreSQL's own estimates of a query over it already use.
#include "internal.h"

#include "ddx/pg/contraction_node.h"

extern "C" {
#include "catalog/pg_statistic.h"
#include "nodes/pathnodes.h"
#include "optimizer/tlist.h"
#include "parser/parse_clause.h"
#include "parser/parsetree.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"
}

namespace ddx::pg {

namespace {

get_relation_stats_hook_type prev_stats_hook = nullptr;

// The planner's subroot of a CTE reference (as examine_simple_variable finds
// it), or NULL where it has not been planned yet (a CTE read by another CTE
// is planned before its reader, so this is rare).
PlannerInfo *CteSubroot(PlannerInfo *root, RangeTblEntry *rte) {
  PlannerInfo *cteroot = root;
  for (Index up = rte->ctelevelsup; up > 0; up--) {
    cteroot = cteroot->parent_root;
    if (!cteroot) return nullptr;
  }
  int ndx = 0;
  ListCell *lc;
  foreach (lc, cteroot->parse->cteList) {
    if (strcmp(lfirst_node(CommonTableExpr, lc)->ctename, rte->ctename) == 0) break;
    ndx++;
  }
  if (lc == nullptr || ndx >= list_length(cteroot->cte_plan_ids)) return nullptr;
  int plan_id = list_nth_int(cteroot->cte_plan_ids, ndx);
  if (plan_id <= 0) return nullptr;
  return static_cast<PlannerInfo *>(list_nth(root->glob->subroots, plan_id - 1));
}

// The planner's subroot of the query an RTE of `root` reads (a CTE or a
// subquery in FROM), NULL for any other entry or one not planned.
PlannerInfo *Subroot(PlannerInfo *root, Index varno, RangeTblEntry *rte) {
  if (rte->rtekind == RTE_CTE && !rte->self_reference) return CteSubroot(root, rte);
  if (rte->rtekind == RTE_SUBQUERY && !rte->inh && varno < static_cast<Index>(root->simple_rel_array_size) &&
      root->simple_rel_array[varno] != nullptr)
    return root->simple_rel_array[varno]->subroot;
  return nullptr;
}

// The table column that column `attno` of the query planned as `subroot`
// carries, following plain columns and group keys through CTEs and
// subqueries: its relation's OID (InvalidOid where there is none), attnum,
// `inh` and the relation's row count as the planner has it.
struct TableColumn {
  Oid relid = InvalidOid;
  AttrNumber attnum = 0;
  bool inh = false;
  double tuples = 0;
};

TableColumn Follow(PlannerInfo *subroot, AttrNumber attno, int depth) {
  TableColumn none;
  if (subroot == nullptr || depth > 64) return none;
  Query *q = subroot->parse;
  // Set operations and grouping sets mix their inputs' columns; a security
  // barrier is not looked through (as PostgreSQL does not).
  if (q->setOperations || q->groupingSets) return none;
  List *tlist = q->returningList ? q->returningList : q->targetList;
  TargetEntry *tle = get_tle_by_resno(tlist, attno);
  if (tle == nullptr || tle->resjunk) return none;
  // A grouped (or DISTINCT) query's column is a group key or an aggregate's
  // result; a key keeps its input's values, each once.
  if (q->groupClause && !targetIsInSortList(tle, InvalidOid, q->groupClause)) return none;
  if (q->distinctClause && !targetIsInSortList(tle, InvalidOid, q->distinctClause)) return none;
  ::Expr *e = tle->expr;
  while (e && IsA(e, RelabelType)) e = reinterpret_cast<RelabelType *>(e)->arg;
  if (e == nullptr || !IsA(e, Var)) return none;
  Var *v = reinterpret_cast<Var *>(e);
  if (v->varlevelsup != 0 || v->varattno <= 0 || v->varno < 1 || v->varno >= subroot->simple_rel_array_size)
    return none;
  RangeTblEntry *rte = subroot->simple_rte_array[v->varno];
  if (rte == nullptr || rte->security_barrier) return none;
  if (rte->rtekind == RTE_RELATION) {
    RelOptInfo *rel = subroot->simple_rel_array[v->varno];
    TableColumn col;
    col.relid = rte->relid;
    col.attnum = v->varattno;
    col.inh = rte->inh;
    col.tuples = rel ? rel->tuples : 0;
    return col;
  }
  return Follow(Subroot(subroot, v->varno, rte), v->varattno, depth + 1);
}

void FreeStats(HeapTuple tuple) { heap_freetuple(tuple); }

// get_relation_stats_hook: for a program's CTE (or subquery) column that
// carries a table's column, a copy of that column's pg_statistic row with its
// number of distinct values as a count and no slots (above).
bool ProgramColumnStats(PlannerInfo *root, RangeTblEntry *rte, AttrNumber attnum, VariableStatData *vardata) {
  if (prev_stats_hook && prev_stats_hook(root, rte, attnum, vardata)) return true;
  if (!(InProgram() || ContractionEverywhere()) || attnum <= 0 ||
      !(rte->rtekind == RTE_CTE || rte->rtekind == RTE_SUBQUERY))
    return false;
  // The hook is given the RTE, not its index; a subquery's planned subroot
  // hangs off its RelOptInfo, found by the index.
  Index varno = 0;
  for (Index i = 1; i < static_cast<Index>(root->simple_rel_array_size); i++)
    if (root->simple_rte_array[i] == rte) varno = i;
  if (varno == 0) return false;
  TableColumn col = Follow(Subroot(root, varno, rte), attnum, 0);
  if (col.relid == InvalidOid) return false;
  HeapTuple found =
      SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(col.relid), Int16GetDatum(col.attnum), BoolGetDatum(col.inh));
  if (!HeapTupleIsValid(found)) return false;
  HeapTuple stats = heap_copytuple(found);
  ReleaseSysCache(found);
  auto *form = reinterpret_cast<Form_pg_statistic>(GETSTRUCT(stats));
  double distinct = form->stadistinct;
  if (distinct < 0) distinct = col.tuples > 0 ? std::floor(-distinct * col.tuples + 0.5) : 0;
  if (!(distinct >= 1)) {
    heap_freetuple(stats);
    return false;
  }
  form->stadistinct = static_cast<float4>(distinct);
  form->stakind1 = form->stakind2 = form->stakind3 = form->stakind4 = form->stakind5 = 0;
  vardata->statsTuple = stats;
  vardata->freefunc = FreeStats;
  vardata->acl_ok = true;
  return true;
}

}  // namespace

void InstallProgramEstimates() {
  prev_stats_hook = get_relation_stats_hook;
  get_relation_stats_hook = ProgramColumnStats;
}

}  // namespace ddx::pg
