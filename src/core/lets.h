// The forward values a reverse rule reads, each computed once per row.
//
// PostgreSQL evaluates an expression as often as it is written (it does not
// eliminate common subexpressions): attention's backward wrote exp(s - m)
// eight times per row of its 526k-row pass. Each value becomes a column
// v<N> of a layer (SELECT alias.*, ... FROM (inner) alias OFFSET 0) around
// the relation the rule reads, one past its deepest argument's layer;
// OFFSET 0 keeps the planner from pulling the layers up (and the
// expressions back in). Values under a CASE branch are computed only
// where that branch is taken (NULL elsewhere, where the branch's adjoint
// is zero), as the forward computed them: a branch may fail elsewhere
// (sqrt of a negative number).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pass.h"

namespace ddx::core {

class Lets {
 public:
  // prefix: of the value columns' names. below: where values over the
  // leaves `below_sides` are computed instead (see BelowSides), read here as
  // columns of the same name.
  Lets(const Pass &p, std::string alias, Resolver base, std::string prefix = "v", Lets *below = nullptr,
       std::set<int> below_sides = {});

  // e's value (SQL over the layers), under `guard` (a CASE branch's).
  std::string Value(const ExprP &e, const std::string &guard);
  // The guard of branch k of CASE e (under `guard`): where the forward took it.
  std::string Branch(const ExprP &e, size_t k, const std::string &guard);
  // inner (a relation's SQL) wrapped in the layers, aliased `alias`.
  std::string Wrap(const std::string &inner) const;
  // The names of the value columns, in the order they were made.
  std::vector<std::string> Names() const;
  // Whether a value column of the layers reads a column of `side` as it is
  // written (not through another value column, nor through `below`), known
  // from the expressions the values were made of.
  bool Reads(int side) const { return reads_.count(side) > 0; }

 private:
  // A value's SQL and the sides of the columns that SQL reads as written.
  struct Val {
    std::string sql;
    std::set<int> sides;
  };
  Val Eval(const ExprP &e, const std::string &guard);
  std::string Also(const std::string &guard, const Val &cond, bool truth);
  static int Depth(const std::string &sql, const std::map<std::string, int> &m);
  ExprP Placeholder(const Val &v, const Type &t, int &depth, std::set<int> &sides) const;
  std::string Name(const std::string &def, int depth, const std::string &guard, const std::set<int> &sides);

  const Pass &p_;
  std::string alias_;
  Resolver base_;
  std::string prefix_;
  Lets *below_;
  std::set<int> below_sides_;
  std::map<std::string, std::string> names_;
  std::map<std::string, int> depth_;                  // value SQL -> layer (0: a column of the base)
  std::map<std::string, int> guard_depth_;            // guard SQL -> its deepest value's layer
  std::map<std::string, std::set<int>> guard_sides_;  // guard SQL -> the sides its conditions read as written
  std::set<int> reads_;                               // the sides the value columns read as written (Reads)
  std::vector<std::vector<std::string>> layers_;
};

}  // namespace ddx::core
