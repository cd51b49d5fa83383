// The program builder (see program.h).
//
// Forward: every relation becomes a MATERIALIZED CTE f<id> with a bigint rid.
// Backward: every relation that gradient reaches gets a cotangent CTE b<id>
// (rid, d<j> for each column j that carries gradient), the sum of the
// contributions of all its readers. Each relation kind has one reverse rule
// (ReverseRule), which turns b<id> into contributions to its inputs; scalar
// expressions are differentiated symbolically with the rules of rules.h.
#include "ddx/core/program.h"

#include <functional>
#include <map>
#include <set>

#include "ddx/core/rules.h"

namespace ddx {
namespace {

std::string C(int i) { return "c" + std::to_string(i); }
std::string D(int i) { return "d" + std::to_string(i); }
std::string Join(const std::vector<std::string> &v, const std::string &sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
  return s;
}

using Resolver = std::function<std::string(int side, int col)>;

// A contribution to a relation's cotangent: SQL returning (rid, d<j> for j in cols).
struct Contrib {
  std::string sql;
  std::set<int> cols;
};

[[noreturn]] void Internal(const std::string &what) {
  throw Error(sqlstate::kInternalError, "ddx internal error: " + what);
}

bool ContainsVolatile(const ExprP &e) {
  if (!e) return false;
  if (e->is_volatile) return true;
  for (const auto &a : e->args)
    if (ContainsVolatile(a)) return true;
  return ContainsVolatile(e->test) || ContainsVolatile(e->corr);
}

class Builder {
 public:
  explicit Builder(const RelP &loss) : loss_(loss) {
    Visit(loss);
    for (Rel *r : order_) active_[r] = Activity(r);
  }

  std::string Forward() {
    std::vector<std::string> ctes;
    for (Rel *r : order_) EmitForward(r, ctes);
    forward_steps_ = static_cast<int>(ctes.size());
    return Join(ctes, ",\n");
  }

  Program Gradient() {
    if (loss_->cols.size() != 1 || !loss_->cols[0].differentiable)
      throw Error(sqlstate::kInvalidParameterValue, "loss must be one row and one numeric column");
    std::vector<std::string> ctes;
    for (Rel *r : order_) EmitForward(r, ctes);
    int nforward = static_cast<int>(ctes.size());
    Rel *L = loss_.get();
    if (active_[L][0])
      contribs_[L].push_back({"SELECT rid, 1::float8 AS d0 FROM " + F(L) + " WHERE c0 IS NOT NULL", {0}});
    std::vector<std::string> finals;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      Rel *r = *it;
      if (!MakeCotangent(r, ctes)) continue;
      if (r->kind == RelKind::Scan) {
        for (int j : bcols_[r])
          if (r->param[j] >= 0)
            finals.push_back("SELECT f.toid, f.tid, " + std::to_string(r->param[j]) + " AS pidx, b." + D(j) +
                             " AS g FROM " + F(r) + " f JOIN " + B(r) + " b ON b.rid = f.rid");
      } else {
        ReverseRule(r);
      }
    }
    finals.push_back("SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g FROM " + F(L));
    Program p;
    p.forward_steps = nforward;
    p.backward_steps = static_cast<int>(ctes.size()) - nforward;
    p.sql = "WITH " + Join(ctes, ",\n") +
            "\nSELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g FROM (\n" + Join(finals, "\nUNION ALL\n") +
            "\n) z GROUP BY z.toid, z.tid, z.pidx";
    return p;
  }

  const std::vector<bool> &Active(const Rel *r) const { return active_.at(r); }
  std::string F(const Rel *r) const { return "f" + std::to_string(id_.at(r)); }
  std::string G(const Rel *r) const { return "g" + std::to_string(id_.at(r)); }
  std::string B(const Rel *r) const { return "b" + std::to_string(id_.at(r)); }
  int forward_steps() const { return forward_steps_; }

