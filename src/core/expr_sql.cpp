// The SQL of an expression, over columns named by a Resolver (see pass.h).
#include <cctype>
#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "pass.h"

namespace ddx::core {

std::string Pass::Sql(const ExprP &e, const Resolver &res) const {
  switch (e->kind) {
    case ExprKind::Col:
      return res(e->side, e->col);
    case ExprKind::Const:
      return e->text;
    case ExprKind::Call: {
      const Rule *rule = FindRule(e->text);
      if (!rule) Internal("no rule " + e->text);
      std::vector<std::string> a;
      for (const auto &x : e->args) a.push_back(Sql(x, res));
      if (!stop_gradient_sql.empty() && e->text == "stop_gradient")
        return stop_gradient_sql + "(" + F8(a[0], e->args[0]->type) + ")";
      return rule->emit(a, e->type.sql);
    }
    case ExprKind::Case: {
      std::string s = "(CASE";
      for (size_t k = 0; k + 1 < e->args.size(); k += 2)
        s += " WHEN " + Sql(e->args[k], res) + " THEN " + Sql(e->args[k + 1], res);
      return s + " ELSE " + Sql(e->args.back(), res) + " END)";
    }
    case ExprKind::Opaque: {
      std::string out;
      const std::string &t = e->text;
      for (size_t i = 0; i < t.size(); i++) {
        if (t[i] == '$' && i + 1 < t.size() && isdigit(static_cast<unsigned char>(t[i + 1]))) {
          size_t j = i + 1;
          int n = 0;
          while (j < t.size() && isdigit(static_cast<unsigned char>(t[j]))) n = n * 10 + (t[j++] - '0');
          if (n < 1 || n > static_cast<int>(e->args.size())) Internal("bad template " + t);
          out += Sql(e->args[n - 1], res);
          i = j - 1;
        } else {
          out += t[i];
        }
      }
      return out;
    }
    case ExprKind::Sublink:
      return SublinkSql(*this, e, res);
  }
  Internal("unknown expression");
}

}  // namespace ddx::core
