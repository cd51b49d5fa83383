// Group keys matched NULL-safely, and an aggregate's saved rows with their
// cotangents (see pass.h).
#include <string>
#include <vector>

#include "pass.h"

namespace ddx::core {

// Equality of two values of `type` that holds for two NULLs and that
// PostgreSQL can hash (IS NOT DISTINCT FROM cannot be hashed or merged).
// Equality of two values of `type` that holds for two NULLs and that
// PostgreSQL can hash (IS NOT DISTINCT FROM cannot be hashed or merged).
// A value of `type` that stands for NULL beside a NULL flag, or "" (none known).
std::string NullStandIn(const std::string &type) {
  std::string dflt;
  static const char *const kZero[] = {"integer",           "bigint",
                                      "smallint",          "pg_catalog.int4",
                                      "pg_catalog.int8",   "pg_catalog.int2",
                                      "pg_catalog.float8", "pg_catalog.float4",
                                      "numeric",           "pg_catalog.numeric"};
  for (const char *t : kZero)
    if (type == t) dflt = "0";
  if (type == "text" || type == "pg_catalog.text" || type.rfind("character varying", 0) == 0) dflt = "''";
  if (type == "boolean" || type == "pg_catalog.bool") dflt = "false";
  return dflt.empty() ? "" : "CAST(" + dflt + " AS " + type + ")";
}

// x as one value that is equal for two NULLs and for nothing else, or ""
// where no such value is known: smaller integers widened to bigint, NULL a
// bigint no integer equals; booleans as 0/1, NULL 2. A hash join then
// compares one column instead of a stand-in and a NULL flag: one hash and
// one comparison per probe, of which attention's p·v backward makes 526k
// (measured: bench/RESULTS.md, 'Figures from code comments').
std::string NullSafeKey(const std::string &x, const std::string &type) {
  if (type == "integer" || type == "pg_catalog.int4" || type == "smallint" || type == "pg_catalog.int2")
    return "COALESCE(CAST(" + x + " AS pg_catalog.int8), 4294967296)";
  if (type == "boolean" || type == "pg_catalog.bool") return "COALESCE(CAST(" + x + " AS pg_catalog.int4), 2)";
  return "";
}

std::string NullSafeEq(const std::string &a, const std::string &b, const std::string &type) {
  std::string one = NullSafeKey(a, type);
  if (!one.empty()) return one + " = " + NullSafeKey(b, type);
  std::string d = NullStandIn(type);
  if (d.empty()) return "(" + a + ") IS NOT DISTINCT FROM (" + b + ")";
  return "((" + a + ") IS NULL) = ((" + b + ") IS NULL) AND COALESCE(" + a + ", " + d + ") = COALESCE(" + b + ", " + d +
         ")";
}

// An aggregate's saved rows with their cotangents (alias a: a.c<j>, a.bd<j>).
// Also each group key k as h<k> for KeyEq (see KeyCols). Where the
// cotangent has all that its readers read of a group (KeysInCotangent),
// the cotangent alone: joined with the saved rows, which in place on Citus
// are recomputed wherever they are read, the MLP's hidden layer was
// recomputed twice more for nothing (its first layer's gradient in place,
// measured: bench/RESULTS.md, 'Figures from code comments').
std::string Pass::Groups(const Rel *r, Refs &reads) const {
  reads.push_back(B(r));
  bool with_saved = carried.count(r) > 0;
  std::vector<std::string> own = with_saved ? std::vector<std::string>{} : KeysInCotangent(*this, r);
  if (!own.empty()) {
    for (int o : bcols.at(r)) own.push_back("b." + D(o) + " AS b" + D(o));
    for (int k = 0; k < r->nkeys; k++)
      if (FormOf(r, k) != KeyForm::Plain) Internal("a group key in its cotangent that can be NULL");
    return "(SELECT " + Join(own, ", ") + " FROM " + B(r) + " b" + Fence() + ") a";
  }
  std::vector<std::string> ab{"a.*"};
  for (int o : bcols.at(r)) ab.push_back((with_saved ? "a." : "b.") + D(o) + " AS b" + D(o));
  for (int k = 0; k < r->nkeys; k++)
    if (FormOf(r, k) == KeyForm::One || FormOf(r, k) == KeyForm::Pair)
      for (const auto &c : KeyCols(r, k, "a." + C(k), "h" + std::to_string(k))) ab.push_back(c);
  if (with_saved) return "(SELECT " + Join(ab, ", ") + " FROM " + B(r) + " a" + Fence() + ") a";
  return "(SELECT " + Join(ab, ", ") + " FROM " + F(r) + " a JOIN " + B(r) + " b ON b.rid = a.rid" +
         KeysEq(r, "b", "a") + Fence() + ") a";
}

std::string Pass::KeysEq(const Rel *r, const std::string &b, const std::string &a) const {
  if (!keyed.count(r)) return "";
  std::string eq;
  std::vector<int> js = RidKeys(*this, r);
  for (size_t i = 0; i < js.size(); i++) eq += " AND " + b + ".rk" + std::to_string(i) + " = " + a + "." + C(js[i]);
  return eq;
}

// Group key k of aggregate r matched NULL-safely by a hash join: each side
// computes, once per row, the key with NULL replaced (see NullSafeKey, or
// a stand-in value and a NULL flag: NullSafeEq), and the join compares
// those columns. Written into the join condition, the expressions ran for
// every pair the join compared: 1.28M in the matmul's transposed join
// (measured: bench/RESULTS.md, 'Figures from code comments'). Plain: cannot
// be NULL; Distinct: no stand-in known (IS NOT DISTINCT FROM).
Pass::KeyForm Pass::FormOf(const Rel *r, int k) const {
  const std::string &type = r->cols[k].sql;
  if (notnull.at(r->inputs[0].get())[k]) return KeyForm::Plain;
  if (!NullSafeKey("", type).empty()) return KeyForm::One;  // (a form known for the type)
  return NullStandIn(type).empty() ? KeyForm::Distinct : KeyForm::Pair;
}
// The select-list entries that name key x `name` (and `name`n).
std::vector<std::string> Pass::KeyCols(const Rel *r, int k, const std::string &x, const std::string &name) const {
  switch (FormOf(r, k)) {
    case KeyForm::One:
      return {NullSafeKey(x, r->cols[k].sql) + " AS " + name};
    case KeyForm::Pair:
      return {"COALESCE(" + x + ", " + NullStandIn(r->cols[k].sql) + ") AS " + name,
              "(" + x + ") IS NULL AS " + name + "n"};
    default:
      return {x + " AS " + name};
  }
}
// Key k of the rows `rk` (named by KeyCols) equals the group's (`a`, from Groups).
std::string Pass::KeyEq(const Rel *r, int k, const std::string &rk) const {
  std::string ks = std::to_string(k);
  switch (FormOf(r, k)) {
    case KeyForm::Plain:
      return rk + " = a." + C(k);
    case KeyForm::Distinct:
      return "(" + rk + ") IS NOT DISTINCT FROM (a." + C(k) + ")";
    case KeyForm::One:
      return rk + " = a.h" + ks;
    case KeyForm::Pair:
      break;
  }
  return rk + " = a.h" + ks + " AND " + rk + "n = a.h" + ks + "n";
}

}  // namespace ddx::core