 private:
  // Depth-first, inputs (and relations of sublinks) before their readers.
  void Visit(const RelP &r) {
    if (id_.count(r.get())) return;
    id_[r.get()] = -1;  // on the path
    for (const auto &in : r->inputs) Visit(in);
    std::vector<ExprP> exprs = r->exprs;
    if (r->cond) exprs.push_back(r->cond);
    for (const auto &row : r->rows) exprs.insert(exprs.end(), row.begin(), row.end());
    if (r->kind == RelKind::Function) exprs.clear();
    for (const auto &e : exprs) VisitSublinks(e);
    id_[r.get()] = next_id_++;
    order_.push_back(r.get());
  }
  void VisitSublinks(const ExprP &e) {
    if (!e) return;
    if (e->kind == ExprKind::Sublink) Visit(e->sub);
    for (const auto &a : e->args) VisitSublinks(a);
    VisitSublinks(e->test);
    VisitSublinks(e->corr);
  }

  // Whether each output column depends on a parameter.
  std::vector<bool> Activity(Rel *r) {
    std::vector<bool> act(r->cols.size(), false);
    auto in = [&](size_t k) -> const std::vector<bool> & { return active_.at(r->inputs[k].get()); };
    switch (r->kind) {
      case RelKind::Scan:
        for (size_t i = 0; i < act.size(); i++) act[i] = r->param[i] >= 0;
        break;
      case RelKind::Values:
      case RelKind::Function:
        break;
      case RelKind::Project:
        for (size_t i = 0; i < act.size(); i++) act[i] = IsActive(r->exprs[i], in(0));
        break;
      case RelKind::Filter:
      case RelKind::Limit:
      case RelKind::Scalar:
        act = in(0);
        break;
      case RelKind::Join: {
        const auto &l = in(0), &rr = in(1);
        for (size_t i = 0; i < act.size(); i++) act[i] = i < l.size() ? l[i] : rr[i - l.size()];
        break;
      }
      case RelKind::Aggregate: {
        const auto &i0 = in(0);
        for (int k = 0; k < r->nkeys; k++) act[k] = i0[k];
        for (size_t k = 0; k < r->aggs.size(); k++) {
          const AggCall &a = r->aggs[k];
          act[r->nkeys + k] = a.arg >= 0 && a.fn != "count" && i0[a.arg] && r->cols[r->nkeys + k].differentiable;
        }
        break;
      }
      case RelKind::UnionAll:
        for (size_t k = 0; k < r->inputs.size(); k++)
          for (size_t i = 0; i < act.size(); i++) act[i] = act[i] || in(k)[i];
        break;
    }
    return act;
  }

  static bool IsActive(const ExprP &e, const std::vector<bool> &act) {
    if (!e || !e->type.differentiable) return false;
    switch (e->kind) {
      case ExprKind::Col:
        return e->side == 0 && act[e->col];
      case ExprKind::Const:
      case ExprKind::Sublink:
        return false;
      case ExprKind::Call:
        if (e->text == "stop_gradient") return false;
        for (const auto &a : e->args)
          if (IsActive(a, act)) return true;
        return false;
      case ExprKind::Case:
        for (size_t k = 1; k < e->args.size(); k += 2)
          if (IsActive(e->args[k], act)) return true;
        return IsActive(e->args.back(), act);
      case ExprKind::Opaque:
        for (const auto &a : e->args)
          if (IsActive(a, act) || (a->kind != ExprKind::Const && !a->type.differentiable && IsActiveAny(a, act)))
            return true;
        return false;
    }
    return false;
  }
  // Whether any column under e is active, whatever the types on the way.
  static bool IsActiveAny(const ExprP &e, const std::vector<bool> &act) {
    if (!e) return false;
    if (e->kind == ExprKind::Col) return e->side == 0 && act[e->col];
    for (const auto &a : e->args)
      if (IsActiveAny(a, act)) return true;
    return false;
  }

 public:
  std::string Sql(const ExprP &e, const Resolver &res) const {
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
      case ExprKind::Sublink: {
        const Rel *s = e->sub.get();
        std::string alias = "s" + std::to_string(id_.at(s));
        Resolver sres = [&](int side, int col) { return side == 1 ? alias + "." + C(col) : res(side, col); };
        std::string from = " FROM " + F(s) + " " + alias + (e->corr ? " WHERE " + Sql(e->corr, sres) : "");
        if (e->sublink == SublinkKind::Exists) return "EXISTS (SELECT 1" + from + ")";
        std::string t = Sql(e->test, sres);
        if (e->sublink == SublinkKind::Any)
          return "(SELECT CASE WHEN bool_or(" + t + ") THEN true WHEN bool_or((" + t +
                 ") IS NULL) THEN NULL ELSE false END" + from + ")";
        return "(SELECT CASE WHEN bool_or(NOT (" + t + ")) THEN false WHEN bool_or((" + t +
               ") IS NULL) THEN NULL ELSE true END" + from + ")";
      }
    }
    Internal("unknown expression");
  }

