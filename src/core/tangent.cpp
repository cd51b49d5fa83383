// Forward mode: the tangent of an expression over a region, from the scalar
// rules' partials (rules.h serves both modes): Σ_i ∂e/∂a_i · tangent(a_i),
// over the arguments that depend on a parameter (see pass.h).
#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "pass.h"

namespace ddx::core {

namespace {

const char *const kZero = "0::float8";

}  // namespace

std::string Pass::LeafTangent(const Region &reg, int side, int col) const {
  const Rel *leaf = reg.leaves.at(side - kLeafSide);
  if (col < 0 || direct.count(leaf) || !active.at(leaf)[col]) return kZero;
  return reg.Alias(side - kLeafSide) + ".t" + std::to_string(col);
}

std::string Pass::TangentSql(const Region &reg, const ExprP &e) const {
  ActiveFn act = LeafActivity(reg);
  if (!IsActive(e, act)) return e->kind == ExprKind::Const && e->text.rfind("NULL", 0) == 0 ? "NULL::float8" : kZero;
  Resolver inside = Inside(reg);
  switch (e->kind) {
    case ExprKind::Col:
      return LeafTangent(reg, e->side, e->col);
    case ExprKind::Const:
    case ExprKind::Sublink:
      return kZero;
    case ExprKind::Call: {
      const Rule *rule = FindRule(e->text);
      if (!rule) Internal("no rule " + e->text);
      if (!rule->partial) return kZero;  // stop_gradient
      std::vector<std::string> a;
      for (const auto &x : e->args) a.push_back(F8(Sql(x, inside), x->type));
      std::string y = F8(Sql(e, inside), e->type);
      std::vector<std::string> terms;
      for (size_t i = 0; i < e->args.size(); i++) {
        if (!IsActive(e->args[i], act)) continue;
        std::string p = rule->partial(i, a, y), t = TangentSql(reg, e->args[i]);
        std::string term = p == "1" ? "(" + t + ")" : p == "-1" ? "(- (" + t + "))" : "((" + p + ") * (" + t + "))";
        // (GREATEST(x * NULL, x + 0.5) is x + 0.5: the NULL argument's term
        // is 0, not its partial 0 times its tangent NULL)
        if (rule->skips_nulls) term = "(CASE WHEN " + a[i] + " IS NULL THEN 0::float8 ELSE " + term + " END)";
        terms.push_back(term);
      }
      return terms.empty() ? kZero : "(" + Join(terms, " + ") + ")";
    }
    case ExprKind::Case: {
      // the branch the forward took, its tangent (a condition has none)
      std::string s = "(CASE";
      for (size_t k = 0; k + 1 < e->args.size(); k += 2)
        s += " WHEN " + Sql(e->args[k], inside) + " THEN " + TangentSql(reg, e->args[k + 1]);
      return s + " ELSE " + TangentSql(reg, e->args.back()) + " END)";
    }
    case ExprKind::Opaque:
      throw Error(sqlstate::kUndefinedFunction, "function " + e->name + " has no derivative rule",
                  "A tangent flows through " + e->name + "; ddx knows no derivative for it.",
                  "Wrap the argument in stop_gradient(...) if it is meant to be constant, or rewrite it with "
                  "operations that ddx differentiates.");
  }
  Internal("unknown expression");
}

}  // namespace ddx::core
