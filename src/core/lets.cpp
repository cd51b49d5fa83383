// Lets (see lets.h): each forward value a reverse rule reads, computed once
// per row in layers around the relation it reads.
#include "lets.h"

#include <algorithm>
#include <memory>

namespace ddx::core {

Lets::Lets(const Pass &p, std::string alias, Resolver base, std::string prefix, Lets *below, std::set<int> below_sides)
    : p_(p),
      alias_(std::move(alias)),
      base_(std::move(base)),
      prefix_(std::move(prefix)),
      below_(below),
      below_sides_(std::move(below_sides)) {}

std::string Lets::Value(const ExprP &e, const std::string &guard) { return Eval(e, guard).sql; }

Lets::Val Lets::Eval(const ExprP &e, const std::string &guard) {
  if (below_ && guard.empty() && Movable(e, below_sides_)) {
    std::string v = below_->Value(e, "");
    return {alias_ + v.substr(v.find('.')), {}};
  }
  switch (e->kind) {
    case ExprKind::Col:
      return {base_(e->side, e->col), LeafSides(e)};
    case ExprKind::Const:
      return {e->text, {}};
    case ExprKind::Opaque:
    case ExprKind::Sublink:
      return {Name(p_.Sql(e, base_), 1, guard, LeafSides(e)), {}};
    case ExprKind::Call: {
      if (!ReadsColumns(e)) return {p_.Sql(e, base_), {}};  // PostgreSQL folds constants
      auto c = std::make_shared<Expr>(*e);
      int depth = 0;
      std::set<int> sides;
      for (auto &a : c->args) a = Placeholder(Eval(a, guard), a->type, depth, sides);
      std::string sql = p_.Sql(c, base_);
      if (!Costly(e)) {  // written out where used
        depth_[sql] = depth;
        return {sql, sides};
      }
      return {Name(sql, depth + 1, guard, sides), {}};
    }
    case ExprKind::Case: {
      auto c = std::make_shared<Expr>(*e);
      int depth = 0;
      std::set<int> sides;
      std::string g = guard;  // and no earlier condition was true
      size_t nb = e->args.size() / 2;
      for (size_t k = 0; k < nb; k++) {
        Val cond = Eval(e->args[2 * k], g);
        c->args[2 * k] = Placeholder(cond, e->args[2 * k]->type, depth, sides);
        c->args[2 * k + 1] =
            Placeholder(Eval(e->args[2 * k + 1], Also(g, cond, true)), e->args[2 * k + 1]->type, depth, sides);
        g = Also(g, cond, false);
      }
      c->args.back() = Placeholder(Eval(e->args.back(), g), e->args.back()->type, depth, sides);
      return {Name(p_.Sql(c, base_), depth + 1, guard, sides), {}};
    }
  }
  Internal("unknown expression");
}

// The guard of branch k of CASE e (under `guard`): where the forward took it.
std::string Lets::Branch(const ExprP &e, size_t k, const std::string &guard) {
  size_t nb = e->args.size() / 2;
  std::string g = guard;
  for (size_t m = 0; m < nb && m <= k; m++) g = Also(g, Eval(e->args[2 * m], g), m == k);
  return g;
}

// inner (a relation's SQL) wrapped in the layers, aliased `alias`.
std::string Lets::Wrap(const std::string &inner) const {
  std::string sql = inner;
  for (const auto &layer : layers_) {
    if (layer.empty()) continue;
    sql = "(SELECT " + alias_ + ".*, " + Join(layer, ", ") + " FROM " + sql + " " + alias_ + p_.Fence() + ")";
  }
  return sql + " " + alias_;
}

// The names of the value columns, in the order they were made.
std::vector<std::string> Lets::Names() const {
  std::vector<std::string> out;
  for (const auto &layer : layers_)
    for (const auto &def : layer) out.push_back(def.substr(def.rfind(" AS ") + 4));
  return out;
}

// guard AND (cond) IS [NOT] TRUE; a guard's depth is its deepest value's,
// its sides those of its conditions.
std::string Lets::Also(const std::string &guard, const Val &cond, bool truth) {
  std::string g = (guard.empty() ? "" : guard + " AND ") + "(" + cond.sql + (truth ? ") IS TRUE" : ") IS NOT TRUE");
  guard_depth_[g] = std::max(Depth(guard, guard_depth_), Depth(cond.sql, depth_));
  std::set<int> sides = cond.sides;
  if (auto it = guard_sides_.find(guard); it != guard_sides_.end()) sides.insert(it->second.begin(), it->second.end());
  guard_sides_[g] = std::move(sides);
  return g;
}
int Lets::Depth(const std::string &sql, const std::map<std::string, int> &m) {
  auto it = m.find(sql);
  return it == m.end() ? 0 : it->second;
}
// v as a constant of its expression's copy; its layer and sides are the
// copy's too.
ExprP Lets::Placeholder(const Val &v, const Type &t, int &depth, std::set<int> &sides) const {
  depth = std::max(depth, Depth(v.sql, depth_));
  sides.insert(v.sides.begin(), v.sides.end());
  return MakeConst(v.sql, t);
}
// The value column of def (whose SQL reads `sides` as written) under guard.
std::string Lets::Name(const std::string &def, int depth, const std::string &guard, const std::set<int> &sides) {
  std::string full = guard.empty() ? def : "CASE WHEN " + guard + " THEN " + def + " END";
  auto it = names_.find(full);
  if (it != names_.end()) return it->second;
  reads_.insert(sides.begin(), sides.end());
  if (auto g = guard_sides_.find(guard); g != guard_sides_.end()) reads_.insert(g->second.begin(), g->second.end());
  depth = std::max(depth, Depth(guard, guard_depth_) + 1);  // the guard's values come first
  std::string v = prefix_ + std::to_string(names_.size());
  if (static_cast<int>(layers_.size()) < depth) layers_.resize(depth);
  layers_[depth - 1].push_back(full + " AS " + v);
  std::string name = alias_ + "." + v;
  names_[full] = name;
  depth_[name] = depth;
  return name;
}

}  // namespace ddx::core