 private:
  static std::string F8(const std::string &sql, const Type &t) {
    return t.sql == "pg_catalog.float8" ? sql : "(" + sql + ")::float8";
  }

  // Accumulates into terms[j] the contributions of adj · ∂e/∂(column j).
  void Backprop(const ExprP &e, const std::string &adj, const Resolver &res, const std::vector<bool> &act,
                std::map<int, std::vector<std::string>> &terms) const {
    if (!IsActive(e, act)) return;
    switch (e->kind) {
      case ExprKind::Col:
        terms[e->col].push_back(adj);
        return;
      case ExprKind::Const:
      case ExprKind::Sublink:
        return;
      case ExprKind::Call: {
        const Rule *rule = FindRule(e->text);
        if (!rule) Internal("no rule " + e->text);
        if (!rule->partial) return;
        std::vector<std::string> a;
        for (const auto &x : e->args) a.push_back(F8(Sql(x, res), x->type));
        std::string y = F8(Sql(e, res), e->type);
        for (size_t i = 0; i < e->args.size(); i++) {
          if (!IsActive(e->args[i], act)) continue;
          std::string p = rule->partial(i, a, y);
          std::string next = p == "1" ? adj : p == "-1" ? "(- " + adj + ")" : "(" + adj + " * " + p + ")";
          Backprop(e->args[i], next, res, act, terms);
        }
        return;
      }
      case ExprKind::Case: {
        size_t nb = e->args.size() / 2;  // value branches before ELSE
        for (size_t k = 0; k <= nb; k++) {
          const ExprP &v = k < nb ? e->args[2 * k + 1] : e->args.back();
          if (!IsActive(v, act)) continue;
          std::string s = "(CASE";
          for (size_t m = 0; m < nb; m++)
            s += " WHEN " + Sql(e->args[2 * m], res) + " THEN " + (m == k ? adj : "0::float8");
          s += " ELSE " + std::string(k == nb ? adj : "0::float8") + " END)";
          Backprop(v, s, res, act, terms);
        }
        return;
      }
      case ExprKind::Opaque:
        throw Error(sqlstate::kUndefinedFunction, "function " + e->name + " has no derivative rule",
                    "Gradient flows through " + e->name + "; ddx knows no derivative for it.",
                    "Wrap the argument in stop_gradient(...) if it is meant to be constant, or rewrite it with "
                    "operations that ddx differentiates.",
                    e->position);
    }
  }

