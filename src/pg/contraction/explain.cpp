// What EXPLAIN says of the node: what it computes (its plan, read through
// FromPrivate) and, with ANALYZE, what it did (exec.h);
// and, under ddx.contraction = all, why a grouping of a join of the
// statement is not the node's: one line "Contraction Refused: <reasons>" per
// grouping so refused, in planning order (ExplainWithRefusals).
#include "exec.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "commands/explain.h"
#include "executor/instrument.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "portability/instr_time.h"
#include "tcop/tcopprot.h"
#include "utils/ruleutils.h"
}

namespace ddx::pg::contraction {

namespace {

// The refusals kept while a statement is explained: those of the groupings
// of joins of `query`, its subqueries and CTEs (planned with it), one line
// each. Statements planned while it runs (EXPLAIN ANALYZE of a function that
// runs queries of its own) have other Query trees, and keep nothing here.
struct RefusalLog {
  const Query *query;
  MemoryContext cxt;  // the lines'
  List *lines;
};

// The innermost statement being explained (EXPLAIN may nest: a function that
// EXPLAIN ANALYZE runs may explain a statement of its own), or null.
RefusalLog *explaining = nullptr;

// The lines, after the statement's plan: in text, one "Contraction Refused"
// line each; in JSON, YAML and XML, one more object beside the statement's
// ("Query"), {"Contraction Refused": [lines]}.
void ShowRefusals(List *lines, ExplainState *es) {
  if (!lines) return;
  if (es->format == EXPLAIN_FORMAT_TEXT) {
    ListCell *lc;
    foreach (lc, lines) ExplainPropertyText("Contraction Refused", static_cast<const char *>(lfirst(lc)), es);
    return;
  }
  ExplainOpenGroup("Contraction", nullptr, true, es);
  ExplainPropertyList("Contraction Refused", lines, es);
  ExplainCloseGroup("Contraction", nullptr, true, es);
}

}  // namespace

void KeepRefusals(const Query *query, const char *const *why, int n) {
  if (!explaining || explaining->query != query || n == 0) return;
  MemoryContext old = MemoryContextSwitchTo(explaining->cxt);
  StringInfoData line;
  initStringInfo(&line);
  for (int i = 0; i < n; i++) appendStringInfo(&line, "%s%s", i ? "; " : "", why[i]);
  explaining->lines = lappend(explaining->lines, line.data);
  MemoryContextSwitchTo(old);
}

void ExplainWithRefusals(Query *query, int cursorOptions, IntoClause *into, ExplainState *es, const char *queryString,
                         ParamListInfo params, QueryEnvironment *queryEnv) {
  RefusalLog log = {query, CurrentMemoryContext, NIL};
  RefusalLog *outer = explaining;
  explaining = &log;
  PG_TRY();
  {
    if (prev_explain_hook)
      prev_explain_hook(query, cursorOptions, into, es, queryString, params, queryEnv);
    else
      compat::StandardExplainOneQuery(query, cursorOptions, into, es, queryString, params, queryEnv);
  }
  PG_FINALLY();
  { explaining = outer; }
  PG_END_TRY();
  if (mode == kAll) ShowRefusals(log.lines, es);
}

// ExplainCustomScan: the node's join and group keys, its aggregates by
// kind, what it does besides (numbering, lazy factors, key conditions);
// with ANALYZE, its rows, pairs, groups, accumulator and peak memory, or
// that it fell back.
void Explain(CustomScanState *node, List *ancestors, ExplainState *es) {
  State *st = reinterpret_cast<State *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  ContractionPlan plan;
  FromPrivate(cs->custom_private, &plan);
  ExplainPropertyInteger("Join Keys", nullptr, list_length(plan.join_keys[kBuild]), es);
  ExplainPropertyInteger("Group Keys", nullptr, list_length(plan.group_keys), es);
  if (plan.sets) ExplainPropertyInteger("Grouping Sets", nullptr, list_length(plan.sets), es);
  // Each kind's EXPLAIN property, with how many aggregates are of a kind
  // that has it: "Sums" always, the others where there are some.
  const char *labels[] = {"Sums", "Counts", "Averages", "Maxima", "Minima"};
  for (const char *label : labels) {
    int n = 0;
    ListCell *lc;
    foreach (lc, plan.accs) n += strcmp(AccOps(static_cast<const AccSpec *>(lfirst(lc))->kind).explain, label) == 0;
    if (n || label == labels[0]) ExplainPropertyInteger(label, nullptr, n, es);
  }
  int npair = 0;
  ListCell *pc;
  foreach (pc, plan.pair_terms) npair += lfirst(pc) != nullptr;
  if (npair) ExplainPropertyInteger("Pair Terms", nullptr, npair, es);
  if (plan.numbered) ExplainPropertyText("Numbered", "row_number() OVER (), as emitted", es);
  // (pair terms keep the build rows whole, their factors computed with them:
  // not because they may raise)
  if (plan.lazy_factors)
    ExplainPropertyText("Build Factors",
                        npair ? "computed on a row's first pair (the row kept for the pair terms)"
                              : "computed on a row's first pair (they may raise)",
                        es);
  if (List *quals = plan.key_quals) {
    // (deparsed against the node's scan tuple, whose columns are the keys)
    List *ctx = set_deparse_context_plan(es->deparse_cxt, &cs->scan.plan, ancestors);
    ExplainPropertyText("Key Condition",
                        deparse_expression(reinterpret_cast<Node *>(make_ands_explicit(quals)), ctx, true, false), es);
  }
  if (es->analyze) {
    if (st->fellback) {
      ExplainPropertyText("Fell Back", "memory limit reached: PostgreSQL's aggregate ran", es);
    } else if (!st->built && node->ss.ps.worker_instrument) {
      // (run in a parallel worker only: this is the leader's state, and the
      // node shares none of its counts with it)
      ExplainPropertyText("Ran In", "parallel workers, whose counts and memory are not shown", es);
      return;
    } else {
      ExplainPropertyInteger("Build Rows", nullptr, st->nrows, es);
      ExplainPropertyFloat("Pairs", nullptr, st->pairs, 0, es);
      int64 groups = st->groups.n - st->groups.rejected;
      for (int set = 0; set < st->nsets; set++) groups += st->sets[set].keys.n;
      ExplainPropertyInteger("Groups", nullptr, groups, es);
      ExplainPropertyText("Accumulator", st->dense.how, es);
      // (the Subquery Scan below shows itself never executed: ReadThrough)
      if (st->through[kBuild] || st->through[kProbe])
        ExplainPropertyText(
            "Read Through",
            st->through[kBuild] && st->through[kProbe]
                ? "both sides' Subquery Scans"
                : (st->through[kBuild] ? "the build side's Subquery Scan" : "the probe side's Subquery Scan"),
            es);
      if (st->quals) ExplainPropertyInteger("Groups Rejected", nullptr, st->groups.rejected, es);
    }
    ExplainPropertyInteger("Peak Memory", "kB", static_cast<int64>((st->peak + 1023) / 1024), es);
  }
}

}  // namespace ddx::pg::contraction
