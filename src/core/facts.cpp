// Facts about every relation's columns, decided before any SQL is written:
// ranks (which may only be compared), columns that cannot be NULL, columns
// that carry gradient. Each operator's rule (OpRule) gives its columns'
// facts from its inputs'; this file walks the relations in order.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pass.h"

namespace ddx::core {

std::vector<bool> SameAsInput(const Rel &, const Inputs &in) { return in(0); }

std::vector<bool> NoneOf(const Rel &r, const Inputs &) { return std::vector<bool>(r.cols.size(), false); }

std::vector<bool> NoRanks(const Rel &r, const Inputs &, const RankCheck &) {
  return std::vector<bool>(r.cols.size(), false);
}

std::vector<bool> JoinedRanks(const Rel &r, const Inputs &in, const RankCheck &check) {
  std::vector<bool> rk = in(0);
  rk.insert(rk.end(), in(1).begin(), in(1).end());
  check.walk(r.cond, rk, true);
  return rk;
}

std::vector<bool> JoinedActivity(const Rel &r, const Inputs &in) {
  std::vector<bool> act(r.cols.size(), false);
  const auto &l = in(0), &rr = in(1);
  for (size_t i = 0; i < act.size(); i++) act[i] = i < l.size() ? l[i] : rr[i - l.size()];
  return act;
}

std::vector<bool> PassRanks(const Rel &r, const Inputs &in, const RankCheck &check) {
  std::vector<bool> rk = in(0);
  check.walk(r.cond, rk, true);
  return rk;
}

void Compared(const ExprP &cond, std::vector<bool> &v) {
  std::function<void(const ExprP &)> conj = [&](const ExprP &e) {
    if (!e || e->kind != ExprKind::Opaque) return;
    if (e->name == "AND") {
      for (const auto &a : e->args) conj(a);
    } else if (e->strict) {
      for (const auto &a : e->args)
        if (a->kind == ExprKind::Col && a->side == 0 && a->col >= 0 && a->col < static_cast<int>(v.size()))
          v[a->col] = true;
    }
  };
  conj(cond);
}

// Ranks (row_number, rank, dense_rank) may be compared (WHERE rn <= k keeps
// the top k, whose rows get the gradient) and passed through, never
// computed with: their derivative is zero where it exists and undefined
// where the order changes. A rank column may appear inside any boolean
// expression; anywhere else only as a bare column.
void CheckRanks(const Pass &p) {
  std::map<const Rel *, std::vector<bool>> rank;
  RankCheck check;
  check.refuse = [](const std::string &what) {
    throw Error(sqlstate::kFeatureNotSupported, "rank used as a value " + what,
                "row_number(), rank() and dense_rank() are differentiated only as filters (top-k): a rank is "
                "piecewise constant, so its derivative is zero where it exists and undefined where the order "
                "changes.",
                "Compare the rank in a WHERE clause (WHERE rn <= k) instead of computing with it.");
  };
  check.walk = [&](const ExprP &e, const std::vector<bool> &cols, bool in_bool) {
    if (!e) return;
    bool ok = in_bool || IsBoolType(e->type);
    if (e->kind == ExprKind::Col && e->side == 0 && e->col >= 0 && cols.at(e->col) && !ok)
      check.refuse("in an expression of the loss");
    for (const auto &a : e->args) check.walk(a, cols, ok);
    check.walk(e->test, cols, true);
    check.walk(e->corr, cols, true);
  };
  for (const Rel *r : p.order) {
    Inputs in = [&](size_t k) -> const std::vector<bool> & { return rank.at(r->inputs[k].get()); };
    rank[r] = RuleOf(*r).ranks(*r, in, check);
  }
  if (!p.tangents)  // (a jvp's output may carry a rank as a key)
    for (bool b : rank.at(p.loss.get()))
      if (b) check.refuse("as the loss");
}

// NOT NULL columns of tables, and columns that an inner join or a filter
// compares with a strict operator (a NULL there would have dropped the
// row), carried through projections, group keys and windows. An
// aggregate's backward pairs rows with their group on such keys with a
// plain equality, which PostgreSQL estimates and hashes far better than
// the NULL-safe one (matmul and attention: its join cost was grossly
// overestimated, which made the planner sort 1.28M rows instead of hashing;
// measured: bench/RESULTS.md, 'Figures from code comments').
std::vector<bool> NotNullOf(const Pass &p, const Rel *r) {
  Inputs in = [&](size_t k) -> const std::vector<bool> & { return p.notnull.at(r->inputs[k].get()); };
  return RuleOf(*r).not_null(*r, in);
}

// The columns that depend on a parameter, less a softmax's max where the
// loss cannot see it (held: shift.h).
std::vector<bool> ActivityOf(const Pass &p, const Rel *r) {
  Inputs in = [&](size_t k) -> const std::vector<bool> & { return p.active.at(r->inputs[k].get()); };
  std::vector<bool> act = RuleOf(*r).activity(*r, in);
  for (const auto &[rel, col] : p.held)
    if (rel == r) act[col] = false;
  return act;
}

}  // namespace ddx::core
