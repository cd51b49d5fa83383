// Sublinks (EXISTS, IN / = ANY, ALL) in conditions: their SQL over the
// sublink's saved relation. A sublink's value is boolean: no gradient flows
// through it (IsActive), and its relation's rows are read as they were.
#include <string>

#include "../pass.h"

namespace ddx::core {

std::string SublinkSql(const Pass &p, const ExprP &e, const Resolver &res) {
  const Rel *s = e->sub.get();
  std::string alias = "s" + std::to_string(p.id.at(s));
  Resolver sres = [&](int side, int col) { return side == 1 ? alias + "." + C(col) : res(side, col); };
  std::string from = " FROM " + p.F(s) + " " + alias + (e->corr ? " WHERE " + p.Sql(e->corr, sres) : "");
  if (e->sublink == SublinkKind::Exists) return "EXISTS (SELECT 1" + from + ")";
  std::string t = p.Sql(e->test, sres);
  if (e->sublink == SublinkKind::Any)
    return "(SELECT CASE WHEN bool_or(" + t + ") THEN true WHEN bool_or((" + t + ") IS NULL) THEN NULL ELSE false END" +
           from + ")";
  return "(SELECT CASE WHEN bool_or(NOT (" + t + ")) THEN false WHEN bool_or((" + t +
         ") IS NULL) THEN NULL ELSE true END" + from + ")";
}

}  // namespace ddx::core
