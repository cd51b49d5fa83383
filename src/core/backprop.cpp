// The chain rule through a scalar expression, with the rules of rules.h, and
// what the terms it writes read (see pass.h).
#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "lets.h"
#include "pass.h"

namespace ddx::core {

void Backprop(const ExprP &e, const std::string &adj, Lets &lets, const ActiveFn &act, Terms &terms,
              const std::string &guard, std::vector<Deferred> *defer) {
  if (!IsActive(e, act)) return;
  switch (e->kind) {
    case ExprKind::Col:
      terms[{e->side, e->col}].push_back(adj);
      return;
    case ExprKind::Const:
    case ExprKind::Sublink:
      return;
    case ExprKind::Call: {
      const Rule *rule = FindRule(e->text);
      if (!rule) Internal("no rule " + e->text);
      if (!rule->partial) return;
      std::vector<std::string> a;
      for (const auto &x : e->args) a.push_back(F8(lets.Value(x, guard), x->type));
      // The value itself only once a partial reads it (Rule::reads: tanh's
      // 1 - y², not power's e·x^(e-1)): Lets computes every value it is
      // asked for, a layer of the relation's rows each (the matmul's loss,
      // power(tanh(z), 2): one layer of 80k rows fewer).
      std::string value;
      for (size_t i = 0; i < e->args.size(); i++) {
        if (!IsActive(e->args[i], act)) continue;
        if (value.empty() && rule->reads(i, kResult)) value = F8(lets.Value(e, guard), e->type);
        std::string p = rule->partial(i, a, value);
        std::string next = p == "1" ? adj : p == "-1" ? "(- " + adj + ")" : "(" + adj + " * " + p + ")";
        if (defer && guard.empty() && e->text == "mul" && Deferrable(e, i)) {
          defer->push_back({e->args[i], next, LeafSides(e->args[i])});
          continue;
        }
        Backprop(e->args[i], next, lets, act, terms, guard, defer);
      }
      return;
    }
    case ExprKind::Case: {
      size_t nb = e->args.size() / 2;
      for (size_t k = 0; k <= nb; k++) {
        const ExprP &v = k < nb ? e->args[2 * k + 1] : e->args.back();
        if (!IsActive(v, act)) continue;
        std::string g = lets.Branch(e, k, guard);
        Backprop(v, "(CASE WHEN " + g + " THEN " + adj + " ELSE 0::float8 END)", lets, act, terms, g, defer);
      }
      return;
    }
    case ExprKind::Opaque:
      throw Error(sqlstate::kUndefinedFunction, "function " + e->name + " has no derivative rule",
                  "Gradient flows through " + e->name + "; ddx knows no derivative for it.",
                  "Wrap the argument in stop_gradient(...) if it is meant to be constant, or rewrite it with "
                  "operations that ddx differentiates.");
  }
}

bool AdjointReads(const ExprP &e, int side, const ActiveFn &act) {
  if (!IsActive(e, act)) return false;
  switch (e->kind) {
    case ExprKind::Col:
    case ExprKind::Const:
    case ExprKind::Sublink:
    case ExprKind::Opaque:  // (Backprop refuses it)
      return false;
    case ExprKind::Call: {
      const Rule *rule = FindRule(e->text);
      if (!rule) Internal("no rule " + e->text);
      if (!rule->partial) return false;
      for (size_t i = 0; i < e->args.size(); i++) {
        if (!IsActive(e->args[i], act)) continue;
        if (rule->reads(i, kResult) && LeafSides(e).count(side)) return true;
        for (size_t j = 0; j < e->args.size(); j++)
          if (rule->reads(i, j) && LeafSides(e->args[j]).count(side)) return true;
        if (AdjointReads(e->args[i], side, act)) return true;
      }
      return false;
    }
    case ExprKind::Case: {
      // (Backprop guards branch k's terms by conditions 0..k: Lets::Branch)
      size_t nb = e->args.size() / 2;
      for (size_t k = 0; k <= nb; k++) {
        const ExprP &v = k < nb ? e->args[2 * k + 1] : e->args.back();
        if (!IsActive(v, act)) continue;
        for (size_t m = 0; m < nb && m <= k; m++)
          if (LeafSides(e->args[2 * m]).count(side)) return true;
        if (AdjointReads(v, side, act)) return true;
      }
      return false;
    }
  }
  Internal("unknown expression");
}

}  // namespace ddx::core
