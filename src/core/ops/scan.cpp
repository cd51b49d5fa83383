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
// loss reads by name, or a Citus table): its rows' identity for the gradient,
// tableoid and ctid, or the primary key (Rel::identity).
std::string ScanForward(const Pass &, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  bool param = false;
  for (int k : r->param) param = param || k >= 0;
  sql = "SELECT row_number() OVER () AS rid";
  if (param && !r->identity.empty()) {
    std::vector<std::string> keys;
    for (const auto &k : r->identity) keys.push_back("t." + k);
    sql += ", ROW(" + Join(keys, ", ") + ")::text AS key";
  } else if (param) {
    sql += ", t.tableoid AS toid, t.ctid AS tid";
  }
  for (size_t i = 0; i < r->names.size(); i++) sql += ", t." + r->names[i] + " AS " + C(i);
  sql += " FROM " + std::string(r->only ? "ONLY " : "") + r->table + " t";
  return sql;
}

// The gradient rows of each parameter column: from the cotangent, whose rid
// is the ctid for a table read in place, else through the saved copy.
void ScanReverse(Pass &p, const Rel &rel, Steps &s) {
  const Rel *r = &rel;
  for (int j : p.bcols.at(r))
    if (r->param[j] >= 0) {
      s.final_reads.push_back(p.B(r));
      s.finals.push_back(p.direct.count(r) ? "SELECT CAST(" + Quote(r->table) +
                                                 " AS pg_catalog.regclass)::pg_catalog.oid AS toid, b.rid AS tid, " +
                                                 std::to_string(r->param[j]) + " AS pidx, b." + D(j) +
                                                 " AS g, NULL::text AS key FROM " + p.B(r) + " b"
                         : !r->identity.empty()
                             ? "SELECT CAST(" + Quote(r->table) +
                                   " AS pg_catalog.regclass)::pg_catalog.oid AS toid, "
                                   "NULL::tid AS tid, " +
                                   std::to_string(r->param[j]) + " AS pidx, b." + D(j) + " AS g, f.key FROM " + p.F(r) +
                                   " f JOIN " + p.B(r) + " b ON b.rid = f.rid"
                             : "SELECT f.toid, f.tid, " + std::to_string(r->param[j]) + " AS pidx, b." + D(j) +
                                   " AS g, NULL::text AS key FROM " + p.F(r) + " f JOIN " + p.B(r) +
                                   " b ON b.rid = f.rid");
    }
}

// The rows of VALUES (a set-returning function), with `rid` first.
std::string ValuesRows(const Pass &p, const Rel &rel, const std::string &rid) {
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
  sql = "SELECT " + rid + ", v.* FROM (VALUES " + Join(rows, ", ") + ") AS v(" + Join(names, ", ") + ")";
  return sql;
}

std::string FunctionRows(const Pass &p, const Rel &rel, const std::string &rid) {
  Resolver none = [](int, int) -> std::string { Internal("column reference in a constant"); };
  return "SELECT " + rid + ", fn.c0 FROM " + p.Sql(rel.exprs[0], none) + " AS fn(c0)";
}

std::string ValuesForward(const Pass &p, const Rel &rel) { return ValuesRows(p, rel, "row_number() OVER () AS rid"); }
std::string FunctionForward(const Pass &p, const Rel &rel) {
  return FunctionRows(p, rel, "row_number() OVER () AS rid");
}

// Constants: nothing to pass on.
void NoReverse(Pass &, const Rel &, Steps &) {}

// Forward mode: a table with parameters, each parameter column's tangent
// joined by key (0 where the tangent relation has no row; a tangent
// relation with two rows for one key is refused when the row is read).
std::string ScanTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::vector<std::string> cols{kTangentRid};
  std::string joins;
  for (size_t i = 0; i < r->names.size(); i++) cols.push_back("t." + r->names[i] + " AS " + C(i));
  const std::vector<bool> &act = p.active.at(r);
  for (size_t i = 0; i < r->names.size(); i++) {
    if (!act[i]) continue;
    std::string x = "t." + r->names[i], ti = "t" + std::to_string(i);
    size_t k = static_cast<size_t>(r->param[i]);
    const Tangent *tg = k < p.tangents->size() && (*p.tangents)[k].rel ? &(*p.tangents)[k] : nullptr;
    if (!tg) {
      cols.push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE 0::float8 END AS " + ti);
      continue;
    }
    std::string g = "g" + std::to_string(i);
    std::vector<std::string> sel, by, on;
    for (size_t m = 0; m < tg->keys.size(); m++) {
      std::string km = "k" + std::to_string(m);
      sel.push_back("x." + C(tg->keys[m].first) + " AS " + km);
      by.push_back("x." + C(tg->keys[m].first));
      on.push_back("t." + tg->keys[m].second + " = " + g + "." + km);
    }
    sel.push_back("x." + C(tg->value) + " AS v");
    sel.push_back("count(*) OVER (" + (by.empty() ? std::string() : "PARTITION BY " + Join(by, ", ")) + ") AS n");
    joins += " LEFT JOIN (SELECT " + Join(sel, ", ") + " FROM " + p.F(tg->rel.get()) + " x) " + g + " ON " +
             (on.empty() ? "true" : Join(on, " AND "));
    cols.push_back("CASE WHEN " + x + " IS NULL THEN NULL WHEN " + g + ".n > 1 THEN _ddx.tangent_duplicate(" +
                   Quote(r->table + "." + r->names[i]) + ") ELSE COALESCE(CAST(" + g +
                   ".v AS pg_catalog.float8), 0::float8) END AS " + ti);
  }
  return "SELECT " + Join(cols, ", ") + " FROM " + std::string(r->only ? "ONLY " : "") + r->table + " t" + joins;
}

// Constants: no tangents.
std::string ValuesTangent(const Pass &p, const Rel &rel) { return ValuesRows(p, rel, kTangentRid); }
std::string FunctionTangent(const Pass &p, const Rel &rel) { return FunctionRows(p, rel, kTangentRid); }

}  // namespace

extern const OpRule kScanOp;
const OpRule kScanOp{
    "scan", NoRanks, ScanNotNull, ScanActivity, ScanForward, ScanReverse, RegionOf::None, ScanTangent,
};

extern const OpRule kValuesOp;
const OpRule kValuesOp{
    "values", NoRanks, NoneOf, NoneOf, ValuesForward, NoReverse, RegionOf::None, ValuesTangent,
};

extern const OpRule kFunctionOp;
const OpRule kFunctionOp{
    "function", NoRanks, NoneOf, NoneOf, FunctionForward, NoReverse, RegionOf::None, FunctionTangent,
};

}  // namespace ddx::core
