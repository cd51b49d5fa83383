// Sources: a table scan (the parameters' rows), VALUES and a set-returning
// function in FROM (constants).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::vector<bool> None(const Rel &r, const Inputs &) { return std::vector<bool>(r.cols.size(), false); }
std::vector<bool> NoRanks(const Rel &r, const Inputs &, const RankCheck &) {
  return std::vector<bool>(r.cols.size(), false);
}

std::vector<bool> ScanNotNull(const Rel &r, const Inputs &) {
  std::vector<bool> nn(r.cols.size(), false);
  for (size_t i = 0; i < nn.size() && i < r.notnull.size(); i++) nn[i] = r.notnull[i];
  return nn;
}

std::vector<bool> ScanActivity(const Rel &r, const Inputs &) {
  std::vector<bool> act(r.cols.size(), false);
  for (size_t i = 0; i < act.size(); i++) act[i] = r.param[i] >= 0;
  return act;
}

// A saved copy of the table (a scan that a set operation, a sublink or the
// loss reads by name): its rows' identity, tableoid and ctid for the gradient.
std::string ScanForward(const Pass &, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  bool param = false;
  for (int k : r->param) param = param || k >= 0;
  sql = "SELECT row_number() OVER () AS rid";
  if (param) sql += ", t.tableoid AS toid, t.ctid AS tid";
  for (size_t i = 0; i < r->names.size(); i++) sql += ", t." + r->names[i] + " AS " + C(i);
  sql += " FROM " + std::string(r->only ? "ONLY " : "") + r->table + " t";
  return sql;
}

// The gradient rows of each parameter column: from the cotangent, whose rid
// is the ctid for a table read in place, else through the saved copy.
void ScanReverse(Pass &p, const Rel &rel, Steps &s) {
  const Rel *r = &rel;
  for (int j : p.bcols.at(r))
    if (r->param[j] >= 0)
      s.finals.push_back(p.direct.count(r)
                             ? "SELECT CAST(" + Quote(r->table) +
                                   " AS pg_catalog.regclass)::pg_catalog.oid AS toid, b.rid AS tid, " +
                                   std::to_string(r->param[j]) + " AS pidx, b." + D(j) + " AS g FROM " + p.B(r) + " b"
                             : "SELECT f.toid, f.tid, " + std::to_string(r->param[j]) + " AS pidx, b." + D(j) +
                                   " AS g FROM " + p.F(r) + " f JOIN " + p.B(r) + " b ON b.rid = f.rid");
}

std::string ValuesForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  Resolver none = [](int, int) -> std::string { Internal("column reference in a constant"); };
  std::string sql;
  std::vector<std::string> rows, names;
  for (const auto &row : r->rows) {
    std::vector<std::string> v;
    for (const auto &e : row) v.push_back(p.Sql(e, none));
    rows.push_back("(" + Join(v, ", ") + ")");
  }
  for (size_t i = 0; i < r->cols.size(); i++) names.push_back(C(i));
  sql =
      "SELECT row_number() OVER () AS rid, v.* FROM (VALUES " + Join(rows, ", ") + ") AS v(" + Join(names, ", ") + ")";
  return sql;
}

std::string FunctionForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  Resolver none = [](int, int) -> std::string { Internal("column reference in a constant"); };
  std::string sql;
  sql = "SELECT row_number() OVER () AS rid, fn.c0 FROM " + p.Sql(r->exprs[0], none) + " AS fn(c0)";
  return sql;
}

// Constants: nothing to pass on.
void NoReverse(Pass &, const Rel &, Steps &) {}

}  // namespace

extern const OpRule kScanOp;
const OpRule kScanOp{
    "scan", NoRanks, ScanNotNull, ScanActivity, ScanForward, ScanReverse, RegionOf::None,
};

extern const OpRule kValuesOp;
const OpRule kValuesOp{
    "values", NoRanks, None, None, ValuesForward, NoReverse, RegionOf::None,
};

extern const OpRule kFunctionOp;
const OpRule kFunctionOp{
    "function", NoRanks, None, None, FunctionForward, NoReverse, RegionOf::None,
};

}  // namespace ddx::core
