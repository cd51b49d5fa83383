// EXPLAIN of the node: what it computes and, with ANALYZE, what it did
// (exec.h).
#include "exec.h"

extern "C" {
#include "postgres.h"

#include "commands/explain.h"
#include "nodes/makefuncs.h"
#include "utils/ruleutils.h"
}

namespace ddx::pg::contraction {

void Explain(CustomScanState *node, List *ancestors, ExplainState *es) {
  State *st = reinterpret_cast<State *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  ContractionPlan plan;
  FromPrivate(cs->custom_private, &plan);
  ExplainPropertyInteger("Join Keys", nullptr, list_length(plan.join_keys[kBuild]), es);
  ExplainPropertyInteger("Group Keys", nullptr, list_length(plan.group_keys), es);
  // Each kind's EXPLAIN property, with how many aggregates are of a kind
  // that has it: "Sums" always, the others where there are some.
  const char *labels[] = {"Sums", "Counts", "Averages"};
  for (const char *label : labels) {
    int n = 0;
    ListCell *lc;
    foreach (lc, plan.accs) n += strcmp(AccOps(static_cast<const AccSpec *>(lfirst(lc))->kind).explain, label) == 0;
    if (n || label == labels[0]) ExplainPropertyInteger(label, nullptr, n, es);
  }
  if (plan.numbered) ExplainPropertyText("Numbered", "row_number() OVER (), as emitted", es);
  if (plan.lazy_factors) ExplainPropertyText("Build Factors", "computed on a row's first pair (they may raise)", es);
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
      ExplainPropertyInteger("Groups", nullptr, st->groups.n - st->groups.rejected, es);
      ExplainPropertyText("Accumulator", st->dense.how, es);
      if (st->quals) ExplainPropertyInteger("Groups Rejected", nullptr, st->groups.rejected, es);
    }
    ExplainPropertyInteger("Peak Memory", "kB", static_cast<int64>((st->peak + 1023) / 1024), es);
  }
}

}  // namespace ddx::pg::contraction
