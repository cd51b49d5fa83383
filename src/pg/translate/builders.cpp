// What a Query level holds, and the conjunction of conditions (see
// internal.h; the IR node builders are ddx/core/ir_build.h).
#include "internal.h"

namespace ddx::pg {

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; i++) s += (i ? ", $" : "$") + std::to_string(i + 1);
  return s;
}

// Scalar (EXPR) sublinks of one query level, not descending into subqueries.
bool CollectScalarSublinks(Node *n, std::vector<SubLink *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, SubLink)) {
    auto *sl = castNode(SubLink, n);
    if (sl->subLinkType == EXPR_SUBLINK && std::find(out->begin(), out->end(), sl) == out->end()) out->push_back(sl);
    return CollectScalarSublinks(sl->testexpr, out);
  }
  return expression_tree_walker(n, (bool (*)())CollectScalarSublinks, out);
}

bool CollectAggrefs(Node *n, std::vector<Node *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, Aggref)) {
    for (Node *a : *out)
      if (equal(a, n)) return false;
    out->push_back(n);
    return false;
  }
  return expression_tree_walker(n, (bool (*)())CollectAggrefs, out);
}

ExprP AndAll(const std::vector<ExprP> &v) {
  if (v.empty()) return nullptr;
  if (v.size() == 1) return v[0];
  std::string t;
  for (size_t i = 0; i < v.size(); i++) t += (i ? " AND $" : "($") + std::to_string(i + 1);
  return MakeOpaque(t + ")", "AND", v, kBool);
}

bool CollectWindowFuncs(Node *n, std::vector<WindowFunc *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, WindowFunc)) {
    out->push_back(castNode(WindowFunc, n));
    return false;
  }
  return expression_tree_walker(n, (bool (*)())CollectWindowFuncs, out);
}

void CheckQuery(Query *q) {
  if (q->commandType != CMD_SELECT || q->hasModifyingCTE)
    Refuse("data-modifying statement in the loss", "The loss and the relations it reads must be SELECT queries.");
  if (q->hasRecursive) Refuse("recursive query in the loss", "WITH RECURSIVE has no reverse rule.");
  if (q->hasTargetSRFs) Refuse("set-returning function in a target list of the loss");
  if (q->groupingSets) Refuse("GROUPING SETS, ROLLUP or CUBE in the loss");
  if (q->hasDistinctOn) Refuse("DISTINCT ON in the loss", "", "Use GROUP BY with MIN or MAX.");
  if (q->hasForUpdate || q->rowMarks) Refuse("FOR UPDATE or FOR SHARE in the loss");
  if (q->limitOption == LIMIT_OPTION_WITH_TIES) Refuse("FETCH ... WITH TIES in the loss");
}

}  // namespace ddx::pg
