// The loss of vjp (see translate.h).
#include "internal.h"

namespace ddx::pg {

RelP VjpLoss(const RelP &out, const std::vector<std::string> &out_names, const RelP &cot,
             const std::vector<std::string> &cot_names) {
  const Type f8{"pg_catalog.float8", true};
  std::vector<bool> active = ActiveColumns(out);
  int nout = static_cast<int>(out->cols.size());
  std::vector<ExprP> keys, products;
  for (int i = 0; i < nout; i++) {
    auto j = std::find(cot_names.begin(), cot_names.end(), out_names[i]) - cot_names.begin();
    if (j == static_cast<long>(cot_names.size()))
      throw Error(sqlstate::kUndefinedColumn, "the cotangent relation has no column \"" + out_names[i] + "\"",
                  "The cotangent names the output's keys and has one column per output value, of the same name.");
    ExprP o = MakeCol(i, 0, out->cols[i]), c = MakeCol(nout + static_cast<int>(j), 0, cot->cols[j]);
    if (!active[i]) {
      keys.push_back(NullSafeEquals(o, c));
      continue;
    }
    if (!cot->cols[j].differentiable)
      throw Error(sqlstate::kDatatypeMismatch, "cotangent column \"" + cot_names[j] + "\" is not a number");
    products.push_back(MakeCall("mul", {o, MakeCall("cast", {c}, f8)}, f8));
  }
  if (products.empty()) {
    auto zero = std::make_shared<ddx::Expr>();
    zero->text = "0::float8";
    zero->type = f8;
    products.push_back(zero);
  }
  RelP agg = NewRel(RelKind::Aggregate);
  agg->inputs = {MakeProject(MakeJoin(out, cot, JoinKind::Inner, AndAll(keys)), products)};
  for (size_t k = 0; k < products.size(); k++) {
    agg->aggs.push_back(AggCall{"sum", static_cast<int>(k)});
    agg->cols.push_back(f8);
  }
  // Σ_k coalesce(sum_k, 0): a value column whose rows all miss a cotangent adds nothing
  ExprP total;
  for (size_t k = 0; k < products.size(); k++) {
    ExprP sk = MakeCol(static_cast<int>(k), 0, f8);
    auto zero = std::make_shared<ddx::Expr>();
    zero->text = "0::float8";
    zero->type = f8;
    auto term = std::make_shared<ddx::Expr>();
    term->kind = ExprKind::Case;
    term->type = f8;
    term->args = {MakeOpaque("($1 IS NOT NULL)", "IS NOT NULL", {sk}, kBool), sk, zero};
    total = total ? MakeCall("add", {total, term}, f8) : term;
  }
  return MakeProject(agg, {total});
}

}  // namespace ddx::pg