  void EmitForward(Rel *r, std::vector<std::string> &ctes) {
    std::string f = F(r), sql;
    Resolver in0 = [](int, int col) { return "i." + C(col); };
    Resolver none = [](int, int) -> std::string { Internal("column reference in a constant"); };
    switch (r->kind) {
      case RelKind::Scan: {
        bool param = false;
        for (int p : r->param) param = param || p >= 0;
        sql = "SELECT row_number() OVER () AS rid";
        if (param) sql += ", t.tableoid AS toid, t.ctid AS tid";
        for (size_t i = 0; i < r->names.size(); i++) sql += ", t." + r->names[i] + " AS " + C(i);
        sql += " FROM " + std::string(r->only ? "ONLY " : "") + r->table + " t";
        break;
      }
      case RelKind::Values: {
        std::vector<std::string> rows, names;
        for (const auto &row : r->rows) {
          std::vector<std::string> v;
          for (const auto &e : row) v.push_back(Sql(e, none));
          rows.push_back("(" + Join(v, ", ") + ")");
        }
        for (size_t i = 0; i < r->cols.size(); i++) names.push_back(C(i));
        sql = "SELECT row_number() OVER () AS rid, v.* FROM (VALUES " + Join(rows, ", ") + ") AS v(" +
              Join(names, ", ") + ")";
        break;
      }
      case RelKind::Function:
        sql = "SELECT row_number() OVER () AS rid, fn.c0 FROM " + Sql(r->exprs[0], none) + " AS fn(c0)";
        break;
      case RelKind::Project: {
        std::vector<std::string> cols{"i.rid"};
        for (size_t k = 0; k < r->exprs.size(); k++) cols.push_back(Sql(r->exprs[k], in0) + " AS " + C(k));
        sql = "SELECT " + Join(cols, ", ") + " FROM " + F(r->inputs[0].get()) + " i";
        break;
      }
      case RelKind::Filter:
        sql = "SELECT i.* FROM " + F(r->inputs[0].get()) + " i WHERE " + Sql(r->cond, in0);
        break;
      case RelKind::Limit: {
        sql = "SELECT i.* FROM " + F(r->inputs[0].get()) + " i";
        std::vector<std::string> keys;
        for (const auto &k : r->order)
          keys.push_back("i." + C(k.col) + (k.desc ? " DESC" : " ASC") + (k.nulls_first ? " NULLS FIRST" : " NULLS LAST"));
        if (!keys.empty()) sql += " ORDER BY " + Join(keys, ", ");
        if (!r->limit.empty()) sql += " LIMIT " + r->limit;
        if (!r->offset.empty()) sql += " OFFSET " + r->offset;
        break;
      }
      case RelKind::Join: {
        int nl = static_cast<int>(r->inputs[0]->cols.size());
        Resolver lr = [nl](int, int col) { return col < nl ? "l." + C(col) : "r." + C(col - nl); };
        std::vector<std::string> cols{"row_number() OVER () AS rid", "l.rid AS lrid", "r.rid AS rrid"};
        for (size_t k = 0; k < r->cols.size(); k++) cols.push_back(lr(0, static_cast<int>(k)) + " AS " + C(k));
        const char *jk = r->join == JoinKind::Inner ? " JOIN " : r->join == JoinKind::Left ? " LEFT JOIN " : " FULL JOIN ";
        sql = "SELECT " + Join(cols, ", ") + " FROM " + F(r->inputs[0].get()) + " l" + jk + F(r->inputs[1].get()) +
              " r ON " + (r->cond ? Sql(r->cond, lr) : "true");
        break;
      }
      case RelKind::Aggregate: {
        std::vector<std::string> cols, keys;
        for (int k = 0; k < r->nkeys; k++) keys.push_back("g." + C(k));
        if (r->nkeys > 0) {
          ctes.push_back(G(r) + " AS MATERIALIZED (SELECT dense_rank() OVER (ORDER BY " + Join(keys, ", ") +
                         ") AS grid, g.* FROM " + F(r->inputs[0].get()) + " g)");
          cols.push_back("g.grid AS rid");
        } else {
          cols.push_back("1::bigint AS rid");
        }
        for (int k = 0; k < r->nkeys; k++) cols.push_back("g." + C(k) + " AS " + C(k));
        for (size_t k = 0; k < r->aggs.size(); k++) {
          const AggCall &a = r->aggs[k];
          std::string arg = a.arg < 0 ? "*" : "g." + C(a.arg);
          cols.push_back(a.fn + "(" + arg + ") AS " + C(r->nkeys + static_cast<int>(k)));
          if (a.fn == "avg") cols.push_back("count(" + arg + ") AS n" + std::to_string(k));
        }
        sql = "SELECT " + Join(cols, ", ") + " FROM " + (r->nkeys > 0 ? G(r) : F(r->inputs[0].get())) + " g";
        if (r->nkeys > 0) sql += " GROUP BY g.grid, " + Join(keys, ", ");
        break;
      }
      case RelKind::UnionAll: {
        std::vector<std::string> branches;
        for (size_t b = 0; b < r->inputs.size(); b++) {
          std::vector<std::string> cols{std::to_string(b) + " AS br", "rid AS srid"};
          for (size_t k = 0; k < r->cols.size(); k++)
            cols.push_back("CAST(" + C(k) + " AS " + r->cols[k].sql + ") AS " + C(k));
          branches.push_back("SELECT " + Join(cols, ", ") + " FROM " + F(r->inputs[b].get()));
        }
        sql = "SELECT row_number() OVER () AS rid, u.* FROM (" + Join(branches, " UNION ALL ") + ") u";
        break;
      }
      case RelKind::Scalar:
        sql = "SELECT 1::bigint AS rid, (SELECT s.c0 FROM " + F(r->inputs[0].get()) + " s) AS c0";
        break;
    }
    ctes.push_back(f + " AS MATERIALIZED (" + sql + ")");
  }

