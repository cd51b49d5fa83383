// The program builder (see program.h).
//
// What is saved and what is recomputed. Only some relations are materialized
// as CTEs: aggregates (the tape stays the size of a layer's outputs), windows,
// VALUES and functions, set operations, LIMIT, scalar subqueries, the loss,
// the relations of sublinks, scans that one of those reads (they carry the
// rows' identity; other plain tables are read in place, ctid their rid), and a
// projection whose composed expressions grew too large. Every other relation
// (projection, filter, inner and left join) is row-local: it is compiled into
// a *region*, one flat FROM/WHERE over the materialized relations below it
// (its leaves) whose output columns are expressions over the leaves' columns.
// PostgreSQL runs a region as one pipelined join, never storing its rows.
//
// Backward: a materialized relation that gradient reaches gets a cotangent CTE
// b<id> (rid, d<j> per column j that carries gradient), the sum of its readers'
// contributions. A reader's reverse rule recomputes its input region, pairs
// each region row with the cotangent it owes (an aggregate: by its group keys,
// the contraction transpose of DESIGN.md: a matmul's gradient joins the
// cotangent with the other side and sums by the keys), differentiates the
// composed expressions with the rules of rules.h, and sums the products by
// each leaf's rid. Forward values are computed once per row (Lets), and a
// product's factor is differentiated at its own grain (Deferred). A window's
// reverse rule runs windows over the transposed frame (Transpose).
#include "ddx/core/program.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "ddx/core/rules.h"
#include "ddx/core/shift.h"

namespace ddx {
namespace {

std::string C(int i) { return "c" + std::to_string(i); }
std::string D(int i) { return "d" + std::to_string(i); }
// An SQL string literal.
std::string Quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}
std::string Join(const std::vector<std::string> &v, const std::string &sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
  return s;
}

// Side of a column of leaf k in a region's expressions (0 and 1 are taken:
// the relation under evaluation and a sublink's relation).
constexpr int kLeafSide = 2;

using Resolver = std::function<std::string(int side, int col)>;
using ActiveFn = std::function<bool(int side, int col)>;
using Terms = std::map<std::pair<int, int>, std::vector<std::string>>;  // (side, col) -> adjoint terms

struct Contrib {
  std::string sql;
  std::set<int> cols;
  bool carries = false;  // its rows also have the relation's saved columns c<j> (see Carries)
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

size_t ExprSize(const ExprP &e) {
  if (!e) return 0;
  size_t n = 1;
  for (const auto &a : e->args) n += ExprSize(a);
  return n + ExprSize(e->test) + ExprSize(e->corr);
}

// e with every side-0 column j replaced by cols[j].
ExprP Substitute(const ExprP &e, const std::vector<ExprP> &cols) {
  if (!e) return e;
  if (e->kind == ExprKind::Col) return e->side == 0 ? cols.at(e->col) : e;
  if (e->args.empty() && !e->test && !e->corr) return e;
  auto c = std::make_shared<Expr>(*e);
  for (auto &a : c->args) a = Substitute(a, cols);
  c->test = Substitute(e->test, cols);
  c->corr = Substitute(e->corr, cols);
  return c;
}

void CollectCols(const ExprP &e, std::set<std::pair<int, int>> &out) {
  if (!e) return;
  if (e->kind == ExprKind::Col && e->side >= kLeafSide) out.insert({e->side, e->col});
  for (const auto &a : e->args) CollectCols(a, out);
  CollectCols(e->test, out);
  CollectCols(e->corr, out);
}

const Type kBool{"pg_catalog.bool", false};

ExprP MakeOpaque(const std::string &tmpl, std::vector<ExprP> args, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Opaque;
  e->text = tmpl;
  e->name = tmpl;
  e->args = std::move(args);
  e->type = std::move(t);
  return e;
}

// A row-local relation compiled over its materialized leaves.
struct Item {
  std::string from;                 // FROM clause (joins of leaf aliases)
  std::vector<ExprP> pending;       // conditions for the nearest eligible ON, else WHERE
  std::vector<ExprP> cols;          // output columns over leaf space
  int first_leaf = 0, nleaves = 0;  // leaves [first_leaf, first_leaf + nleaves)
};

struct Region {
  std::vector<const Rel *> leaves;
  Item item;
  std::vector<ExprP> conds;  // join and filter conditions, over leaf space
  bool outer = false;        // a LEFT join: conds are not all of the region's conditions
  std::string Alias(int k) const { return "a" + std::to_string(k); }
};

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
// compares one column instead of a stand-in and a NULL flag (attention's
// p·v backward probes 526k rows: 278 -> 261 ms).
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

// --- window frames -----------------------------------------------------------

std::string BoundSql(const FrameBound &b) {
  switch (b.kind) {
    case BoundKind::UnboundedPreceding:
      return "UNBOUNDED PRECEDING";
    case BoundKind::Preceding:
      return b.offset + " PRECEDING";
    case BoundKind::CurrentRow:
      return "CURRENT ROW";
    case BoundKind::Following:
      return b.offset + " FOLLOWING";
    case BoundKind::UnboundedFollowing:
      return "UNBOUNDED FOLLOWING";
  }
  return "";
}

std::string FrameSql(const Frame &f) {
  const char *mode = f.mode == FrameMode::Rows ? "ROWS" : f.mode == FrameMode::Groups ? "GROUPS" : "RANGE";
  return std::string(mode) + " BETWEEN " + BoundSql(f.start) + " AND " + BoundSql(f.end) +
         (f.exclude.empty() ? "" : " EXCLUDE " + f.exclude);
}

// The transposed frame: row k is in the frame of row j exactly when j is in
// the transposed frame of k (k in [j-p, j+f] <=> j in [k-f, k+p]). Exclusions
// are symmetric. So the cotangent of a windowed sum's argument is the
// windowed sum of the output cotangents over the transposed frame.
Frame Transpose(const Frame &f) {
  auto mirror = [](const FrameBound &b) {
    FrameBound m = b;
    switch (b.kind) {
      case BoundKind::UnboundedPreceding:
        m.kind = BoundKind::UnboundedFollowing;
        break;
      case BoundKind::Preceding:
        m.kind = BoundKind::Following;
        break;
      case BoundKind::CurrentRow:
        break;
      case BoundKind::Following:
        m.kind = BoundKind::Preceding;
        break;
      case BoundKind::UnboundedFollowing:
        m.kind = BoundKind::UnboundedPreceding;
        break;
    }
    return m;
  };
  Frame t = f;
  t.start = mirror(f.end);
  t.end = mirror(f.start);
  return t;
}

bool HasOffset(const Frame &f) {
  return f.start.kind == BoundKind::Preceding || f.start.kind == BoundKind::Following ||
         f.end.kind == BoundKind::Preceding || f.end.kind == BoundKind::Following;
}

bool IsRank(const std::string &fn) { return fn == "row_number" || fn == "rank" || fn == "dense_rank"; }

// Whether a window's values depend on the order of rows its ORDER BY leaves
// tied (PostgreSQL leaves that order unspecified, so the forward and the
// backward could each see another one).
bool OrderSensitive(const Rel *w) {
  bool rows_frame = w->frame.mode == FrameMode::Rows && !(w->frame.start.kind == BoundKind::UnboundedPreceding &&
                                                          w->frame.end.kind == BoundKind::UnboundedFollowing);
  for (const auto &c : w->wins) {
    if (c.fn == "row_number" || c.fn == "lag" || c.fn == "lead") return true;
    if (!IsRank(c.fn) && rows_frame) return true;
  }
  return false;
}

bool IsBoolType(const Type &t) { return t.sql == "pg_catalog.bool" || t.sql == "boolean"; }

class Builder {
 public:
  explicit Builder(const RelP &loss) : loss_(loss) {
    Visit(loss);
    CheckRanks();
    held_ = HeldMaxima(loss.get(), order_);  // a softmax's max: constant (shift.h)
    for (Rel *r : order_) active_[r] = Activity(r);
    for (Rel *r : order_) notnull_[r] = NotNull(r);
    DecideMaterialized();
  }

  std::string Forward() {
    std::vector<std::string> ctes;
    for (Rel *r : order_)
      if (mat_.count(r) && !direct_.count(r)) EmitForward(r, ctes);
    return Join(ctes, ",\n");
  }

  Program Gradient() {
    if (loss_->cols.size() != 1 || !loss_->cols[0].differentiable)
      throw Error(sqlstate::kInvalidParameterValue, "loss must be one row and one numeric column");
    std::vector<std::string> ctes;
    for (Rel *r : order_)
      if (mat_.count(r) && !direct_.count(r)) EmitForward(r, ctes);
    int nforward = static_cast<int>(ctes.size());
    Rel *L = loss_.get();
    if (active_[L][0])
      contribs_[L].push_back({"SELECT rid, 1::float8 AS d0 FROM " + F(L) + " WHERE c0 IS NOT NULL", {0}});
    std::vector<std::string> finals;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      Rel *r = *it;
      if (!mat_.count(r) || !MakeCotangent(r, ctes)) continue;
      if (r->kind == RelKind::Scan) {
        for (int j : bcols_[r])
          if (r->param[j] >= 0)
            finals.push_back(direct_.count(r)
                                 ? "SELECT CAST(" + Quote(r->table) +
                                       " AS pg_catalog.regclass)::pg_catalog.oid AS toid, b.rid AS tid, " +
                                       std::to_string(r->param[j]) + " AS pidx, b." + D(j) + " AS g FROM " + B(r) + " b"
                                 : "SELECT f.toid, f.tid, " + std::to_string(r->param[j]) + " AS pidx, b." + D(j) +
                                       " AS g FROM " + F(r) + " f JOIN " + B(r) + " b ON b.rid = f.rid");
      } else {
        extra_ctes_ = &ctes;
        ReverseRule(r);
        extra_ctes_ = nullptr;
      }
    }
    finals.push_back("SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g FROM " + F(L));
    // the loss's value, for ddx_value(loss): from this same pass
    finals.push_back("SELECT NULL::oid, NULL::tid, " + std::to_string(kLossValue) + ", c0::float8 FROM " + F(L));
    // pidx = -3: rows whose window values depend on how PostgreSQL orders
    // ties (the runner refuses the gradient when there are any).
    for (Rel *r : order_)
      if (r->kind == RelKind::Window && OrderSensitive(r))
        finals.push_back("SELECT NULL::oid, NULL::tid, -3, count(*)::float8 FROM " + F(r) + " WHERE tie > 0");
    Program p;
    p.forward_steps = nforward;
    p.backward_steps = static_cast<int>(ctes.size()) - nforward;
    std::string tail = "\nSELECT z.toid, z.tid, z.pidx::int4, sum(z.g)::float8 AS g FROM (\n" +
                       Join(finals, "\nUNION ALL\n") + "\n) z GROUP BY z.toid, z.tid, z.pidx";
    Stream(ctes, nforward, tail);
    p.sql = "WITH " + Join(ctes, ",\n") + tail;
    return p;
  }

  // A backward step that only one later step reads is not stored: NOT
  // MATERIALIZED, PostgreSQL plans it inside its reader, whose join consumes
  // its rows as they come (the matmul's 80k cotangents of its products,
  // built straight into the hash of the transposed join: program 572 -> 554
  // ms). Backward steps are read in FROM lists only (sublinks read forward
  // steps), so an inlined step is never run once per row of a subplan. A
  // reference is a whole word of the program text; a user's column of the
  // same name would only keep a step stored.
  static void Stream(std::vector<std::string> &ctes, int from, const std::string &tail) {
    // every identifier of the program, counted in one pass (a step's own
    // definition is one of its name's occurrences)
    std::map<std::string, size_t> count;
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    auto scan = [&](const std::string &text) {
      for (size_t at = 0; at < text.size();) {
        if (!ident(text[at])) {
          at++;
          continue;
        }
        size_t end = at;
        while (end < text.size() && ident(text[end])) end++;
        count[text.substr(at, end - at)]++;
        at = end;
      }
    };
    for (const auto &c : ctes) scan(c);
    scan(tail);
    const std::string kept = " AS MATERIALIZED (";
    for (size_t i = static_cast<size_t>(from); i < ctes.size(); i++) {
      std::string name = ctes[i].substr(0, ctes[i].find(' '));
      if (ctes[i].compare(name.size(), kept.size(), kept) != 0) Internal("step without its name: " + name);
      if (count[name] == 2) ctes[i].replace(name.size(), kept.size(), " AS NOT MATERIALIZED (");
    }
  }

  std::string F(const Rel *r) const { return "f" + std::to_string(id_.at(r)); }
  std::string B(const Rel *r) const { return "b" + std::to_string(id_.at(r)); }
  const std::vector<bool> &Active(const Rel *r) const { return active_.at(r); }

 private:
  // --- the relation graph ---------------------------------------------------

