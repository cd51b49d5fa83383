// Where `Custom Scan (ddx number)` numbers a query's rows, its path and its
// plan (number.h).
#include "fill.h"
#include "number.h"
#include "planning.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "utils/fmgroids.h"
}

namespace ddx::pg::contraction {

namespace {

// Whether n has a window function other than row_number() of the window
// winref (no argument, no FILTER).
bool OtherWindowFunc(Node *n, const Index *winref) {
  if (!n) return false;
  if (IsA(n, WindowFunc)) {
    WindowFunc *w = castNode(WindowFunc, n);
    return w->winfnoid != F_ROW_NUMBER || w->args || w->aggfilter || w->winref != *winref;
  }
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(OtherWindowFunc), const_cast<Index *>(winref));
}

// Whether another extension's custom scan is below p (through the paths
// that read others'). Citus plans a subplan's combine query over its own
// Custom Scan (Citus Adaptive), and its EXPLAIN ANALYZE takes a subplan whose
// top node is a custom scan for its own (multi_explain.c,
// ExtractAnalyzeStats, 13.2): with this node on top it read this node's
// state as Citus's and crashed.
bool ForeignScanBelow(Path *p) {
  if (!p) return false;
  switch (nodeTag(p)) {
    case T_CustomPath: {
      CustomPath *cp = reinterpret_cast<CustomPath *>(p);
      if (cp->methods != &kNumberPathMethods && cp->methods != &kPathMethods && cp->methods != &kFillPathMethods)
        return true;
      ListCell *lc;
      foreach (lc, cp->custom_paths)
        if (ForeignScanBelow(static_cast<Path *>(lfirst(lc)))) return true;
      return false;
    }
    case T_ProjectionPath:
      return ForeignScanBelow(reinterpret_cast<ProjectionPath *>(p)->subpath);
    case T_SortPath:
    case T_IncrementalSortPath:
      return ForeignScanBelow(reinterpret_cast<SortPath *>(p)->subpath);
    case T_MaterialPath:
      return ForeignScanBelow(reinterpret_cast<MaterialPath *>(p)->subpath);
    case T_UniquePath:
      return ForeignScanBelow(reinterpret_cast<UniquePath *>(p)->subpath);
    case T_GatherPath:
      return ForeignScanBelow(reinterpret_cast<GatherPath *>(p)->subpath);
    case T_AggPath:
      return ForeignScanBelow(reinterpret_cast<AggPath *>(p)->subpath);
    case T_GroupingSetsPath:
      return ForeignScanBelow(reinterpret_cast<GroupingSetsPath *>(p)->subpath);
    case T_NestPath:
    case T_MergePath:
    case T_HashPath:
      return ForeignScanBelow(reinterpret_cast<JoinPath *>(p)->outerjoinpath) ||
             ForeignScanBelow(reinterpret_cast<JoinPath *>(p)->innerjoinpath);
    case T_AppendPath: {
      ListCell *lc;
      foreach (lc, reinterpret_cast<AppendPath *>(p)->subpaths)
        if (ForeignScanBelow(static_cast<Path *>(lfirst(lc)))) return true;
      return false;
    }
    default:
      return false;
  }
}

}  // namespace

// The window stage (create_upper_paths_hook, UPPERREL_WINDOW): where the
// query has one window, without PARTITION BY or ORDER BY, and every window
// function of its output is row_number() of it, the node over the input
// PostgreSQL's WindowAgg reads (its subpath: the window's input target), with
// the WindowAgg's output target. Not where the WindowAgg would stop early or
// filter (a run condition: row_number() <= n pushed down into it).
void NumberRows(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel) {
  (void)input_rel;
  Query *parse = root->parse;
  if (list_length(parse->windowClause) != 1) return;
  WindowClause *wc = linitial_node(WindowClause, parse->windowClause);
  if (wc->partitionClause || wc->orderClause) return;
  WindowAggPath *window = nullptr;
  ListCell *lc;
  foreach (lc, output_rel->pathlist) {
    Path *p = static_cast<Path *>(lfirst(lc));
    if (IsA(p, WindowAggPath) && (!window || p->total_cost < window->path.total_cost))
      window = reinterpret_cast<WindowAggPath *>(p);
  }
  if (!window || !window->topwindow || compat::WindowStopsEarly(window) || window->subpath->param_info ||
      ForeignScanBelow(window->subpath))
    return;
  PathTarget *target = window->path.pathtarget;
  Index winref = wc->winref;
  if (OtherWindowFunc(reinterpret_cast<Node *>(target->exprs), &winref)) return;
  Path *in = window->subpath;
  CustomPath *cp = reinterpret_cast<CustomPath *>(newNode(sizeof(CustomPath), T_CustomPath));
  cp->path.pathtype = T_CustomScan;
  cp->path.parent = output_rel;
  cp->path.pathtarget = target;
  cp->path.param_info = nullptr;
  cp->path.parallel_aware = false;
  cp->path.parallel_safe = window->path.parallel_safe;
  cp->path.parallel_workers = 0;
  cp->path.rows = window->path.rows;
  // (the WindowAgg's price less its per-row buffering: a count and the
  // output's expressions per row)
  cp->path.startup_cost = in->startup_cost + target->cost.startup;
  cp->path.total_cost = in->total_cost + target->cost.startup + (cpu_operator_cost + target->cost.per_tuple) * in->rows;
  cp->path.pathkeys = in->pathkeys;  // (the input's order, kept)
  cp->flags = 0;
  cp->custom_paths = list_make1(in);
  cp->methods = &kNumberPathMethods;
  add_path(output_rel, &cp->path);
}

// The plan: the scan tuple is the child's columns, then row_number() (one:
// a query's calls of row_number() over one window are equal), where
// setrefs.c finds the output's columns and its row_number() calls
// (NumberedTargets).
Plan *PlanNumber(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses, List *custom_plans) {
  (void)root;
  (void)rel;
  (void)clauses;
  CustomScan *cs = makeNode(CustomScan);
  cs->scan.plan.targetlist = tlist;
  cs->scan.plan.qual = NIL;
  cs->scan.scanrelid = 0;
  cs->flags = best->flags;
  cs->methods = &kNumberScanMethods;
  cs->custom_plans = custom_plans;
  Plan *child = static_cast<Plan *>(linitial(custom_plans));
  List *scan = NIL;
  AttrNumber resno = 1;
  ListCell *lc;
  foreach (lc, child->targetlist)
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst_node(TargetEntry, lc)->expr)),
                                         resno++, nullptr, false));
  Expr *number;
  cs->scan.plan.targetlist = NumberedTargets(tlist, &number);
  scan = lappend(scan, makeTargetEntry(number, resno, nullptr, false));
  cs->custom_scan_tlist = scan;
  cs->custom_private = NIL;
  return &cs->scan.plan;
}

const CustomPathMethods kNumberPathMethods = {"ddx number", PlanNumber};

}  // namespace ddx::pg::contraction