  // Materializes b<id> from the contributions of r's readers; false when no
  // gradient reaches r.
  bool MakeCotangent(Rel *r, std::vector<std::string> &ctes) {
    auto it = contribs_.find(r);
    if (it == contribs_.end() || it->second.empty()) return false;
    auto &cs = it->second;
    std::set<int> cols;
    for (const auto &c : cs) cols.insert(c.cols.begin(), c.cols.end());
    std::string sql;
    if (cs.size() == 1) {
      sql = cs[0].sql;
    } else {
      std::vector<std::string> parts, sums;
      for (const auto &c : cs) {
        std::vector<std::string> sel{"q.rid"};
        for (int j : cols) sel.push_back((c.cols.count(j) ? "q." + D(j) : "NULL::float8") + " AS " + D(j));
        parts.push_back("SELECT " + Join(sel, ", ") + " FROM (" + c.sql + ") q");
      }
      for (int j : cols) sums.push_back("sum(z." + D(j) + ") AS " + D(j));
      sql = "SELECT z.rid, " + Join(sums, ", ") + " FROM (" + Join(parts, " UNION ALL ") + ") z GROUP BY z.rid";
    }
    ctes.push_back(B(r) + " AS MATERIALIZED (" + sql + ")");
    bcols_[r] = cols;
    return true;
  }

  static std::string SumTerms(const std::vector<std::string> &terms) {
    std::vector<std::string> t;
    for (const auto &x : terms) t.push_back("COALESCE(" + x + ", 0::float8)");
    return "(" + Join(t, " + ") + ")";
  }

  bool AnyActive(const Rel *r) const {
    for (bool a : active_.at(r))
      if (a) return true;
    return false;
  }

  void Contribute(const RelP &to, std::string sql, std::set<int> cols) {
    if (cols.empty() || !AnyActive(to.get())) return;
    contribs_[to.get()].push_back({std::move(sql), std::move(cols)});
  }