  void Visit(const RelP &r) {
    if (id_.count(r.get())) return;
    id_[r.get()] = -1;
    for (const auto &in : r->inputs) Visit(in);
    for (const auto &e : Exprs(r.get())) VisitSublinks(e);
    id_[r.get()] = next_id_++;
    order_.push_back(r.get());
  }
  static std::vector<ExprP> Exprs(const Rel *r) {
    std::vector<ExprP> exprs;
    if (r->kind != RelKind::Function) exprs = r->exprs;
    if (r->cond) exprs.push_back(r->cond);
    for (const auto &row : r->rows) exprs.insert(exprs.end(), row.begin(), row.end());
    return exprs;
  }
  void VisitSublinks(const ExprP &e) {
    if (!e) return;
    if (e->kind == ExprKind::Sublink) {
      Visit(e->sub);
      sublink_rels_.insert(e->sub.get());
    }
    for (const auto &a : e->args) VisitSublinks(a);
    VisitSublinks(e->test);
    VisitSublinks(e->corr);
  }

  static constexpr int kSavedLeaves = 4;

  static bool RowLocal(const Rel *r) {
    return r->kind == RelKind::Project || r->kind == RelKind::Filter ||
           (r->kind == RelKind::Join && r->join != JoinKind::Full);
  }

  // Which relations are CTEs; the others are compiled into their readers' regions.
  void DecideMaterialized() {
    std::set<const Rel *> cte;  // read by name (rid, c<j>), not through a region
    for (Rel *r : order_) {
      if (RowLocal(r)) continue;
      mat_.insert(r);
      // Set operations, LIMIT, scalar subqueries and FULL joins read saved inputs.
      if (r->kind != RelKind::Aggregate && r->kind != RelKind::Window)
        for (const auto &in : r->inputs) mat_.insert(in.get()), cte.insert(in.get());
    }
    // A compound row-local relation (LayerNorm's output over the residual
    // stream: ten leaves at one layer) that is one side of a contraction (an
    // aggregate grouped by keys of both sides of a join, so that each row of
    // one side is repeated for each matching row of the other) is saved, once
    // per its own row: compiled into the contraction's region it was
    // recomputed from all its leaves for every joined row (the GPT's logits:
    // 77,824 rows of a 1,024-row LayerNorm; its gradient 1.4-1.7 s -> 0.55-0.64
    // s). Relations of fewer leaves (attention's p = e / z, a matmul's inputs)
    // stay compiled into their readers, where a costly value is computed
    // below the join; a join that does not repeat rows (a loss's average over
    // samples) saves nothing.
    std::function<int(const Rel *)> leaves = [&](const Rel *x) {
      if (mat_.count(x)) return 1;
      int n = 0;
      for (const auto &in : x->inputs) n += leaves(in.get());
      return n;
    };
    for (Rel *r : order_) {
      if (r->kind != RelKind::Aggregate || r->nkeys == 0) continue;
      // the group keys as columns of the first join below, through projections and filters
      const Rel *x = r->inputs[0].get();
      std::vector<int> keys;
      for (int k = 0; k < r->nkeys; k++) keys.push_back(k);
      while (!mat_.count(x) && (x->kind == RelKind::Project || x->kind == RelKind::Filter)) {
        if (x->kind == RelKind::Project)
          for (int &k : keys) {
            const ExprP &e = x->exprs.at(k);
            k = e->kind == ExprKind::Col && e->side == 0 ? e->col : -1;
          }
        x = x->inputs[0].get();
      }
      if (mat_.count(x) || x->kind != RelKind::Join || x->join != JoinKind::Inner) continue;
      int nl = static_cast<int>(x->inputs[0]->cols.size());
      bool left = false, right = false;
      for (int k : keys)
        if (k >= 0) (k < nl ? left : right) = true;
      if (!left || !right) continue;
      for (const auto &side : x->inputs)
        if (RowLocal(side.get()) && leaves(side.get()) >= kSavedLeaves) mat_.insert(side.get());
    }
    mat_.insert(loss_.get());
    cte.insert(loss_.get());
    for (const Rel *s : sublink_rels_) mat_.insert(const_cast<Rel *>(s)), cte.insert(s);
    // Scans that only regions read are read in place: no copy of the table,
    // the planner sees its statistics, and ctid is the row's rid.
    for (Rel *r : order_)
      if (r->kind == RelKind::Scan && r->single && !cte.count(r)) direct_.insert(r);
    // Composition inlines a projection's expressions into every use: keep
    // chains of projections from growing without bound.
    for (Rel *r : order_) {
      if (mat_.count(r) || r->kind != RelKind::Project) continue;
      Region reg = Compile(r, true);
      size_t biggest = 0;
      for (const auto &e : reg.item.cols) biggest = std::max(biggest, ExprSize(e));
      if (biggest > 64) mat_.insert(r);
    }
  }

  // --- ranks ----------------------------------------------------------------

  // Ranks (row_number, rank, dense_rank) may be compared (WHERE rn <= k keeps
  // the top k, whose rows get the gradient) and passed through, never
  // computed with: their derivative is zero where it exists and undefined
  // where the order changes. A rank column may appear inside any boolean
  // expression; anywhere else only as a bare column.
  void CheckRanks() {
    std::map<const Rel *, std::vector<bool>> rank;
    auto refuse = [](const std::string &what) {
      throw Error(sqlstate::kFeatureNotSupported, "rank used as a value " + what,
                  "row_number(), rank() and dense_rank() are differentiated only as filters (top-k): a rank is "
                  "piecewise constant, so its derivative is zero where it exists and undefined where the order "
                  "changes.",
                  "Compare the rank in a WHERE clause (WHERE rn <= k) instead of computing with it.");
    };
    std::function<void(const ExprP &, const std::vector<bool> &, bool)> walk =
        [&](const ExprP &e, const std::vector<bool> &cols, bool in_bool) {
          if (!e) return;
          bool ok = in_bool || IsBoolType(e->type);
          if (e->kind == ExprKind::Col && e->side == 0 && e->col >= 0 && cols.at(e->col) && !ok)
            refuse("in an expression of the loss");
          for (const auto &a : e->args) walk(a, cols, ok);
          walk(e->test, cols, true);
          walk(e->corr, cols, true);
        };
    for (Rel *r : order_) {
      std::vector<bool> rk(r->cols.size(), false);
      auto in = [&](size_t k) -> const std::vector<bool> & { return rank.at(r->inputs[k].get()); };
      switch (r->kind) {
        case RelKind::Scan:
        case RelKind::Values:
        case RelKind::Function:
          break;
        case RelKind::Project:
          for (size_t i = 0; i < r->exprs.size(); i++) {
            const ExprP &e = r->exprs[i];
            if (e->kind == ExprKind::Col && e->side == 0)
              rk[i] = in(0).at(e->col);
            else
              walk(e, in(0), false);
          }
          break;
        case RelKind::Filter:
        case RelKind::Limit:
        case RelKind::Scalar:
          rk = in(0);
          walk(r->cond, rk, true);
          break;
        case RelKind::Join: {
          rk = in(0);
          rk.insert(rk.end(), in(1).begin(), in(1).end());
          walk(r->cond, rk, true);
          break;
        }
        case RelKind::UnionAll:
          for (size_t k = 0; k < r->inputs.size(); k++)
            for (size_t i = 0; i < rk.size(); i++) rk[i] = rk[i] || in(k)[i];
          break;
        case RelKind::Aggregate:
          for (int k = 0; k < r->nkeys; k++) rk[k] = in(0)[k];
          for (const auto &a : r->aggs)
            if (a.arg >= 0 && in(0)[a.arg] && a.fn != "count") refuse("in the aggregate " + a.fn + "()");
          break;
        case RelKind::Window: {
          const auto &i0 = in(0);
          for (size_t i = 0; i < i0.size(); i++) rk[i] = i0[i];
          for (size_t k = 0; k < r->wins.size(); k++) {
            const WinCall &w = r->wins[k];
            if (((w.arg >= 0 && i0[w.arg]) || (w.dflt >= 0 && i0[w.dflt])) && w.fn != "count")
              refuse("in the window function " + w.fn + "()");
            rk[i0.size() + k] = IsRank(w.fn);
          }
          break;
        }
      }
      rank[r] = rk;
    }
    for (bool b : rank.at(loss_.get()))
      if (b) refuse("as the loss");
  }

  // --- columns that cannot be NULL -------------------------------------------

  // NOT NULL columns of tables, and columns that an inner join or a filter
  // compares with a strict operator (a NULL there would have dropped the
  // row), carried through projections, group keys and windows. An
  // aggregate's backward pairs rows with their group on such keys with a
  // plain equality, which PostgreSQL estimates and hashes far better than
  // the NULL-safe one (matmul and attention: its join cost was overestimated
  // 300-fold, which made the planner sort 1.28M rows instead of hashing).
  std::vector<bool> NotNull(const Rel *r) const {
    std::vector<bool> nn(r->cols.size(), false);
    auto in = [&](size_t k) -> const std::vector<bool> & { return notnull_.at(r->inputs[k].get()); };
    auto compared = [](const ExprP &cond, std::vector<bool> &v) {
      std::function<void(const ExprP &)> conj = [&](const ExprP &e) {
        if (!e || e->kind != ExprKind::Opaque) return;
        if (e->name == "AND") {
          for (const auto &a : e->args) conj(a);
        } else if (e->strict) {
          for (const auto &a : e->args)
            if (a->kind == ExprKind::Col && a->side == 0 && a->col >= 0 && a->col < static_cast<int>(v.size()))
              v[a->col] = true;
        }
      };
      conj(cond);
    };
    switch (r->kind) {
      case RelKind::Scan:
        for (size_t i = 0; i < nn.size() && i < r->notnull.size(); i++) nn[i] = r->notnull[i];
        break;
      case RelKind::Project:
        for (size_t i = 0; i < nn.size(); i++) {
          const ExprP &e = r->exprs[i];
          if (e->kind == ExprKind::Col && e->side == 0) nn[i] = in(0).at(e->col);
          if (e->kind == ExprKind::Const) nn[i] = e->text.rfind("NULL", 0) != 0;
        }
        break;
      case RelKind::Filter:
        nn = in(0);
        compared(r->cond, nn);
        break;
      case RelKind::Limit:
        nn = in(0);
        break;
      case RelKind::Join:
        if (r->join == JoinKind::Full) break;
        nn = in(0);
        if (r->join == JoinKind::Inner) {
          nn.insert(nn.end(), in(1).begin(), in(1).end());
          compared(r->cond, nn);
        } else {
          nn.resize(r->cols.size(), false);
        }
        break;
      case RelKind::Aggregate:
        for (int k = 0; k < r->nkeys; k++) nn[k] = in(0)[k];
        for (size_t k = 0; k < r->aggs.size(); k++) nn[r->nkeys + k] = r->aggs[k].fn == "count";
        break;
      case RelKind::Window:
        for (size_t i = 0; i < in(0).size(); i++) nn[i] = in(0)[i];
        break;
      case RelKind::UnionAll:
        std::fill(nn.begin(), nn.end(), true);
        for (size_t k = 0; k < r->inputs.size(); k++)
          for (size_t i = 0; i < nn.size(); i++) nn[i] = nn[i] && in(k)[i];
        break;
      case RelKind::Values:
      case RelKind::Function:
      case RelKind::Scalar:
        break;
    }
    return nn;
  }