  // One reverse rule per relation kind: from b<r> to contributions to r's inputs.
  void ReverseRule(Rel *r) {
    const std::set<int> &bc = bcols_.at(r);
    std::string b = B(r);
    switch (r->kind) {
      case RelKind::Scan:
      case RelKind::Values:
      case RelKind::Function:
        return;
      case RelKind::Filter:
      case RelKind::Limit:
        Contribute(r->inputs[0], "SELECT * FROM " + b, bc);
        return;
      case RelKind::Scalar:
        Contribute(r->inputs[0], "SELECT s.rid, b.d0 FROM " + b + " b CROSS JOIN " + F(r->inputs[0].get()) + " s",
                   bc);
        return;
      case RelKind::Project: {
        Resolver in0 = [](int, int col) { return "i." + C(col); };
        const auto &act = active_.at(r->inputs[0].get());
        std::map<int, std::vector<std::string>> terms;
        for (int o : bc) {
          if (ContainsVolatile(r->exprs[o]))
            throw Error(sqlstate::kFeatureNotSupported, "volatile function on the gradient path",
                        "A volatile function would be evaluated again by the backward pass and see other values.",
                        "Compute its values into a table first.", r->exprs[o]->position);
          Backprop(r->exprs[o], "b." + D(o), in0, act, terms);
        }
        std::vector<std::string> sel{"i.rid"};
        std::set<int> cols;
        for (auto &[j, t] : terms) {
          sel.push_back(SumTerms(t) + " AS " + D(j));
          cols.insert(j);
        }
        Contribute(r->inputs[0],
                   "SELECT " + Join(sel, ", ") + " FROM " + F(r->inputs[0].get()) + " i JOIN " + b +
                       " b ON b.rid = i.rid",
                   cols);
        return;
      }
      case RelKind::Join: {
        int nl = static_cast<int>(r->inputs[0]->cols.size());
        for (int side = 0; side < 2; side++) {
          std::vector<std::string> sel{std::string("j.") + (side ? "rrid" : "lrid") + " AS rid"};
          std::set<int> cols;
          for (int j : bc) {
            if ((j < nl) != (side == 0)) continue;
            int k = side ? j - nl : j;
            sel.push_back("sum(b." + D(j) + ") AS " + D(k));
            cols.insert(k);
          }
          std::string key = side ? "j.rrid" : "j.lrid";
          Contribute(r->inputs[side],
                     "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + F(r) + " j ON j.rid = b.rid WHERE " +
                         key + " IS NOT NULL GROUP BY " + key,
                     cols);
        }
        return;
      }
      case RelKind::Aggregate: {
        std::map<int, std::vector<std::string>> terms;
        for (int o : bc) {
          if (o < r->nkeys) {
            if (!r->distinct)
              throw Error(sqlstate::kFeatureNotSupported, "GROUP BY key depends on a parameter",
                          "A group key carries gradient, but grouping by a value has no derivative.",
                          "Group by columns that do not depend on the parameter, or wrap the key in stop_gradient(...).");
            terms[o].push_back("b." + D(o) + " / count(*) OVER (PARTITION BY a.rid)");
            continue;
          }
          int k = o - r->nkeys;
          const AggCall &ag = r->aggs[k];
          std::string x = "i." + C(ag.arg), y = "a." + C(o), d = "b." + D(o);
          if (ag.fn == "sum")
            terms[ag.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE " + d + " END");
          else if (ag.fn == "avg")
            terms[ag.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE " + d + " / a.n" + std::to_string(k) +
                                    " END");
          else if (ag.fn == "min" || ag.fn == "max")
            // Tied rows share the gradient evenly.
            terms[ag.arg].push_back("CASE WHEN " + x + " = " + y + " THEN " + d + " / count(*) FILTER (WHERE " + x +
                                    " = " + y + ") OVER (PARTITION BY a.rid) END");
          else
            throw Error(sqlstate::kFeatureNotSupported, "aggregate " + ag.fn + " has no derivative rule",
                        "Gradient reaches an aggregate that ddx does not differentiate.",
                        "Use sum, avg, min or max, or wrap its argument in stop_gradient(...).");
        }
        std::vector<std::string> sel{"i.rid"};
        std::set<int> cols;
        for (auto &[j, t] : terms) {
          sel.push_back(SumTerms(t) + " AS " + D(j));
          cols.insert(j);
        }
        std::string from = r->nkeys > 0 ? G(r) + " i JOIN " + F(r) + " a ON a.rid = i.grid"
                                        : F(r->inputs[0].get()) + " i CROSS JOIN " + F(r) + " a";
        Contribute(r->inputs[0], "SELECT " + Join(sel, ", ") + " FROM " + from + " JOIN " + b + " b ON b.rid = a.rid",
                   cols);
        return;
      }
      case RelKind::UnionAll:
        for (size_t k = 0; k < r->inputs.size(); k++) {
          std::vector<std::string> sel{"u.srid AS rid"};
          for (int j : bc) sel.push_back("b." + D(j));
          Contribute(r->inputs[k],
                     "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + F(r) + " u ON u.rid = b.rid WHERE u.br = " +
                         std::to_string(k),
                     bc);
        }
        return;
    }
  }

  RelP loss_;
  std::vector<Rel *> order_;
  std::map<const Rel *, int> id_;
  int next_id_ = 1;
  int forward_steps_ = 0;
  std::map<const Rel *, std::vector<bool>> active_;
  std::map<const Rel *, std::vector<Contrib>> contribs_;
  std::map<const Rel *, std::set<int>> bcols_;
};

}  // namespace

std::vector<bool> ActiveColumns(const RelP &rel) {
  Builder b(rel);
  return b.Active(rel.get());
}

Program BuildGradientProgram(const RelP &loss) {
  Builder b(loss);
  return b.Gradient();
}

std::string BuildForwardSql(const RelP &loss) {
  Builder b(loss);
  std::string ctes = b.Forward();
  return "WITH " + ctes + "\nSELECT * FROM " + b.F(loss.get());
}

}  // namespace ddx