  // --- activity -------------------------------------------------------------

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
      case RelKind::Project: {
        const auto &a0 = in(0);
        ActiveFn fn = [&](int side, int col) { return side == 0 && a0[col]; };
        for (size_t i = 0; i < act.size(); i++) act[i] = IsActive(r->exprs[i], fn);
        break;
      }
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
      case RelKind::Window: {
        const auto &i0 = in(0);
        size_t n = i0.size();
        for (size_t i = 0; i < n; i++) act[i] = i0[i];
        for (size_t k = 0; k < r->wins.size(); k++) {
          const WinCall &w = r->wins[k];
          bool a = (w.arg >= 0 && i0[w.arg]) || (w.dflt >= 0 && i0[w.dflt]);
          act[n + k] = a && w.fn != "count" && !IsRank(w.fn) && r->cols[n + k].differentiable;
        }
        break;
      }
    }
    for (const auto &[rel, col] : held_)
      if (rel == r) act[col] = false;
    return act;
  }

  static bool IsActive(const ExprP &e, const ActiveFn &act) {
    if (!e || !e->type.differentiable) return false;
    switch (e->kind) {
      case ExprKind::Col:
        return e->side != 1 && act(e->side, e->col);
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
  static bool IsActiveAny(const ExprP &e, const ActiveFn &act) {
    if (!e) return false;
    if (e->kind == ExprKind::Col) return e->side != 1 && act(e->side, e->col);
    for (const auto &a : e->args)
      if (IsActiveAny(a, act)) return true;
    return false;
  }

  // --- regions --------------------------------------------------------------

  // The region of r: r compiled over the materialized relations below it. With
  // `through`, r itself is compiled even when it is materialized (its own CTE).
  Region Compile(const Rel *r, bool through) {
    Region reg;
    reg.item = CompileItem(r, through, reg);
    return reg;
  }

  Item CompileItem(const Rel *r, bool through, Region &reg) {
    if (mat_.count(r) && !through) {
      int k = static_cast<int>(reg.leaves.size());
      reg.leaves.push_back(r);
      Item it;
      it.from = LeafFrom(r, reg.Alias(k));
      it.first_leaf = k;
      it.nleaves = 1;
      for (size_t i = 0; i < r->cols.size(); i++) {
        auto c = std::make_shared<Expr>();
        c->kind = ExprKind::Col;
        c->side = kLeafSide + k;
        c->col = static_cast<int>(i);
        c->type = r->cols[i];
        it.cols.push_back(c);
      }
      return it;
    }
    switch (r->kind) {
      case RelKind::Project: {
        Item it = CompileItem(r->inputs[0].get(), false, reg);
        std::vector<ExprP> cols;
        for (const auto &e : r->exprs) cols.push_back(Substitute(e, it.cols));
        it.cols = cols;
        return it;
      }
      case RelKind::Filter: {
        Item it = CompileItem(r->inputs[0].get(), false, reg);
        it.pending.push_back(Substitute(r->cond, it.cols));
        reg.conds.push_back(it.pending.back());
        return it;
      }
      case RelKind::Join: {
        Item l = CompileItem(r->inputs[0].get(), false, reg);
        Item rr = CompileItem(r->inputs[1].get(), false, reg);
        Item it;
        it.first_leaf = l.first_leaf;
        it.nleaves = l.nleaves + rr.nleaves;
        std::vector<ExprP> rcols = rr.cols;
        if (r->join == JoinKind::Left) {
          reg.outer = true;
          // The right side's computed values are NULL where the row is NULL-extended.
          ExprP missing = MakeOpaque("($1 IS NULL)", {LeafRid(rr.first_leaf)}, kBool);
          for (auto &c : rcols) {
            if (c->kind == ExprKind::Col) continue;
            auto nul = std::make_shared<Expr>();
            nul->kind = ExprKind::Const;
            nul->type = c->type;
            nul->text = "NULL::" + c->type.sql;
            auto cs = std::make_shared<Expr>();
            cs->kind = ExprKind::Case;
            cs->type = c->type;
            cs->args = {missing, nul, c};
            c = cs;
          }
        }
        it.cols = l.cols;
        it.cols.insert(it.cols.end(), rcols.begin(), rcols.end());
        std::vector<ExprP> on;
        if (r->cond) on.push_back(Substitute(r->cond, it.cols));
        // (A LEFT join's ON does not hold for its unmatched rows.)
        if (r->cond && r->join == JoinKind::Inner) reg.conds.push_back(on.back());
        if (r->join == JoinKind::Inner) {
          on.insert(on.end(), l.pending.begin(), l.pending.end());
          on.insert(on.end(), rr.pending.begin(), rr.pending.end());
        } else {  // LEFT: the right side's filters restrict matches; the left side's rise
          on.insert(on.end(), rr.pending.begin(), rr.pending.end());
          it.pending = l.pending;
        }
        Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
        std::vector<std::string> conds;
        for (const auto &c : on) conds.push_back(Sql(c, res));
        it.from = "(" + l.from + (r->join == JoinKind::Inner ? " JOIN " : " LEFT JOIN ") + rr.from + " ON " +
                  (conds.empty() ? "true" : Join(conds, " AND ")) + ")";
        return it;
      }
      default:
        Internal("relation of this kind is not row-local");
    }
  }

  // A materialized relation in a FROM clause: its CTE, or a plain table read in place.
  std::string LeafFrom(const Rel *r, const std::string &alias) const {
    return direct_.count(r) ? std::string(r->only ? "ONLY " : "") + r->table + " " + alias : F(r) + " " + alias;
  }

  // A leaf's rid as an expression (side kLeafSide + k, column -1).
  static ExprP LeafRid(int k) {
    auto c = std::make_shared<Expr>();
    c->kind = ExprKind::Col;
    c->side = kLeafSide + k;
    c->col = -1;
    c->type = Type{"bigint", false};
    return c;
  }

  std::string LeafCol(const Region &reg, int side, int col) const {
    if (side < kLeafSide) Internal("column outside a region");
    int k = side - kLeafSide;
    const Rel *leaf = reg.leaves.at(k);
    if (direct_.count(leaf)) return reg.Alias(k) + (col < 0 ? std::string(".ctid") : "." + leaf->names.at(col));
    return reg.Alias(k) + (col < 0 ? std::string(".rid") : "." + C(col));
  }

  std::string Where(const Region &reg, const std::vector<ExprP> &pending) const {
    Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
    std::vector<std::string> w;
    for (const auto &c : pending) w.push_back(Sql(c, res));
    return w.empty() ? "" : " WHERE " + Join(w, " AND ");
  }

  ActiveFn LeafActivity(const Region &reg) const {
    return [this, &reg](int side, int col) {
      if (side < kLeafSide || col < 0) return false;
      return active_.at(reg.leaves[side - kLeafSide])[col];
    };
  }

  // --- SQL of expressions ---------------------------------------------------

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

  static bool ReadsColumns(const ExprP &e) {
    if (!e) return false;
    if (e->kind == ExprKind::Col || e->kind == ExprKind::Sublink) return true;
    for (const auto &a : e->args)
      if (ReadsColumns(a)) return true;
    return false;
  }
  // An operation worth a column of its own: not a few arithmetic steps.
  static bool Costly(const ExprP &e) {
    static const std::set<std::string> kCheap{"add",  "sub", "mul",      "neg",   "pos",
                                              "cast", "abs", "greatest", "least", "stop_gradient"};
    if (e->kind != ExprKind::Call || !ReadsColumns(e) || kCheap.count(e->text)) return false;
    return !(e->text == "div" && !ReadsColumns(e->args[1]));
  }
  // A costly value that reads only (and some of) the leaves `sides`.
  static bool Movable(const ExprP &e, const std::set<int> &sides) {
    if (!Costly(e) || ContainsVolatile(e) || HasSublink(e)) return false;
    std::set<int> ls = LeafSides(e);
    for (int x : ls)
      if (!sides.count(x)) return false;
    return !ls.empty();
  }

  // The forward values a reverse rule reads, each computed once per row.
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
  class Lets {
   public:
    // prefix: of the value columns' names. below: where values over the
    // leaves `below_sides` are computed instead (see Below), read here as
    // columns of the same name.
    Lets(const Builder &b, std::string alias, Resolver base, std::string prefix = "v", Lets *below = nullptr,
         std::set<int> below_sides = {})
        : b_(b),
          alias_(std::move(alias)),
          base_(std::move(base)),
          prefix_(std::move(prefix)),
          below_(below),
          below_sides_(std::move(below_sides)) {}

    std::string Value(const ExprP &e, const std::string &guard) {
      if (below_ && guard.empty() && Movable(e, below_sides_)) {
        std::string v = below_->Value(e, "");
        return alias_ + v.substr(v.find('.'));
      }
      switch (e->kind) {
        case ExprKind::Col:
          return base_(e->side, e->col);
        case ExprKind::Const:
          return e->text;
        case ExprKind::Opaque:
        case ExprKind::Sublink:
          return Name(b_.Sql(e, base_), 1, guard);
        case ExprKind::Call: {
          if (!ReadsColumns(e)) return b_.Sql(e, base_);  // PostgreSQL folds constants
          auto c = std::make_shared<Expr>(*e);
          int depth = 0;
          for (auto &a : c->args) a = Placeholder(Value(a, guard), a->type, depth);
          std::string sql = b_.Sql(c, base_);
          if (!Costly(e)) {  // written out where used
            depth_[sql] = depth;
            return sql;
          }
          return Name(sql, depth + 1, guard);
        }
        case ExprKind::Case: {
          auto c = std::make_shared<Expr>(*e);
          int depth = 0;
          std::string g = guard;  // and no earlier condition was true
          size_t nb = e->args.size() / 2;
          for (size_t k = 0; k < nb; k++) {
            std::string cond = Value(e->args[2 * k], g);
            c->args[2 * k] = Placeholder(cond, e->args[2 * k]->type, depth);
            c->args[2 * k + 1] =
                Placeholder(Value(e->args[2 * k + 1], Also(g, cond, true)), e->args[2 * k + 1]->type, depth);
            g = Also(g, cond, false);
          }
          c->args.back() = Placeholder(Value(e->args.back(), g), e->args.back()->type, depth);
          return Name(b_.Sql(c, base_), depth + 1, guard);
        }
      }
      Internal("unknown expression");
    }

    // The guard of branch k of CASE e (under `guard`): where the forward took it.
    std::string Branch(const ExprP &e, size_t k, const std::string &guard) {
      size_t nb = e->args.size() / 2;
      std::string g = guard;
      for (size_t m = 0; m < nb && m <= k; m++) g = Also(g, Value(e->args[2 * m], g), m == k);
      return g;
    }

    // inner (a relation's SQL) wrapped in the layers, aliased `alias`.
    std::string Wrap(const std::string &inner) const {
      std::string sql = inner;
      for (const auto &layer : layers_) {
        if (layer.empty()) continue;
        sql = "(SELECT " + alias_ + ".*, " + Join(layer, ", ") + " FROM " + sql + " " + alias_ + " OFFSET 0)";
      }
      return sql + " " + alias_;
    }

    // The names of the value columns, in the order they were made.
    std::vector<std::string> Names() const {
      std::vector<std::string> out;
      for (const auto &layer : layers_)
        for (const auto &def : layer) out.push_back(def.substr(def.rfind(" AS ") + 4));
      return out;
    }

   private:
    // guard AND (cond) IS [NOT] TRUE; a guard's depth is its deepest value's.
    std::string Also(const std::string &guard, const std::string &cond, bool truth) {
      std::string g = (guard.empty() ? "" : guard + " AND ") + "(" + cond + (truth ? ") IS TRUE" : ") IS NOT TRUE");
      guard_depth_[g] = std::max(Depth(guard, guard_depth_), Depth(cond, depth_));
      return g;
    }
    static int Depth(const std::string &sql, const std::map<std::string, int> &m) {
      auto it = m.find(sql);
      return it == m.end() ? 0 : it->second;
    }
    ExprP Placeholder(const std::string &sql, const Type &t, int &depth) const {
      depth = std::max(depth, Depth(sql, depth_));
      auto c = std::make_shared<Expr>();
      c->kind = ExprKind::Const;
      c->type = t;
      c->text = sql;
      return c;
    }
    std::string Name(const std::string &def, int depth, const std::string &guard) {
      std::string full = guard.empty() ? def : "CASE WHEN " + guard + " THEN " + def + " END";
      auto it = names_.find(full);
      if (it != names_.end()) return it->second;
      depth = std::max(depth, Depth(guard, guard_depth_) + 1);  // the guard's values come first
      std::string v = prefix_ + std::to_string(names_.size());
      if (static_cast<int>(layers_.size()) < depth) layers_.resize(depth);
      layers_[depth - 1].push_back(full + " AS " + v);
      std::string name = alias_ + "." + v;
      names_[full] = name;
      depth_[name] = depth;
      return name;
    }

    const Builder &b_;
    std::string alias_;
    Resolver base_;
    std::string prefix_;
    Lets *below_;
    std::set<int> below_sides_;
    std::map<std::string, std::string> names_;
    std::map<std::string, int> depth_;        // value SQL -> layer (0: a column of the base)
    std::map<std::string, int> guard_depth_;  // guard SQL -> its deepest value's layer
    std::vector<std::vector<std::string>> layers_;
  };

  // A factor whose chain rule is applied after summing: in a product x · y
  // over a region whose leaves x and y read are disjoint, x's adjoint adj · y
  // is first summed by the rids of x's leaves (one row per distinct x), and x
  // is differentiated at that grain. Attention's p · v: the chain through
  // p = exp(s - m) / z runs over the (i, j) pairs, not the (i, j, c) rows.
  struct Deferred {
    ExprP expr;
    std::string adj;
    std::set<int> leaves;  // sides
  };

  static std::set<int> LeafSides(const ExprP &e) {
    std::set<std::pair<int, int>> cols;
    CollectCols(e, cols);
    std::set<int> sides;
    for (const auto &c : cols) sides.insert(c.first);
    return sides;
  }
  static bool HasSublink(const ExprP &e) {
    if (!e) return false;
    if (e->kind == ExprKind::Sublink) return true;
    for (const auto &a : e->args)
      if (HasSublink(a)) return true;
    return false;
  }

  // Accumulates into terms[(side, col)] the contributions of adj · ∂e/∂column,
  // reading forward values through `lets` (under `guard`: see Lets). With
  // `defer`, factors of products are deferred (see Deferred).
  void Backprop(const ExprP &e, const std::string &adj, Lets &lets, const ActiveFn &act, Terms &terms,
                const std::string &guard = "", std::vector<Deferred> *defer = nullptr) const {
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
        std::string y = F8(lets.Value(e, guard), e->type);
        for (size_t i = 0; i < e->args.size(); i++) {
          if (!IsActive(e->args[i], act)) continue;
          std::string p = rule->partial(i, a, y);
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

  // The equalities (both ways round) among the top-level conjuncts of conds.
  static std::vector<std::pair<ExprP, ExprP>> Equalities(const std::vector<ExprP> &conds) {
    std::vector<std::pair<ExprP, ExprP>> eqs;
    for (const auto &e : Conjuncts(conds))
      if (e->kind == ExprKind::Opaque && (e->name == "=" || e->text == "($1 OPERATOR(pg_catalog.=) $2)") &&
          e->args.size() == 2) {
        eqs.push_back({e->args[0], e->args[1]});
        eqs.push_back({e->args[1], e->args[0]});
      }
    return eqs;
  }

  // The top-level conjuncts of conds.
  static std::vector<ExprP> Conjuncts(const std::vector<ExprP> &conds) {
    std::vector<ExprP> out;
    std::function<void(const ExprP &)> conj = [&](const ExprP &e) {
      if (e && e->kind == ExprKind::Opaque && e->name == "AND")
        for (const auto &a : e->args) conj(a);
      else if (e)
        out.push_back(e);
    };
    for (const auto &c : conds) conj(c);
    return out;
  }

  // Types whose equality is identity: values that = cannot tell apart are the
  // same value for every operation (unlike numeric 1.0 and 1.00, float 0 and
  // -0, or text under a nondeterministic collation), so a value can stand for
  // every row it equals.
  static bool IdentityEq(const Type &t) {
    static const std::set<std::string> kTypes{"integer",         "bigint",          "smallint", "pg_catalog.int4",
                                              "pg_catalog.int8", "pg_catalog.int2", "boolean",  "pg_catalog.bool"};
    return kTypes.count(t.sql) > 0;
  }

  // Every leaf of the region, as sides.
  static std::set<int> Sides(const Region &reg) {
    std::set<int> all;
    for (size_t k = 0; k < reg.leaves.size(); k++) all.insert(kLeafSide + static_cast<int>(k));
    return all;
  }

  // The leaves of `sides` whose rids determine the others' in every row of
  // the region: a saved aggregate joined (inner or left) on all its group
  // keys to values of other leaves of the set has at most one matching row.
  static std::set<int> Roots(const Region &reg, const std::set<int> &sides) {
    std::vector<std::pair<ExprP, ExprP>> eqs = Equalities(reg.conds);
    std::set<int> roots = sides;
    for (int l : sides) {
      const Rel *leaf = reg.leaves.at(l - kLeafSide);
      if (leaf->kind != RelKind::Aggregate || (leaf->nkeys == 0 && !leaf->distinct)) continue;
      std::set<int> rest = roots;
      rest.erase(l);
      bool all = true;
      for (int j = 0; j < leaf->nkeys && all; j++) {
        bool found = false;
        if (!IdentityEq(leaf->cols[j])) {  // an equality coarser than GROUP BY's could match two groups
          all = false;
          break;
        }
        for (const auto &[a, b] : eqs) {
          if (a->kind != ExprKind::Col || a->side != l || a->col != j) continue;
          std::set<int> ls = LeafSides(b);
          bool inside = !ls.empty();
          for (int x : ls) inside = inside && rest.count(x);
          if (inside) found = true;
        }
        all = found;
      }
      if (all) roots.erase(l);
    }
    return roots;
  }

  // --- values computed below a join -------------------------------------------
  //
  // PostgreSQL evaluates a region's expressions after all of its joins. When
  // a costly value reads only some leaves S and a join with the others
  // repeats each row of S's join, it is computed once per repetition:
  // attention's p = exp(s - m) / z reads the (i, j) pairs (f15 ⋈ f18 ⋈ f23),
  // and the join with v repeated each pair d times (526k exponentials
  // instead of 33k at T = 256). Such a region is split: a subquery s over S
  // computes the values, and the other leaves are joined to it. Only in
  // regions of inner joins (their conditions are then all in reg.conds), and
  // only where a leaf outside S is a root (see Roots: not determined by the
  // others, so the join may repeat S's rows). Values under a CASE branch stay
  // where the branch is taken. The subquery keeps only the rows of S that
  // the other leaves match (EXISTS): a value the forward never computed (ln
  // of a row without a partner) must not raise an error here.

  // The leaves S below which the costly values of `exprs` are computed, or
  // none.
  std::set<int> BelowSides(const Region &reg, const std::vector<ExprP> &exprs) const {
    if (reg.outer || reg.leaves.size() < 2) return {};
    for (const auto &c : reg.conds)
      if (HasSublink(c)) return {};
    std::set<int> all = Sides(reg);
    std::set<int> roots = Roots(reg, all), below;
    std::function<void(const ExprP &)> walk = [&](const ExprP &e) {
      if (!e || e->kind == ExprKind::Case || e->kind == ExprKind::Sublink) return;
      if (Movable(e, all)) {
        std::set<int> ls = LeafSides(e);
        bool repeated = false;
        for (int x : roots) repeated = repeated || !ls.count(x);
        if (repeated) {
          below.insert(ls.begin(), ls.end());
          return;
        }
      }
      for (const auto &a : e->args) walk(a);
    };
    for (const auto &e : exprs) walk(e);
    for (int x : roots)
      if (!below.count(x)) return below;
    return {};
  }

  // A leaf's rid or column as a column of a subquery over the region (the
  // backward's r, the split's s): a<k>_rid, a<k>_c<j>.
  static std::string FlatName(const Region &reg, int side, int col) {
    return reg.Alias(side - kLeafSide) + (col < 0 ? std::string("_rid") : "_" + C(col));
  }

  // e with its costly values over `below` replaced by the columns h<N> of s
  // (their definitions over the leaves appended to defs).
  ExprP Hoist(const Region &reg, const ExprP &e, const std::set<int> &below, std::vector<std::string> &defs,
              std::map<std::string, std::string> &names) const {
    if (!e || e->kind == ExprKind::Case || e->kind == ExprKind::Sublink) return e;
    if (Movable(e, below)) {
      std::string sql = Sql(e, [&](int side, int col) { return LeafCol(reg, side, col); });
      auto it = names.find(sql);
      if (it == names.end()) {
        std::string n = "h" + std::to_string(names.size());
        it = names.emplace(sql, n).first;
        defs.push_back(sql + " AS " + n);
      }
      auto c = std::make_shared<Expr>();
      c->kind = ExprKind::Const;
      c->type = e->type;
      c->text = "s." + it->second;
      return c;
    }
    if (e->args.empty()) return e;
    auto c = std::make_shared<Expr>(*e);
    for (auto &a : c->args) a = Hoist(reg, a, below, defs, names);
    return c;
  }

  // A leaf column read above the split: through s for the leaves below.
  Resolver Above(const Region &reg, const std::set<int> &below) const {
    return [this, &reg, below](int side, int col) {
      return below.count(side) ? "s." + FlatName(reg, side, col) : LeafCol(reg, side, col);
    };
  }

  // FROM ... WHERE ... (without FROM) of region reg split at `below`: s has
  // the rids of its leaves, their columns `cols` (and those the other leaves
  // are joined on) and `defs`; wrap(subquery) names it s (and may add layers).
  std::string SplitFrom(const Region &reg, const std::set<int> &below, std::set<std::pair<int, int>> cols,
                        const std::vector<std::string> &defs,
                        const std::function<std::string(const std::string &)> &wrap) const {
    Resolver leaf = [&](int side, int col) { return LeafCol(reg, side, col); };
    std::vector<std::string> sel, sfrom, rfrom, swhere, rwhere, cross;
    std::vector<ExprP> cross_conds;
    for (const auto &c : reg.conds) {
      std::set<int> ls = LeafSides(c);
      int in = 0;
      for (int x : ls) in += below.count(x) ? 1 : 0;
      if (in == static_cast<int>(ls.size()))
        swhere.push_back(Sql(c, leaf));
      else if (in == 0)
        rwhere.push_back(Sql(c, leaf));
      else
        cross_conds.push_back(c), CollectCols(c, cols);
    }
    for (size_t k = 0; k < reg.leaves.size(); k++) {
      int side = kLeafSide + static_cast<int>(k);
      if (below.count(side)) {
        sfrom.push_back(LeafFrom(reg.leaves[k], reg.Alias(static_cast<int>(k))));
        sel.push_back(LeafCol(reg, side, -1) + " AS " + FlatName(reg, side, -1));
      } else {
        rfrom.push_back(LeafFrom(reg.leaves[k], reg.Alias(static_cast<int>(k))));
      }
    }
    for (const auto &[side, col] : cols)
      if (below.count(side) && col >= 0) sel.push_back(LeafCol(reg, side, col) + " AS " + FlatName(reg, side, col));
    sel.insert(sel.end(), defs.begin(), defs.end());
    std::vector<std::string> exists = rwhere;
    for (const auto &c : cross_conds) exists.push_back(Sql(c, leaf)), cross.push_back(Sql(c, Above(reg, below)));
    swhere.push_back("EXISTS (SELECT 1 FROM " + Join(rfrom, ", ") +
                     (exists.empty() ? "" : " WHERE " + Join(exists, " AND ")) + ")");
    std::string sub =
        "(SELECT " + Join(sel, ", ") + " FROM " + Join(sfrom, ", ") + " WHERE " + Join(swhere, " AND ") + " OFFSET 0)";
    rwhere.insert(rwhere.end(), cross.begin(), cross.end());
    return wrap(sub) + ", " + Join(rfrom, ", ") + (rwhere.empty() ? "" : " WHERE " + Join(rwhere, " AND "));
  }

  static bool MinAble(const ExprP &e) {
    if (!e) return true;
    if (e->kind == ExprKind::Col) {
      static const std::set<std::string> kOk{"pg_catalog.float8",
                                             "pg_catalog.float4",
                                             "pg_catalog.int4",
                                             "pg_catalog.int8",
                                             "pg_catalog.int2",
                                             "numeric",
                                             "pg_catalog.numeric",
                                             "integer",
                                             "bigint",
                                             "smallint",
                                             "text",
                                             "pg_catalog.text"};
      return kOk.count(e->type.sql) > 0;
    }
    for (const auto &a : e->args)
      if (!MinAble(a)) return false;
    return true;
  }

  // Factor i of product e may be deferred: it is computed (not a bare
  // column), min() can carry the columns it reads, and its leaves and the
  // other factor's are disjoint.
  static bool Deferrable(const ExprP &e, size_t i) {
    const ExprP &x = e->args[i], &y = e->args[1 - i];
    if (x->kind == ExprKind::Col || HasSublink(x) || HasSublink(y) || !MinAble(x)) return false;
    std::set<int> lx = LeafSides(x), ly = LeafSides(y);
    if (lx.empty() || ly.empty()) return false;
    for (int l : lx)
      if (ly.count(l)) return false;
    return true;
  }

  static void CheckVolatile(const ExprP &e) {
    if (ContainsVolatile(e))
      throw Error(sqlstate::kFeatureNotSupported, "volatile function on the gradient path",
                  "A volatile function would be evaluated again by the backward pass and see other values.",
                  "Compute its values into a table first.");
  }

  // --- forward --------------------------------------------------------------

  void EmitForward(Rel *r, std::vector<std::string> &ctes) {
    std::string sql;
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
      case RelKind::Limit: {
        sql = "SELECT i.* FROM " + F(r->inputs[0].get()) + " i";
        std::vector<std::string> keys;
        for (const auto &k : r->order)
          keys.push_back("i." + C(k.col) + (k.desc ? " DESC" : " ASC") +
                         (k.nulls_first ? " NULLS FIRST" : " NULLS LAST"));
        if (!keys.empty()) sql += " ORDER BY " + Join(keys, ", ");
        if (!r->limit.empty()) sql += " LIMIT " + r->limit;
        if (!r->offset.empty()) sql += " OFFSET " + r->offset;
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
      case RelKind::Join:
        if (r->join == JoinKind::Full) {
          int nl = static_cast<int>(r->inputs[0]->cols.size());
          Resolver lr = [nl](int, int col) { return col < nl ? "l." + C(col) : "r." + C(col - nl); };
          std::vector<std::string> cols{"row_number() OVER () AS rid", "l.rid AS l0", "r.rid AS l1"};
          for (size_t k = 0; k < r->cols.size(); k++) cols.push_back(lr(0, static_cast<int>(k)) + " AS " + C(k));
          sql = "SELECT " + Join(cols, ", ") + " FROM " + F(r->inputs[0].get()) + " l FULL JOIN " +
                F(r->inputs[1].get()) + " r ON " + (r->cond ? Sql(r->cond, lr) : "true");
          break;
        }
        [[fallthrough]];
      case RelKind::Project:
      case RelKind::Filter: {
        // A materialized row-local relation: its region's rows, with the leaf
        // rids and the leaf columns its expressions read (for the backward).
        Region reg = Compile(r, true);
        Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
        std::vector<std::string> cols{"row_number() OVER () AS rid"};
        for (size_t k = 0; k < reg.leaves.size(); k++)
          cols.push_back(LeafCol(reg, kLeafSide + static_cast<int>(k), -1) + " AS l" + std::to_string(k));
        std::set<std::pair<int, int>> used;
        for (const auto &e : reg.item.cols) CollectCols(e, used);
        for (const auto &[side, col] : used)
          if (col >= 0) cols.push_back(LeafCol(reg, side, col) + " AS " + SavedCol(side, col));
        for (size_t k = 0; k < reg.item.cols.size(); k++) cols.push_back(Sql(reg.item.cols[k], res) + " AS " + C(k));
        sql = "SELECT " + Join(cols, ", ") + " FROM " + reg.item.from + Where(reg, reg.item.pending);
        regions_[r] = reg;
        break;
      }
      case RelKind::Window: {
        // The input region's rows (leaf rids, the leaf columns its expressions
        // read, its columns), then the window calls over them, and for the
        // backward each row's position (pos) and peer group (grp) in its
        // partition, and (tie) whether its ORDER BY leaves it tied.
        Region reg = Compile(r->inputs[0].get(), false);
        Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
        std::vector<std::string> inner;
        for (size_t k = 0; k < reg.leaves.size(); k++)
          inner.push_back(LeafCol(reg, kLeafSide + static_cast<int>(k), -1) + " AS l" + std::to_string(k));
        std::set<std::pair<int, int>> used;
        for (const auto &e : reg.item.cols) CollectCols(e, used);
        for (const auto &[side, col] : used)
          if (col >= 0) inner.push_back(LeafCol(reg, side, col) + " AS " + SavedCol(side, col));
        for (size_t k = 0; k < reg.item.cols.size(); k++) inner.push_back(Sql(reg.item.cols[k], res) + " AS " + C(k));
        int n = static_cast<int>(reg.item.cols.size());
        std::string frame = FrameSql(r->frame);
        std::vector<std::string> cols{"row_number() OVER () AS rid", "i.*"};
        for (size_t k = 0; k < r->wins.size(); k++) {
          const WinCall &w = r->wins[k];
          std::string arg = w.arg < 0 ? "*" : "i." + C(w.arg), v;
          if (w.fn == "lag" || w.fn == "lead")
            v = w.fn + "(" + arg + ", " + w.offset + (w.dflt >= 0 ? ", i." + C(w.dflt) : "") + ") OVER w";
          else if (IsRank(w.fn))
            v = w.fn + "() OVER w";
          else
            v = w.fn + "(" + arg + ") OVER (w " + frame + ")";
          cols.push_back(v + " AS " + C(n + static_cast<int>(k)));
          if (w.fn == "avg") cols.push_back("count(" + arg + ") OVER (w " + frame + ") AS n" + std::to_string(k));
        }
        cols.push_back("row_number() OVER w AS pos");
        cols.push_back("dense_rank() OVER w AS grp");
        if (OrderSensitive(r)) cols.push_back("row_number() OVER w - rank() OVER w AS tie");
        sql = "SELECT " + Join(cols, ", ") + " FROM (SELECT " + Join(inner, ", ") + " FROM " + reg.item.from +
              Where(reg, reg.item.pending) + ") i WINDOW w AS (" + WindowSpec(r, "i.") + ")";
        regions_[r] = reg;
        break;
      }
      case RelKind::Aggregate: {
        Region reg = Compile(r->inputs[0].get(), false);
        Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
        std::vector<ExprP> ecols = reg.item.cols;
        std::string from = reg.item.from + Where(reg, reg.item.pending);
        std::vector<ExprP> read(ecols.begin(), ecols.begin() + r->nkeys);
        for (const auto &a : r->aggs)
          if (a.arg >= 0) read.push_back(ecols[a.arg]);
        std::set<int> below = BelowSides(reg, read);
        if (!below.empty()) {  // see Below
          std::vector<std::string> defs;
          std::map<std::string, std::string> names;
          std::set<std::pair<int, int>> used;
          for (auto &e : ecols) e = Hoist(reg, e, below, defs, names);
          for (int k = 0; k < r->nkeys; k++) CollectCols(ecols[k], used);
          for (const auto &a : r->aggs)
            if (a.arg >= 0) CollectCols(ecols[a.arg], used);
          from = SplitFrom(reg, below, used, defs, [](const std::string &sub) { return sub + " s"; });
          res = Above(reg, below);
        }
        std::vector<std::string> cols, keys;
        cols.push_back(r->nkeys > 0 ? "row_number() OVER () AS rid" : "1::bigint AS rid");
        for (int k = 0; k < r->nkeys; k++) {
          cols.push_back(Sql(ecols[k], res) + " AS " + C(k));
          keys.push_back(std::to_string(k + 2));  // select-list position
        }
        for (size_t k = 0; k < r->aggs.size(); k++) {
          const AggCall &a = r->aggs[k];
          std::string arg = a.arg < 0 ? "*" : Sql(ecols[a.arg], res);
          cols.push_back(a.fn + "(" + arg + ") AS " + C(r->nkeys + static_cast<int>(k)));
          if (a.fn == "avg") cols.push_back("count(" + arg + ") AS n" + std::to_string(k));
        }
        sql = "SELECT " + Join(cols, ", ") + " FROM " + from;
        if (!keys.empty()) sql += " GROUP BY " + Join(keys, ", ");
        regions_[r] = reg;
        break;
      }
    }
    ctes.push_back(F(r) + " AS MATERIALIZED (" + sql + ")");
  }

  static std::string SavedCol(int side, int col) {
    return "x" + std::to_string(side - kLeafSide) + "_" + std::to_string(col);
  }

  // PARTITION BY ... ORDER BY ... of a Window over columns `prefix`c<j>; with
  // `by`, ORDER BY that saved column instead (pos, grp).
  static std::string WindowSpec(const Rel *w, const std::string &prefix, const std::string &by = "") {
    std::vector<std::string> part, ord;
    for (int p : w->partition) part.push_back(prefix + C(p));
    if (!by.empty()) {
      ord.push_back(prefix + by);
    } else {
      for (const auto &k : w->order)
        ord.push_back(prefix + C(k.col) + (k.desc ? " DESC" : " ASC") +
                      (k.nulls_first ? " NULLS FIRST" : " NULLS LAST"));
    }
    std::string s;
    if (!part.empty()) s += "PARTITION BY " + Join(part, ", ");
    if (!ord.empty()) s += std::string(s.empty() ? "" : " ") + "ORDER BY " + Join(ord, ", ");
    return s;
  }

  // Rows k of the partition of row j that lie in j's frame (aliases j, k of
  // the Window's CTE), for min and max, whose backward pairs each output with
  // the rows that attain it.
  std::string InFrame(const Rel *w) const {
    const Frame &f = w->frame;
    if (f.mode == FrameMode::Range && HasOffset(f))
      throw Error(sqlstate::kFeatureNotSupported, "min or max over a RANGE frame with an offset in the loss", "",
                  "Use a ROWS or GROUPS frame, or sum/avg.");
    std::string v = f.mode == FrameMode::Rows ? "pos" : "grp";
    std::vector<std::string> c;
    auto bound = [&](const FrameBound &b, const char *op) {
      std::string at = "j." + v;
      if (b.kind == BoundKind::Preceding) at = "(j." + v + " - " + b.offset + ")";
      if (b.kind == BoundKind::Following) at = "(j." + v + " + " + b.offset + ")";
      if (b.kind != BoundKind::UnboundedPreceding && b.kind != BoundKind::UnboundedFollowing)
        c.push_back("k." + v + " " + op + " " + at);
    };
    bound(f.start, ">=");
    bound(f.end, "<=");
    if (f.exclude == "CURRENT ROW") c.push_back("k.rid <> j.rid");
    if (f.exclude == "GROUP") c.push_back("k.grp <> j.grp");
    if (f.exclude == "TIES") c.push_back("(k.grp <> j.grp OR k.rid = j.rid)");
    for (int p : w->partition) c.push_back(NullSafeEq("k." + C(p), "j." + C(p), w->cols[p].sql));
    return c.empty() ? "true" : Join(c, " AND ");
  }

  // --- backward -------------------------------------------------------------

  bool MakeCotangent(Rel *r, std::vector<std::string> &ctes) {
    auto it = contribs_.find(r);
    if (it == contribs_.end() || it->second.empty()) return false;
    auto &cs = it->second;
    std::set<int> cols;
    for (const auto &c : cs) cols.insert(c.cols.begin(), c.cols.end());
    std::string sql;
    if (cs.size() == 1) {
      sql = cs[0].sql;
      if (cs[0].carries) carried_.insert(r);
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

  void Contribute(const Rel *to, std::string sql, std::set<int> cols, bool carries = false) {
    if (cols.empty() || !AnyActive(to)) return;
    contribs_[to].push_back({std::move(sql), std::move(cols), carries});
  }

  // An aggregate whose cotangent may carry its saved columns c<j> beside
  // rid and d<j>, so that Groups reads the cotangent alone: joined with the
  // saved rows on rid, without statistics, the planner estimated the
  // matmul's 80k groups at 32M rows and hashed the other side of the next
  // join instead (in two batches). A reader whose rows are the aggregate's
  // rows one to one (a `once` contribution, the transposed rule's final
  // join) adds them; with one such reader the cotangent is that query.
  // (Averages' counts n<k> are not carried: such aggregates keep the join.)
  static bool Carries(const Rel *r) {
    if (r->kind != RelKind::Aggregate || r->nkeys == 0) return false;
    for (const auto &a : r->aggs)
      if (a.fn == "avg") return false;
    return true;
  }

  // Contributions to a region's leaves: `source` is FROM ... WHERE ... over the
  // leaves (and whatever the caller joined), terms are per leaf column.
  void ContributeToLeaves(const Region &reg, const std::string &source, const Terms &terms,
                          const std::function<std::string(int k)> &leaf_rid, const std::string &shared_name,
                          const std::vector<Deferred> &deferred = {}, const Resolver &value = nullptr,
                          std::set<int> roots = {}) {
    std::map<int, std::map<int, std::string>> per_leaf;  // leaf -> col -> summed term
    for (const auto &[key, t] : terms) per_leaf[key.first - kLeafSide][key.second] = SumTerms(t);
    // A leaf that is the only root of the source's rows (`roots`: by default
    // the region's; the others are saved aggregates joined on all their keys,
    // at most one row each; one leaf: no join) is in at most one row of the
    // source (every rule joins a region row with one cotangent): nothing to
    // sum. Attention's z = Σ e: a GROUP BY of 33k rows into 33k groups.
    if (roots.empty()) roots = Roots(reg, Sides(reg));
    int once = roots.size() == 1 && per_leaf.count(*roots.begin() - kLeafSide) ? *roots.begin() - kLeafSide : -1;
    if (once >= 0 && per_leaf.size() > 1 && deferred.empty()) {
      // Several leaves, one of them the only root: the source's rows stored
      // as they are, that leaf's terms read from them, the others' summed by
      // their rids (GROUPING SETS would also hash a set of as many groups as
      // rows: attention's softmax backward, 33k rows into 33k groups beside
      // 256 for z; program 957 -> 904 ms interleaved).
      std::vector<std::string> cols;
      for (const auto &[k, terms_k] : per_leaf) {
        cols.push_back(leaf_rid(k) + " AS r" + std::to_string(k));
        for (const auto &[col, sum] : terms_k)
          cols.push_back(sum + " AS t" + std::to_string(k) + "_" + std::to_string(col));
      }
      extra_ctes_->push_back(shared_name + " AS MATERIALIZED (SELECT " + Join(cols, ", ") + source + ")");
      for (const auto &[k, terms_k] : per_leaf) {
        std::string rk = "r" + std::to_string(k);
        std::vector<std::string> sel{rk + " AS rid"};
        std::set<int> cs;
        for (const auto &[col, sum] : terms_k) {
          std::string t = "t" + std::to_string(k) + "_" + std::to_string(col);
          sel.push_back((k == once ? t : "sum(" + t + ")") + " AS " + D(col));
          cs.insert(col);
        }
        Contribute(reg.leaves[k],
                   "SELECT " + Join(sel, ", ") + " FROM " + shared_name + " WHERE " + rk + " IS NOT NULL" +
                       (k == once ? "" : " GROUP BY " + rk),
                   cs);
      }
      return;
    }
    if (per_leaf.size() < 2 && deferred.empty()) {
      for (const auto &[k, cols] : per_leaf) {
        bool single = k == once;
        std::vector<std::string> inner{leaf_rid(k) + " AS rid"}, outer{"q.rid"};
        std::set<int> cs;
        for (const auto &[col, sum] : cols) {
          inner.push_back(sum + " AS " + D(col));
          outer.push_back((single ? "q." + D(col) : "sum(q." + D(col) + ")") + " AS " + D(col));
          cs.insert(col);
        }
        bool carry = single && value && Carries(reg.leaves[k]);
        for (size_t j = 0; carry && j < reg.leaves[k]->cols.size(); j++) {
          inner.push_back(value(kLeafSide + k, static_cast<int>(j)) + " AS " + C(static_cast<int>(j)));
          outer.push_back("q." + C(static_cast<int>(j)));
        }
        Contribute(reg.leaves[k],
                   "SELECT " + Join(outer, ", ") + " FROM (SELECT " + Join(inner, ", ") + source +
                       ") q WHERE q.rid IS NOT NULL" + (single ? "" : " GROUP BY q.rid"),
                   cs, carry);
      }
      return;
    }
    // Several leaves: one pass over the region, summed by each leaf's rid at
    // once with GROUPING SETS, instead of recomputing the region per leaf.
    // A deferred factor's set groups by the rids of its leaves and the leaf
    // columns it reads (which those rids determine).
    std::vector<std::string> inner, outer, keys, sets;
    std::set<std::string> have;
    auto key = [&](const std::string &sql, const std::string &name) {
      if (!have.insert(name).second) return;
      inner.push_back(sql + " AS " + name);
      outer.push_back("q." + name);
      keys.push_back(name);
    };
    std::vector<std::vector<std::string>> set_cols;
    for (const auto &[k, cols] : per_leaf) {
      std::string rk = "r" + std::to_string(k);
      key(leaf_rid(k), rk);
      set_cols.push_back({rk});
      for (const auto &[col, sum] : cols) {
        std::string t = "t" + std::to_string(k) + "_" + std::to_string(col);
        inner.push_back(sum + " AS " + t);
        outer.push_back("sum(q." + t + ") AS " + t);
      }
    }
    std::vector<std::set<int>> droots;  // each deferred factor's
    std::vector<bool> rejoin;
    for (size_t i = 0; i < deferred.size(); i++) {
      const Deferred &d = deferred[i];
      std::string is = std::to_string(i);
      // keys: the rids of the leaves that determine the others, and a
      // marker where another set has the same rids (a leaf's own set). The
      // others and the values the factor reads are found again by joining
      // its leaves on those rids (with inner joins only: the region's
      // conditions among them are then all there is), else carried by
      // min(): wide rows in the grouping sets' hash tables, which made
      // attention's spill.
      std::vector<std::string> cols;
      droots.push_back(Roots(reg, d.leaves));
      rejoin.push_back(!reg.outer);
      for (const auto &c : reg.conds)
        if (HasSublink(c)) rejoin.back() = false;
      for (int side : d.leaves)
        if (droots.back().count(side)) cols.push_back("r" + std::to_string(side - kLeafSide));
      if (std::find(set_cols.begin(), set_cols.end(), cols) != set_cols.end()) {
        cols.insert(cols.begin(), "g" + is);
        key("1", "g" + is);
      }
      for (int side : d.leaves) {
        int k = side - kLeafSide;
        if (droots.back().count(side)) {
          key(leaf_rid(k), "r" + std::to_string(k));
        } else if (!rejoin.back()) {
          std::string sn = "s" + std::to_string(k) + "_" + is;
          inner.push_back(leaf_rid(k) + " AS " + sn);
          outer.push_back("min(q." + sn + ") AS " + sn);
        }
      }
      std::set<std::pair<int, int>> used;
      CollectCols(d.expr, used);
      for (const auto &[side, col] : used) {
        if (col < 0 || rejoin.back()) continue;
        std::string x = "x" + std::to_string(side - kLeafSide) + "_" + std::to_string(col) + "_" + is;
        inner.push_back(value(side, col) + " AS " + x);
        outer.push_back("min(q." + x + ") AS " + x);
      }
      std::string u = "u" + is;
      inner.push_back("COALESCE(" + d.adj + ", 0::float8) AS " + u);
      outer.push_back("sum(q." + u + ") AS " + u);
      set_cols.push_back(cols);
    }
    std::vector<std::string> gkeys;
    for (const auto &k : keys) gkeys.push_back("q." + k);
    for (const auto &c : set_cols) {
      std::vector<std::string> qc;
      for (const auto &x : c) qc.push_back("q." + x);
      sets.push_back("(" + Join(qc, ", ") + ")");
    }
    // GROUPING(keys): bit set = key aggregated away; the first key is the
    // most significant bit.
    auto mask = [&](const std::vector<std::string> &in_set) {
      int n = static_cast<int>(keys.size()), m = 0;
      for (int i = 0; i < n; i++)
        if (std::find(in_set.begin(), in_set.end(), keys[i]) == in_set.end()) m |= 1 << (n - 1 - i);
      return std::to_string(m);
    };
    outer.insert(outer.begin(), "GROUPING(" + Join(gkeys, ", ") + ") AS gs");
    extra_ctes_->push_back(shared_name + " AS MATERIALIZED (SELECT " + Join(outer, ", ") + " FROM (SELECT " +
                           Join(inner, ", ") + source + ") q GROUP BY GROUPING SETS (" + Join(sets, ", ") + "))");
    size_t pos = 0;
    for (const auto &[k, cols] : per_leaf) {
      std::string rk = "r" + std::to_string(k);
      std::vector<std::string> sel{rk + " AS rid"};
      std::set<int> cs;
      for (const auto &[col, sum] : cols) {
        sel.push_back("t" + std::to_string(k) + "_" + std::to_string(col) + " AS " + D(col));
        cs.insert(col);
      }
      Contribute(reg.leaves[k],
                 "SELECT " + Join(sel, ", ") + " FROM " + shared_name + " WHERE gs = " + mask(set_cols[pos++]) +
                     " AND " + rk + " IS NOT NULL",
                 cs);
    }
    // Each deferred factor, differentiated at its own grain.
    for (size_t i = 0; i < deferred.size(); i++) {
      const Deferred &d = deferred[i];
      std::string is = std::to_string(i);
      std::string stage = "(SELECT * FROM " + shared_name + " WHERE gs = " + mask(set_cols[pos++]) + ")";
      const std::set<int> &rt = droots[i];
      if (rejoin[i]) {
        std::vector<std::string> cols{"n.*"}, from{stage + " n"}, where;
        for (int side : d.leaves) {
          int k = side - kLeafSide;
          std::string ks = std::to_string(k);
          from.push_back(LeafFrom(reg.leaves[k], reg.Alias(k)));
          if (rt.count(side))
            where.push_back(LeafCol(reg, side, -1) + " = n.r" + ks);
          else
            cols.push_back(LeafCol(reg, side, -1) + " AS s" + ks + "_" + is);
        }
        std::set<std::pair<int, int>> used;
        CollectCols(d.expr, used);
        for (const auto &[side, col] : used)
          if (col >= 0)
            cols.push_back(LeafCol(reg, side, col) + " AS x" + std::to_string(side - kLeafSide) + "_" +
                           std::to_string(col) + "_" + is);
        Resolver inside = [&](int side, int col) { return LeafCol(reg, side, col); };
        for (const auto &c : reg.conds) {
          std::set<int> ls = LeafSides(c);
          bool among = !ls.empty();
          for (int x : ls) among = among && d.leaves.count(x);
          if (among) where.push_back(Sql(c, inside));
        }
        stage = "(SELECT " + Join(cols, ", ") + " FROM " + Join(from, ", ") + " WHERE " + Join(where, " AND ") + ")";
      }
      auto rid = [rt, is](int k) {
        return rt.count(kLeafSide + k) ? "n.r" + std::to_string(k) : "n.s" + std::to_string(k) + "_" + is;
      };
      Resolver grouped = [rid, is](int side, int col) {
        int k = side - kLeafSide;
        return col < 0 ? rid(k) : "n.x" + std::to_string(k) + "_" + std::to_string(col) + "_" + is;
      };
      Lets lets(*this, "n", grouped);
      Terms t;
      Backprop(d.expr, "n.u" + is, lets, LeafActivity(reg), t);
      // (the stage has one row per rid of its roots)
      ContributeToLeaves(reg, " FROM " + lets.Wrap(stage), t, rid, shared_name + "_" + is, {}, nullptr, rt);
    }
  }

  // An aggregate's saved rows with their cotangents (alias a: a.c<j>, a.bd<j>).
  // Also each group key k as h<k> for KeyEq (see KeyCols).
  std::string Groups(const Rel *r) const {
    bool carried = carried_.count(r) > 0;
    std::vector<std::string> ab{"a.*"};
    for (int o : bcols_.at(r)) ab.push_back((carried ? "a." : "b.") + D(o) + " AS b" + D(o));
    for (int k = 0; k < r->nkeys; k++)
      if (FormOf(r, k) == KeyForm::One || FormOf(r, k) == KeyForm::Pair)
        for (const auto &c : KeyCols(r, k, "a." + C(k), "h" + std::to_string(k))) ab.push_back(c);
    if (carried) return "(SELECT " + Join(ab, ", ") + " FROM " + B(r) + " a OFFSET 0) a";
    return "(SELECT " + Join(ab, ", ") + " FROM " + F(r) + " a JOIN " + B(r) + " b ON b.rid = a.rid OFFSET 0) a";
  }

  // Group key k of aggregate r matched NULL-safely by a hash join: each side
  // computes, once per row, the key with NULL replaced (see NullSafeKey, or
  // a stand-in value and a NULL flag: NullSafeEq), and the join compares
  // those columns. Written into the join condition, the expressions ran for
  // every pair the join compared: 1.28M in the matmul's transposed join (334
  // -> 299 ms with plain keys). Plain: cannot be NULL; Distinct: no stand-in
  // known (IS NOT DISTINCT FROM).
  enum class KeyForm { Plain, Distinct, One, Pair };
  KeyForm FormOf(const Rel *r, int k) const {
    const std::string &type = r->cols[k].sql;
    if (notnull_.at(r->inputs[0].get())[k]) return KeyForm::Plain;
    if (!NullSafeKey("", type).empty()) return KeyForm::One;  // (a form known for the type)
    return NullStandIn(type).empty() ? KeyForm::Distinct : KeyForm::Pair;
  }
  // The select-list entries that name key x `name` (and `name`n).
  std::vector<std::string> KeyCols(const Rel *r, int k, const std::string &x, const std::string &name) const {
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
  std::string KeyEq(const Rel *r, int k, const std::string &rk) const {
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

  // Whether e is NULL exactly when a column it reads is NULL (every operation
  // on the way is strict, no constant is NULL); collects those columns.
  static bool StrictIn(const ExprP &e, std::set<std::pair<int, int>> &cols) {
    switch (e->kind) {
      case ExprKind::Col:
        cols.insert({e->side, e->col});
        return true;
      case ExprKind::Const:
        return e->text.find("NULL") == std::string::npos;
      case ExprKind::Call:
        if (e->text == "greatest" || e->text == "least") return false;
        break;
      case ExprKind::Opaque:
        if (!e->strict) return false;
        break;
      default:
        return false;
    }
    for (const auto &a : e->args)
      if (!StrictIn(a, cols)) return false;
    return true;
  }

  // Whether condition c of aggregate r's region reads only group keys (its
  // columns are keys, of types whose equality is identity): then c has one
  // value per group, true for every group there is (a group exists only if
  // some row passed c), and a join with the cotangent, whose rows are the
  // groups, need not test it again where every column it reads is bound to
  // the cotangent's keys. Attention's k.t <= q.t in the two transposed
  // passes of q·k: 526k tests each, 125 -> 109 ms a pass.
  static bool HoldsPerGroup(const Rel *r, const Region &reg, const ExprP &c) {
    if (ContainsVolatile(c) || HasSublink(c)) return false;
    std::set<std::pair<int, int>> cs;
    CollectCols(c, cs);
    if (cs.empty()) return false;
    for (const auto &x : cs) {
      bool key = false;
      for (int k = 0; k < r->nkeys && !key; k++) {
        const ExprP &e = reg.item.cols[k];
        key = e->kind == ExprKind::Col && e->side == x.first && e->col == x.second && x.second >= 0 &&
              IdentityEq(r->cols[k]);
      }
      if (!key) return false;
    }
    return true;
  }

  // The contraction transpose with the sum moved below the join (eager
  // aggregation). For each leaf L of an aggregate's region (inner joins
  // only) that receives gradient, when L's terms read no value of L,
  // L's adjoint, a sum over the region's rows (l, o) of term(o, cotangent of
  // the row's group), is computed as the join of the other leaves O with the
  // cotangents, summed by what L is compared with (O's columns in conditions
  // on L, the group keys that come from L), and only then joined to L. The
  // matmul's dW[k,j] = sum_i x[i,k] dY[i,j] is one join of x with dY on i
  // summed by (x.k, dY.j), instead of recomputing x ⋈ W and probing dY with
  // each of its rows. A key of L that a condition equates with a value of O
  // is joined as that value (a row's group is found through O). Not used
  // where every key comes from L (O ⋈ cotangents would be a cross product).
  bool Transposed(const Rel *r, const Region &reg) {
    const std::set<int> &bc = bcols_.at(r);
    if (reg.outer || reg.leaves.size() < 2) return false;
    for (const auto &c : reg.conds)
      if (HasSublink(c)) return false;
    std::set<std::pair<int, int>> used;
    for (int o : bc) {
      if (o < r->nkeys) return false;
      const AggCall &ag = r->aggs[o - r->nkeys];
      if ((ag.fn != "sum" && ag.fn != "avg") || HasSublink(reg.item.cols[ag.arg])) return false;
      CollectCols(reg.item.cols[ag.arg], used);
    }
    ActiveFn act = LeafActivity(reg);
    std::set<int> active;
    for (const auto &[side, col] : used)
      if (act(side, col)) active.insert(side);
    // Each leaf that receives gradient, transposed on its own (one pass
    // over the others joined with the cotangents per leaf: attention's q·k
    // backward 383 -> 234 ms against one pass over the region with GROUPING
    // SETS, whose inequality join paired 1M rows to keep 526k), or none.
    std::vector<std::pair<std::string, std::set<int>>> out;
    for (int L : active) {
      std::set<int> cols;
      std::string sql = TransposeLeaf(r, reg, used, L, cols);
      if (sql.empty()) return false;
      out.push_back({sql, cols});
    }
    if (out.empty()) return false;
    size_t i = 0;
    for (int L : active)
      Contribute(reg.leaves[L - kLeafSide], out[i].first, out[i].second, Carries(reg.leaves[L - kLeafSide])), i++;
    return true;
  }

  // L's adjoint from the other leaves O joined with the cotangents (see
  // Transposed), or "" where the rule does not apply.
  std::string TransposeLeaf(const Rel *r, const Region &reg, std::set<std::pair<int, int>> used, int L,
                            std::set<int> &cols) {
    const std::set<int> &bc = bcols_.at(r);
    ActiveFn all = LeafActivity(reg);
    ActiveFn act = [&all, L](int side, int col) { return side == L && all(side, col); };
    auto reads = [L](const ExprP &e, bool &l, bool &o) {
      std::set<int> sides = LeafSides(e);
      l = sides.count(L) > 0;
      o = sides.size() > (l ? 1u : 0u);
    };
    Resolver inside = [&](int side, int col) { return LeafCol(reg, side, col); };
    const std::string mark = "\x01";  // a value of L, which O ⋈ cotangents does not have
    Resolver res = [&](int side, int col) { return side == L ? mark : "r." + FlatName(reg, side, col); };

    // Keys: of O (the cotangent's join) or of L (grouped, matched with L).
    auto eqs = Equalities(reg.conds);
    const std::vector<bool> &nn = notnull_.at(r->inputs[0].get());
    std::vector<std::string> sel, on, qsel, gcols, fon;
    std::map<int, std::string> lkeys;  // a column of L that is a group key: the cotangent's column
    bool keyed = r->nkeys == 0;
    for (int k = 0; k < r->nkeys; k++) {
      ExprP e = reg.item.cols[k];
      bool l, o;
      reads(e, l, o);
      if (l && o) return "";
      if (l && e->kind == ExprKind::Col)
        for (const auto &[a, b] : eqs) {
          bool bl, bo;
          reads(b, bl, bo);
          if (a->kind == ExprKind::Col && a->side == e->side && a->col == e->col && !bl && bo) {
            e = b;
            l = false;
            break;
          }
        }
      std::string ks = std::to_string(k), ak = "a." + C(k);
      if (!l) {
        keyed = true;
        for (const auto &c : KeyCols(r, k, Sql(e, inside), "k" + ks)) sel.push_back(c);
        on.push_back(KeyEq(r, k, "r.k" + ks));
      } else {
        qsel.push_back(ak + " AS g" + ks);
        gcols.push_back("q.g" + ks);
        std::string lk = Sql(e, inside), tk = "t.g" + ks;
        fon.push_back(nn[k] ? lk + " = " + tk : NullSafeEq(lk, tk, r->cols[k].sql));
        if (e->kind == ExprKind::Col && IdentityEq(e->type)) lkeys.emplace(e->col, ak);
      }
    }
    // Conditions: on O alone (inside); reading L only through its group
    // keys (with the cotangent's columns instead, when joining the
    // cotangents: attention's k.t <= q.t is then no link column of O, and
    // the sum stays a contraction); or reading L otherwise (applied when
    // joining L, to one value per group of O's columns they read: sound
    // only where equal values are the same value — x.n::text = w.t tells
    // numeric 1.0 from 1.00 — and possible only for types with an
    // equality, not json).
    std::function<ExprP(const ExprP &)> by_keys = [&](const ExprP &e) -> ExprP {
      if (e->kind == ExprKind::Col && e->side == L && lkeys.count(e->col)) {
        auto c = std::make_shared<Expr>(*e);
        c->kind = ExprKind::Const;
        c->text = lkeys.at(e->col);
        return c;
      }
      if (e->args.empty()) return e;
      auto c = std::make_shared<Expr>(*e);
      for (auto &a : c->args) a = by_keys(a);
      return c;
    };
    std::vector<std::string> oconds, cconds;
    std::vector<ExprP> links;
    std::set<std::pair<int, int>> ocols = used, linkcols;
    for (const auto &c : Conjuncts(reg.conds)) {
      bool l, o;
      reads(c, l, o);
      if (!l) {
        oconds.push_back(Sql(c, inside));
        continue;
      }
      ExprP ck = by_keys(c);
      reads(ck, l, o);
      if (!l && HoldsPerGroup(r, reg, c)) continue;  // (x.k = y.k, the link of L, is not: L reads x.k)
      if (!l) {
        CollectCols(ck, ocols);
        cconds.push_back(Sql(ck, res));
        continue;
      }
      links.push_back(c);
      std::set<std::pair<int, int>> cs;
      CollectCols(c, cs);
      for (const auto &x : cs) {
        if (x.first == L) continue;
        if (x.second >= 0 && !IdentityEq(reg.leaves[x.first - kLeafSide]->cols[x.second])) return "";
        linkcols.insert(x), ocols.insert(x);
      }
    }
    if (!keyed) return "";
    for (const auto &[side, col] : ocols)
      if (side != L) sel.push_back(inside(side, col) + " AS " + FlatName(reg, side, col));
    if (sel.empty()) sel.push_back("1 AS one");
    for (const auto &[side, col] : linkcols) {
      qsel.push_back(res(side, col) + " AS o" + FlatName(reg, side, col));
      gcols.push_back("q.o" + FlatName(reg, side, col));
    }
    Resolver fin = [&](int side, int col) { return side == L ? inside(side, col) : "t.o" + FlatName(reg, side, col); };
    for (const auto &c : links) fon.push_back(Sql(c, fin));

    // Terms: sum's and avg's adjoints with the NULL test split between O
    // (inside) and L (when joining L): a strict argument is NULL exactly when
    // a column it reads is.
    Lets lets(*this, "r", res);
    Terms terms;
    std::optional<std::string> lnull;  // L's NULL test, the same for every call
    for (int o : bc) {
      int k = o - r->nkeys;
      const AggCall &ag = r->aggs[k];
      const ExprP &arg = reg.item.cols[ag.arg];
      CheckVolatile(arg);
      std::set<std::pair<int, int>> nc;
      if (!StrictIn(arg, nc)) return "";
      std::vector<std::string> onull, lnulls;
      for (const auto &[side, col] : nc)
        (side == L ? lnulls : onull).push_back((side == L ? inside(side, col) : res(side, col)) + " IS NULL");
      if (lnull && *lnull != Join(lnulls, " OR ")) return "";
      lnull = Join(lnulls, " OR ");
      std::string d = "a.b" + D(o);
      // (n = 0: every argument of the group is NULL, every row is cut by the NULL test)
      if (ag.fn == "avg") d = "(" + d + " / NULLIF(a.n" + std::to_string(k) + ", 0))";
      // In a product of a factor over O and one over L, L's term has O's
      // factor as a factor: NULL (and summed as 0) exactly where the test
      // would cut it. The test then only costs (a CASE per joined row: the
      // matmul's 1.28M).
      bool factored = false;
      if (arg->kind == ExprKind::Call && arg->text == "mul")
        for (int i = 0; i < 2; i++) {
          std::set<int> li = LeafSides(arg->args[i]), lo = LeafSides(arg->args[1 - i]);
          factored = factored || (li == std::set<int>{L} && !lo.empty() && !lo.count(L));
        }
      Backprop(arg,
               onull.empty() || factored ? d : "(CASE WHEN " + Join(onull, " OR ") + " THEN NULL ELSE " + d + " END)",
               lets, act, terms);
    }
    std::vector<std::string> tsel{inside(L, -1) + " AS rid"};
    for (const auto &[key, t] : terms) {
      if (key.first != L) Internal("transposed contraction: gradient of another leaf");
      std::string dj = D(key.second);
      qsel.push_back(SumTerms(t) + " AS " + dj);
      cols.insert(key.second);
      tsel.push_back("sum(" +
                     (lnull->empty() ? "t." + dj : "CASE WHEN " + *lnull + " THEN 0::float8 ELSE t." + dj + " END") +
                     ") AS " + dj);
    }
    std::vector<std::string> qout = gcols;
    for (int c : cols) qout.push_back("sum(q." + D(c) + ") AS " + D(c));
    std::string src = lets.Wrap("(SELECT " + Join(sel, ", ") + " FROM " + Join(FromsBut(reg, L), " CROSS JOIN ") +
                                (oconds.empty() ? "" : " WHERE " + Join(oconds, " AND ")) + " OFFSET 0)");
    on.insert(on.end(), cconds.begin(), cconds.end());
    std::string source =
        " FROM " + src + (on.empty() ? " CROSS JOIN " + Groups(r) : " JOIN " + Groups(r) + " ON " + Join(on, " AND "));
    std::string pre = "SELECT " + Join(qout, ", ") + " FROM (SELECT " + Join(qsel, ", ") + source + ") q" +
                      (gcols.empty() ? "" : " GROUP BY " + Join(gcols, ", "));
    // (a saved aggregate's columns, for its cotangent to carry: see Carries)
    const Rel *leaf = reg.leaves[L - kLeafSide];
    std::vector<std::string> by{"1"};
    for (size_t j = 0; Carries(leaf) && j < leaf->cols.size(); j++) {
      tsel.push_back(inside(L, static_cast<int>(j)) + " AS " + C(static_cast<int>(j)));
      by.push_back(std::to_string(tsel.size()));
    }
    std::string sql = "SELECT " + Join(tsel, ", ") + " FROM (" + pre + ") t " +
                      (fon.empty() ? "CROSS JOIN " : "JOIN ") + LeafFrom(leaf, reg.Alias(L - kLeafSide)) +
                      (fon.empty() ? "" : " ON " + Join(fon, " AND ")) + " GROUP BY " + Join(by, ", ");
    if (sql.find(mark) != std::string::npos) return "";
    return sql;
  }

  std::vector<std::string> FromsBut(const Region &reg, int side) const {
    std::vector<std::string> from;
    for (size_t k = 0; k < reg.leaves.size(); k++)
      if (kLeafSide + static_cast<int>(k) != side) from.push_back(LeafFrom(reg.leaves[k], reg.Alias(k)));
    return from;
  }

  void ReverseRule(Rel *r) {
    const std::set<int> &bc = bcols_.at(r);
    std::string b = B(r);
    switch (r->kind) {
      case RelKind::Scan:
      case RelKind::Values:
      case RelKind::Function:
        return;
      case RelKind::Limit:
        Contribute(r->inputs[0].get(), "SELECT * FROM " + b, bc);
        return;
      case RelKind::Scalar:
        Contribute(r->inputs[0].get(), "SELECT s.rid, b.d0 FROM " + b + " b CROSS JOIN " + F(r->inputs[0].get()) + " s",
                   bc);
        return;
      case RelKind::UnionAll:
        for (size_t k = 0; k < r->inputs.size(); k++) {
          std::vector<std::string> sel{"u.srid AS rid"};
          for (int j : bc) sel.push_back("b." + D(j));
          Contribute(r->inputs[k].get(),
                     "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + F(r) +
                         " u ON u.rid = b.rid WHERE u.br = " + std::to_string(k),
                     bc);
        }
        return;
      case RelKind::Join:
        if (r->join == JoinKind::Full) {
          int nl = static_cast<int>(r->inputs[0]->cols.size());
          for (int side = 0; side < 2; side++) {
            std::vector<std::string> sel{std::string("j.l") + std::to_string(side) + " AS rid"};
            std::set<int> cols;
            for (int j : bc) {
              if ((j < nl) != (side == 0)) continue;
              int k = side ? j - nl : j;
              sel.push_back("sum(b." + D(j) + ") AS " + D(k));
              cols.insert(k);
            }
            std::string key = "j.l" + std::to_string(side);
            Contribute(r->inputs[side].get(),
                       "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + F(r) + " j ON j.rid = b.rid WHERE " +
                           key + " IS NOT NULL GROUP BY " + key,
                       cols);
          }
          return;
        }
        [[fallthrough]];
      case RelKind::Project:
      case RelKind::Filter: {
        // Saved region rows: differentiate the composed columns over the
        // saved leaf columns, sum by each leaf's rid.
        const Region &reg = regions_.at(r);
        Resolver saved = [&](int side, int col) {
          return col < 0 ? "f.l" + std::to_string(side - kLeafSide) : "f." + SavedCol(side, col);
        };
        Terms terms;
        Lets lets(*this, "f", saved);
        for (int o : bc) {
          CheckVolatile(reg.item.cols[o]);
          Backprop(reg.item.cols[o], "b." + D(o), lets, LeafActivity(reg), terms);
        }
        ContributeToLeaves(
            reg, " FROM " + lets.Wrap(F(r)) + " JOIN " + b + " b ON b.rid = f.rid", terms,
            [](int k) { return "f.l" + std::to_string(k); }, "m" + std::to_string(id_.at(r)));
        return;
      }
      case RelKind::Window: {
        // Per input column, its adjoint: the pass-through cotangent plus, for
        // each call reading it, the transpose of the call (program.cpp's
        // Transpose for frames; lag's is lead). Then the chain rule through
        // the input region, as for a saved projection.
        const Region &reg = regions_.at(r);
        int n = static_cast<int>(r->inputs[0]->cols.size());
        const auto &in_act = active_.at(r->inputs[0].get());
        std::map<int, std::vector<std::string>> adj;
        std::string joins;
        for (int o : bc)
          if (o < n) adj[o].push_back("b." + D(o));
        for (size_t k = 0; k < r->wins.size(); k++) {
          int o = n + static_cast<int>(k);
          if (!bc.count(o)) continue;
          const WinCall &w = r->wins[k];
          std::string d = "b." + D(o), ks = std::to_string(k);
          if (w.arg >= 0 && in_act[w.arg]) {
            std::string x = "f." + C(w.arg);
            std::string over = " OVER (wt " + FrameSql(Transpose(r->frame)) + ")";
            if (w.fn == "sum")
              adj[w.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE sum(COALESCE(" + d + ", 0::float8))" +
                                   over + " END");
            else if (w.fn == "avg")
              adj[w.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE sum(COALESCE(" + d + " / NULLIF(f.n" +
                                   ks + ", 0), 0::float8))" + over + " END");
            else if (w.fn == "lag")
              adj[w.arg].push_back("lead(" + d + ", " + w.offset + ") OVER wp");
            else if (w.fn == "lead")
              adj[w.arg].push_back("lag(" + d + ", " + w.offset + ") OVER wp");
            else if (w.fn == "min" || w.fn == "max") {
              // Each output's cotangent, shared evenly by the rows of its
              // frame that attain it.
              std::string g = "g" + ks;
              joins +=
                  " LEFT JOIN (SELECT t.rid, sum(t.bd / t.cnt) AS g FROM (SELECT k.rid, j.bd, count(*) OVER "
                  "(PARTITION BY j.rid) AS cnt FROM (SELECT f.*, " +
                  d + " AS bd FROM " + F(r) + " f JOIN " + B(r) + " b ON b.rid = f.rid WHERE " + d +
                  " IS NOT NULL AND f." + C(o) + " IS NOT NULL) j JOIN " + F(r) + " k ON k." + C(w.arg) + " = j." +
                  C(o) + " AND " + InFrame(r) + ") t GROUP BY t.rid) " + g + " ON " + g + ".rid = f.rid";
              adj[w.arg].push_back(g + ".g");
            } else {
              Internal("window call " + w.fn + " carries gradient");
            }
          }
          if (w.dflt >= 0 && in_act[w.dflt])  // the default where the shifted row does not exist
            adj[w.dflt].push_back("CASE WHEN " + w.fn + "(true, " + w.offset + ", false) OVER wp THEN NULL ELSE " + d +
                                  " END");
        }
        std::vector<std::string> sel{"f.*"};
        for (const auto &[o, t] : adj) sel.push_back(SumTerms(t) + " AS a" + std::to_string(o));
        std::string wt = r->frame.mode == FrameMode::Rows                           ? WindowSpec(r, "f.", "pos")
                         : r->frame.mode == FrameMode::Range && HasOffset(r->frame) ? WindowSpec(r, "f.")
                                                                                    : WindowSpec(r, "f.", "grp");
        std::string q = "SELECT " + Join(sel, ", ") + " FROM " + F(r) + " f LEFT JOIN " + b + " b ON b.rid = f.rid" +
                        joins + " WINDOW wt AS (" + wt + "), wp AS (" + WindowSpec(r, "f.", "pos") + ")";
        Resolver saved = [&](int side, int col) {
          return col < 0 ? "q.l" + std::to_string(side - kLeafSide) : "q." + SavedCol(side, col);
        };
        Terms terms;
        Lets lets(*this, "q", saved);
        for (const auto &[o, t] : adj) {
          if (!in_act[o]) continue;
          CheckVolatile(reg.item.cols[o]);
          Backprop(reg.item.cols[o], "q.a" + std::to_string(o), lets, LeafActivity(reg), terms);
        }
        ContributeToLeaves(
            reg, " FROM " + lets.Wrap("(" + q + ")"), terms, [](int k) { return "q.l" + std::to_string(k); },
            "m" + std::to_string(id_.at(r)));
        return;
      }
      case RelKind::Aggregate: {
        // Recompute the input region, pair each row with its group's cotangent
        // by the group keys, and sum the chain rule by each leaf's rid. The
        // region is planned on its own (OFFSET 0): planned together with the
        // aggregate and its cotangent, whose CTE scans have no statistics, the
        // planner joined the wrong pair first (attention: 1M rows instead of 33k).
        const Region &reg = regions_.at(r);
        if (Transposed(r, reg)) return;
        Resolver inside = [&](int side, int col) { return LeafCol(reg, side, col); };
        Resolver res = [&](int side, int col) { return "r." + FlatName(reg, side, col); };
        // The region's rows carry the leaf rids, the leaf columns the keys and
        // the differentiated arguments read, and the keys.
        std::set<std::pair<int, int>> used;
        for (int o : bc) CollectCols(o < r->nkeys ? reg.item.cols[o] : reg.item.cols[r->aggs[o - r->nkeys].arg], used);
        // Each group's saved row and its cotangent, joined first (a few rows
        // per group), so that the region's rows are probed once.
        std::string grp = Groups(r);
        std::vector<ExprP> read;
        for (int o : bc) read.push_back(o < r->nkeys ? reg.item.cols[o] : reg.item.cols[r->aggs[o - r->nkeys].arg]);
        std::set<int> below = BelowSides(reg, read);  // see Below
        Lets under(
            *this, "s", [&](int side, int col) { return "s." + FlatName(reg, side, col); }, "h");
        Lets lets(*this, "r", res, "v", below.empty() ? nullptr : &under, below);
        Terms terms;
        std::vector<Deferred> deferred;
        for (int o : bc) {
          std::string d = "a.b" + D(o);
          if (o < r->nkeys) {
            if (!r->distinct)
              throw Error(
                  sqlstate::kFeatureNotSupported, "GROUP BY key depends on a parameter",
                  "A group key carries gradient, but grouping by a value has no derivative.",
                  "Group by columns that do not depend on the parameter, or wrap the key in stop_gradient(...).");
            CheckVolatile(reg.item.cols[o]);
            Backprop(reg.item.cols[o], "(" + d + " / count(*) OVER (PARTITION BY a.rid))", lets, LeafActivity(reg),
                     terms);
            continue;
          }
          int k = o - r->nkeys;
          const AggCall &ag = r->aggs[k];
          const ExprP &arg = reg.item.cols[ag.arg];
          CheckVolatile(arg);
          std::string x = lets.Value(arg, ""), y = "a." + C(o), adj;
          if (ag.fn == "sum")
            adj = "(CASE WHEN (" + x + ") IS NULL THEN NULL ELSE " + d + " END)";
          else if (ag.fn == "avg")
            adj = "(CASE WHEN (" + x + ") IS NULL THEN NULL ELSE " + d + " / a.n" + std::to_string(k) + " END)";
          else if (ag.fn == "min" || ag.fn == "max")
            // Tied rows share the gradient evenly.
            adj = "(CASE WHEN (" + x + ") = " + y + " THEN " + d + " / count(*) FILTER (WHERE (" + x + ") = " + y +
                  ") OVER (PARTITION BY a.rid) END)";
          else
            throw Error(sqlstate::kFeatureNotSupported, "aggregate " + ag.fn + " has no derivative rule",
                        "Gradient reaches an aggregate that ddx does not differentiate.",
                        "Use sum, avg, min or max, or wrap its argument in stop_gradient(...).");
          Backprop(arg, adj, lets, LeafActivity(reg), terms, "", &deferred);
        }
        // The region's rows carry the leaf rids, the leaf columns the keys and
        // the differentiated arguments read (all of a leaf's whose cotangent
        // carries them, see Carries), and the keys.
        std::set<int> to;
        for (const auto &[key, t] : terms) to.insert(key.first);
        if (to.size() == 1 && deferred.empty() && Carries(reg.leaves[*to.begin() - kLeafSide]))
          for (size_t j = 0; j < reg.leaves[*to.begin() - kLeafSide]->cols.size(); j++)
            used.insert({*to.begin(), static_cast<int>(j)});
        Resolver at = below.empty() ? inside : Above(reg, below);
        std::vector<std::string> sel;
        for (size_t k = 0; k < reg.leaves.size(); k++)
          sel.push_back(at(kLeafSide + static_cast<int>(k), -1) + " AS " +
                        FlatName(reg, kLeafSide + static_cast<int>(k), -1));
        for (const auto &[side, col] : used)
          if (col >= 0) sel.push_back(at(side, col) + " AS " + FlatName(reg, side, col));
        for (int k = 0; k < r->nkeys; k++) {
          for (const auto &c : KeyCols(r, k, Sql(reg.item.cols[k], at), "k" + std::to_string(k))) sel.push_back(c);
          CollectCols(reg.item.cols[k], used);
        }
        std::string from = reg.item.from + Where(reg, reg.item.pending);
        if (!below.empty()) {
          for (const auto &n : under.Names()) sel.push_back("s." + n + " AS " + n);
          from = SplitFrom(reg, below, used, {}, [&](const std::string &sub) { return under.Wrap(sub); });
        }
        std::string source = " FROM " + lets.Wrap("(SELECT " + Join(sel, ", ") + " FROM " + from + " OFFSET 0)");
        if (r->nkeys == 0) {
          source += " CROSS JOIN " + grp;
        } else {
          std::vector<std::string> on;
          for (int k = 0; k < r->nkeys; k++) on.push_back(KeyEq(r, k, "r.k" + std::to_string(k)));
          source += " JOIN " + grp + " ON " + Join(on, " AND ");
        }
        ContributeToLeaves(
            reg, source, terms, [&reg](int k) { return "r." + reg.Alias(k) + "_rid"; }, "m" + std::to_string(id_.at(r)),
            deferred, res);
        return;
      }
    }
  }

  RelP loss_;
  std::vector<Rel *> order_;
  std::map<const Rel *, int> id_;
  int next_id_ = 1;
  std::set<const Rel *> sublink_rels_;
  std::set<const Rel *> mat_;
  std::set<const Rel *> direct_;  // scans read in place (rid = ctid)
  std::map<const Rel *, std::vector<bool>> active_;
  std::set<std::pair<const Rel *, int>> held_;  // max/min columns whose gradient is zero (shift.h)
  std::set<const Rel *> carried_;               // cotangents with their saved columns (Carries)
  std::map<const Rel *, std::vector<bool>> notnull_;
  std::map<const Rel *, Region> regions_;
  std::map<const Rel *, std::vector<Contrib>> contribs_;
  std::vector<std::string> *extra_ctes_ = nullptr;  // where a reverse rule adds shared steps
  std::map<const Rel *, std::set<int>> bcols_;
};

}  // namespace

ExprP NullSafeEquals(const ExprP &a, const ExprP &b) {
  std::string tmpl =
      a->type.sql == b->type.sql ? NullSafeEq("$1", "$2", a->type.sql) : "($1) IS NOT DISTINCT FROM ($2)";
  auto e = MakeOpaque("(" + tmpl + ")", {a, b}, kBool);
  std::const_pointer_cast<Expr>(e)->name = "=";
  return e;
}

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
