// Compile (include/ddx/dense/program.h): walks the loss's relations once,
// inputs first, gives each column a role (a coordinate of one of its
// node's dims, or a value), gives each node dims of its own (copies of its
// inputs', two of which a join's equality makes one), and finds the
// groupings that are matrix products.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "program_graph.h"

namespace ddx::dense {

// (format_type's spellings, as the translator writes them, and the
// catalog's)
bool IsKeyType(const Type &t) {
  return t.sql == "integer" || t.sql == "bigint" || t.sql == "smallint" || t.sql == "pg_catalog.int2" ||
         t.sql == "pg_catalog.int4" || t.sql == "pg_catalog.int8";
}

namespace {}  // namespace

bool IsFloat8(const Type &t) { return t.sql == "pg_catalog.float8"; }

// A numeric constant's value: the translator's `('2'::integer)`, or
// `'1.5'::pg_catalog.float8`, as PostgreSQL reads it (float8in and
// numeric_float8 both read the text with strtod). False for anything else.
bool ConstValue(const Expr &e, double *v) {
  std::string s = e.text;
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  size_t q = s.find('\'', 1);
  if (s.empty() || s[0] != '\'' || q == std::string::npos || s.compare(q, 3, "'::") != 0) return false;
  std::string type = s.substr(q + 3), lit = s.substr(1, q - 1);
  static const char *const kNumeric[] = {"integer",          "bigint",           "smallint",
                                         "numeric",          "double precision", "pg_catalog.int2",
                                         "pg_catalog.int4",  "pg_catalog.int8",  "pg_catalog.numeric",
                                         "pg_catalog.float8"};
  if (std::find(std::begin(kNumeric), std::end(kNumeric), type) == std::end(kNumeric)) return false;
  // (decimal digits only: strtod would read hex and "inf", which these
  // types' input functions do not; a value past float8's range, which
  // PostgreSQL's cast of the constant refuses, is refused here)
  if (lit.empty() || lit.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char *end = nullptr;
  errno = 0;
  *v = std::strtod(lit.c_str(), &end);
  if (errno == ERANGE || !end || *end != '\0') return false;
  if (*v == 0.0) *v = 0.0;  // (an integer's or numeric's -0 is 0)
  return true;
}

namespace {

// Whether a constant ConstValue reads is of an integer type.
bool IntegerConst(const Expr &e) {
  static const char *const kInts[] = {"::integer)",         "::bigint)",          "::smallint)",
                                      "::pg_catalog.int2)", "::pg_catalog.int4)", "::pg_catalog.int8)"};
  for (const char *t : kInts) {
    std::string suffix(t);
    if (e.text.size() >= suffix.size() && e.text.compare(e.text.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  }
  return false;
}

// An equality of two columns (the translator's `=` and the core's own),
// and the conjuncts of an AND.
bool IsEquality(const Expr &e) {
  return e.kind == ExprKind::Opaque && e.args.size() == 2 && e.text == "($1 OPERATOR(pg_catalog.=) $2)";
}
bool IsAnd(const Expr &e) { return e.kind == ExprKind::Opaque && e.name == "AND"; }

}  // namespace

bool ReadsActive(const Expr &e, const std::vector<Column> &in) {
  if (e.kind == ExprKind::Col) return in[e.col].active;
  for (const ExprP &a : e.args)
    if (ReadsActive(*a, in)) return true;
  return false;
}

namespace {

// The columns of an expression, (side, column) of each Col in it.
void ColsOf(const Expr &e, std::vector<std::pair<int, int>> *out) {
  if (e.kind == ExprKind::Col) out->push_back({e.side, e.col});
  for (const ExprP &a : e.args)
    if (a) ColsOf(*a, out);
  if (e.test) ColsOf(*e.test, out);
  if (e.corr) ColsOf(*e.corr, out);
}

// Which columns of each relation of the loss a reader on the way to the
// loss reads (the loss's one column; a reader's conditions; a projection's
// used expressions; a grouping's keys and used aggregates' arguments): the
// others are neither computed nor read (Column::used). A relation of a kind
// the program does not take has all its inputs' columns used.
std::map<const Rel *, std::vector<bool>> Uses(const RelP &loss) {
  std::vector<const Rel *> order;  // inputs before their readers
  std::map<const Rel *, std::vector<bool>> use;
  std::function<void(const Rel *)> visit = [&](const Rel *r) {
    if (use.count(r)) return;
    use[r].assign(r->cols.size(), false);
    for (const RelP &in : r->inputs)
      if (in) visit(in.get());
    order.push_back(r);
  };
  visit(loss.get());
  use[loss.get()].assign(loss->cols.size(), true);
  auto mark = [&](const Rel &r, int side, int col) {
    if (side < 0 || side >= static_cast<int>(r.inputs.size()) || !r.inputs[side]) return;
    std::vector<bool> &u = use[r.inputs[side].get()];
    if (col >= 0 && col < static_cast<int>(u.size())) u[col] = true;
  };
  for (size_t i = order.size(); i-- > 0;) {
    const Rel &r = *order[i];
    std::vector<bool> &u = use[&r];
    std::vector<std::pair<int, int>> refs;
    // (a join's or a filter's condition reads its own output row: those
    // columns are computed, and so are the inputs' they come from)
    if (r.cond && (r.kind == RelKind::Join || r.kind == RelKind::Filter)) {
      std::vector<std::pair<int, int>> own;
      ColsOf(*r.cond, &own);
      for (auto [side, col] : own)
        if (side == 0 && col >= 0 && col < static_cast<int>(u.size())) u[col] = true;
    } else if (r.cond) {
      ColsOf(*r.cond, &refs);
    }
    switch (r.kind) {
      case RelKind::Project:
        for (size_t k = 0; k < r.exprs.size() && k < u.size(); k++)
          if (u[k] && r.exprs[k]) ColsOf(*r.exprs[k], &refs);
        break;
      case RelKind::Filter:
        for (size_t c = 0; c < u.size(); c++)
          if (u[c]) refs.push_back({0, static_cast<int>(c)});
        break;
      case RelKind::Join: {
        size_t nl = r.inputs[0] ? r.inputs[0]->cols.size() : 0;
        for (size_t c = 0; c < u.size(); c++)
          if (u[c])
            refs.push_back(c < nl ? std::make_pair(0, static_cast<int>(c))
                                  : std::make_pair(1, static_cast<int>(c - nl)));
        break;
      }
      case RelKind::Aggregate:
        for (int k = 0; k < r.nkeys; k++) refs.push_back({0, k});
        for (size_t a = 0; a < r.aggs.size(); a++)
          if (r.nkeys + a < u.size() && u[r.nkeys + a]) refs.push_back({0, r.aggs[a].arg});
        break;
      case RelKind::Scan:
        break;
      default:
        for (size_t s = 0; s < r.inputs.size(); s++)
          if (r.inputs[s])
            for (size_t c = 0; c < r.inputs[s]->cols.size(); c++)
              refs.push_back({static_cast<int>(s), static_cast<int>(c)});
    }
    for (auto [side, col] : refs) mark(r, side, col);
  }
  return use;
}

struct Compiler {
  Program *p;
  std::map<const Rel *, int> seen;
  std::string why;
  std::map<const Rel *, std::vector<bool>> use;  // (Uses)

  // Whether column c of r is read on the way to the loss.
  bool Used(const Rel *r, size_t c) const {
    auto it = use.find(r);
    return it == use.end() || c >= it->second.size() || it->second[c];
  }

  bool Refuse(const std::string &reason) {
    if (why.empty()) why = reason;
    return false;
  }

  // Whether e is a float8 expression of the scalar rules over value columns
  // of `in` and numeric constants.
  bool ValueExpr(const Expr &e, const Node &in) {
    switch (e.kind) {
      case ExprKind::Col:
        if (e.side != 0 || e.col < 0 || e.col >= static_cast<int>(in.cols.size()))
          return Refuse("a column of another relation");
        if (in.cols[e.col].dim >= 0) return Refuse("an integer key used as a value");
        return true;
      case ExprKind::Const: {
        double v;
        return ConstValue(e, &v) || Refuse("a constant that is not a number: " + e.text);
      }
      case ExprKind::Call: {
        const ScalarRule *r = FindScalarRule(e.text);
        if (!r) return Refuse("no numeric form of " + e.text);
        if (!IsFloat8(e.type) && e.text != "cast") return Refuse(e.text + " of type " + e.type.sql);
        if (e.text == "cast" && !IsFloat8(e.type)) return Refuse("a cast to " + e.type.sql);
        for (const ExprP &a : e.args)
          if (!ValueExpr(*a, in)) return false;
        return true;
      }
      default:
        return Refuse("an expression of kind " + std::to_string(static_cast<int>(e.kind)));
    }
  }

  int Visit(const RelP &r) {
    auto it = seen.find(r.get());
    if (it != seen.end()) return it->second;
    Node n;
    n.rel = r.get();
    for (const RelP &in : r->inputs) {
      int k = Visit(in);
      if (k < 0) return -1;
      n.inputs.push_back(k);
    }
    if (!Shape(r, &n)) return -1;
    for (size_t c = 0; c < n.cols.size(); c++)  // (a value copied from an input: used as this relation uses it)
      if (n.cols[c].dim < 0) n.cols[c].used = Used(r.get(), c);
    p->nodes.push_back(std::move(n));
    int id = static_cast<int>(p->nodes.size()) - 1;
    seen[r.get()] = id;
    return id;
  }

  bool Shape(const RelP &r, Node *n) {
    switch (r->kind) {
      case RelKind::Scan:
        for (const Type &t : r->cols) {
          size_t c = n->cols.size();
          if (IsKeyType(t)) {
            n->cols.push_back({p->NewDim(), false});
            n->dims.push_back(n->cols.back().dim);
          } else if (IsFloat8(t)) {
            n->cols.push_back({-1, c < r->param.size() && r->param[c] >= 0});
          } else if (!Used(r.get(), c)) {
            n->cols.push_back({-1, false, false});  // (a column beside the model's: not read)
          } else {
            return Refuse("a column of type " + t.sql + " in " + r->table);
          }
        }
        p->scans.push_back(r.get());
        return true;
      case RelKind::Join: {
        if (r->join != JoinKind::Inner) return Refuse("an outer join");
        std::vector<Column> l = Copy(n, 0), rt = Copy(n, 1);
        n->cols = l;
        n->cols.insert(n->cols.end(), rt.begin(), rt.end());
        if (r->cond && !Condition(*r->cond, n)) return false;
        DimsFrom(n);
        return true;
      }
      case RelKind::Filter:
        n->cols = Copy(n, 0);
        if (!Condition(*r->cond, n)) return false;
        DimsFrom(n);
        return true;
      case RelKind::Project: {
        const Node &in = p->nodes[n->inputs[0]];
        std::vector<Column> mine = Copy(n, 0);
        for (const ExprP &e : r->exprs) {
          if (e->kind == ExprKind::Col && e->side == 0 && e->col >= 0 && e->col < static_cast<int>(in.cols.size()) &&
              in.cols[e->col].dim >= 0) {
            n->cols.push_back(mine[e->col]);
            continue;
          }
          if (!Used(r.get(), n->cols.size())) {
            n->cols.push_back({-1, false, false});  // (not computed)
            continue;
          }
          if (!IsFloat8(e->type)) return Refuse("a projected value of type " + e->type.sql);
          if (!ValueExpr(*e, in)) return false;
          n->cols.push_back({-1, ReadsActive(*e, in.cols)});
        }
        DimsFrom(n);
        return true;
      }
      case RelKind::Aggregate: {
        const Node &in = p->nodes[n->inputs[0]];
        if (r->distinct) return Refuse("SELECT DISTINCT");
        // (its dims: copies of its keys' alone)
        n->from.assign(1, std::vector<int>(in.dims.size(), -1));
        for (int k = 0; k < r->nkeys; k++) {
          if (in.cols[k].dim < 0) return Refuse("a group key that is not an integer column");
          size_t at = Place(in.dims, in.cols[k].dim);
          if (n->from[0][at] < 0) {
            n->from[0][at] = p->NewDim();
            p->Unite(in.cols[k].dim, n->from[0][at]);
            n->dims.push_back(n->from[0][at]);
          }
          n->cols.push_back({n->from[0][at], false});
        }
        for (const AggCall &a : r->aggs) {
          if (!Used(r.get(), n->cols.size())) {
            n->cols.push_back({-1, false, false});  // (not computed: a count beside the loss's sums)
            continue;
          }
          if (a.fn != "sum" && a.fn != "avg" && a.fn != "max" && a.fn != "min") return Refuse("the aggregate " + a.fn);
          if (a.arg < 0 || in.cols[a.arg].dim >= 0 || !IsFloat8(r->cols[n->cols.size()]))
            return Refuse("a sum of something other than a float8 value");
          n->cols.push_back({-1, in.cols[a.arg].active});
        }
        return true;
      }
      default:
        return Refuse("a relation of kind " + std::to_string(static_cast<int>(r->kind)));
    }
  }

  static size_t Place(const std::vector<int> &dims, int d) {
    return static_cast<size_t>(std::find(dims.begin(), dims.end(), d) - dims.begin());
  }
  // Input i's columns with its dims copied as n's own (n->from[i]).
  std::vector<Column> Copy(Node *n, size_t i) {
    const Node &in = p->nodes[n->inputs[i]];
    if (n->from.size() <= i) n->from.resize(i + 1);
    n->from[i].clear();
    for (int d : in.dims) {
      n->from[i].push_back(p->NewDim());
      p->Unite(d, n->from[i].back());
    }
    std::vector<Column> cols = in.cols;
    for (Column &c : cols)
      if (c.dim >= 0) c.dim = n->from[i][Place(in.dims, c.dim)];
    return cols;
  }
  // n's dims: its inputs' copies, in order, each once (a join's equality
  // has made two of them one).
  static void DimsFrom(Node *n) {
    n->dims.clear();
    for (const std::vector<int> &f : n->from)
      for (int d : f)
        if (d >= 0 && std::find(n->dims.begin(), n->dims.end(), d) == n->dims.end()) n->dims.push_back(d);
  }
  // Dim b of n (a join) made dim a: in its columns, copies and masks.
  static void Merge(Node *n, int a, int b) {
    for (Column &c : n->cols)
      if (c.dim == b) c.dim = a;
    for (std::vector<int> &f : n->from)
      for (int &d : f)
        if (d == b) d = a;
    for (Mask &m : n->masks) {
      if (m.da == b) m.da = a;
      if (m.cb >= 0 && m.db == b) m.db = a;
    }
  }

  // A join's or filter's condition: conjuncts, each an equality of two
  // integer columns (their dims become one) or another comparison of two
  // (a Mask).
  bool Condition(const Expr &c, Node *n) {
    if (IsAnd(c)) {
      for (const ExprP &a : c.args)
        if (!Condition(*a, n)) return false;
      return true;
    }
    std::string op = ComparisonOp(c);
    if (op.empty()) return Refuse("a condition other than comparisons of keys");
    static const std::map<std::string, std::string> kFlip = {{"<", ">"},   {"<=", ">="}, {">", "<"},
                                                             {">=", "<="}, {"=", "="},   {"<>", "<>"}};
    // a key and a float8 value (the key cast to float8: a label's class,
    // lab.val = l.c): a mask, compared as float8 compares; no gradient
    // passes the comparison, as none does in the SQL program
    auto key_of = [&](const Expr &a) -> int {  // a key column cast to float8 (not float4: rounded), or -1
      if (a.kind != ExprKind::Call || a.text != "cast" || a.args.size() != 1 || !IsFloat8(a.type)) return -1;
      const Expr *k = a.args[0].get();
      if (k->kind != ExprKind::Col || k->side != 0 || k->col < 0 || k->col >= static_cast<int>(n->cols.size()) ||
          n->cols[k->col].dim < 0)
        return -1;
      return k->col;
    };
    for (int i = 0; i < 2; i++) {
      const Expr &a = *c.args[i], &v = *c.args[1 - i];
      int kc = key_of(a);
      if (kc < 0 || v.kind != ExprKind::Col || v.side != 0 || v.col < 0 || v.col >= static_cast<int>(n->cols.size()) ||
          n->cols[v.col].dim >= 0 || !IsFloat8(v.type))
        continue;
      Mask m;
      m.ca = kc;
      m.da = n->cols[kc].dim;
      m.vcol = v.col;
      m.op = i == 0 ? op : kFlip.at(op);
      n->masks.push_back(m);
      return true;
    }
    // a key and a number (either way round): a mask
    for (int i = 0; i < 2; i++) {
      const Expr &a = *c.args[i], &k = *c.args[1 - i];
      double v;
      // (an integer constant only: PostgreSQL compares a key with a numeric
      // one as numeric, which the translator writes with a cast, refused)
      if (k.kind != ExprKind::Const || !ConstValue(k, &v) || !IntegerConst(k)) continue;
      if (a.kind != ExprKind::Col || a.side != 0 || a.col < 0 || a.col >= static_cast<int>(n->cols.size()) ||
          n->cols[a.col].dim < 0)
        return Refuse("a condition other than comparisons of keys");
      Mask m;
      m.ca = a.col;
      m.da = n->cols[a.col].dim;
      m.constant = v;
      m.op = i == 0 ? op : kFlip.at(op);
      n->masks.push_back(m);
      return true;
    }
    int col[2];
    for (int i = 0; i < 2; i++) {
      const Expr &a = *c.args[i];
      if (a.kind != ExprKind::Col || a.side != 0 || a.col < 0 || a.col >= static_cast<int>(n->cols.size()) ||
          n->cols[a.col].dim < 0)
        return Refuse("a condition other than comparisons of keys");
      col[i] = a.col;
    }
    int nl = n->rel->kind == RelKind::Join ? static_cast<int>(p->nodes[n->inputs[0]].cols.size()) : -1;
    bool across = nl >= 0 && (col[0] < nl) != (col[1] < nl);
    // An equality of a left key with a right one unites their dims; one of
    // two keys of one input (a filter's, or a join's of one side) is a mask,
    // which leaves that input's dims apart for its other readers.
    if (op == "=" && across) {
      int a = n->cols[col[0]].dim, b = n->cols[col[1]].dim;
      if (a != b) {
        p->Unite(a, b);
        Merge(n, std::min(a, b), std::max(a, b));
      }
      return true;
    }
    Mask m;
    m.ca = col[0];
    m.cb = col[1];
    m.op = op;
    m.da = n->cols[col[0]].dim;
    m.db = n->cols[col[1]].dim;
    n->masks.push_back(m);
    return true;
  }
  // The operator of `($1 OPERATOR(pg_catalog.<op>) $2)` over two arguments
  // (or the core's `=`), or "".
  static std::string ComparisonOp(const Expr &c) {
    if (c.kind != ExprKind::Opaque || c.args.size() != 2) return "";
    if (IsEquality(c)) return "=";
    static const char *const kOps[] = {"<", "<=", ">", ">=", "<>", "="};
    for (const char *op : kOps)
      if (c.text == std::string("($1 OPERATOR(pg_catalog.") + op + ") $2)") return op;
    return "";
  }
};

// The grouping `a` as a Product, where it is one (see Product): its input a
// projection of a join (each read by the next alone) whose one sum is of a
// left column times a right one; each dim of the join either kept by the
// grouping and of one side, or summed and of both (their equality made it
// one); the join's comparisons of kept dims only.
void FindProduct(Program *p, int a, const std::vector<int> &readers) {
  Node &n = p->nodes[a];
  const Rel &r = *n.rel;
  if (r.kind != RelKind::Aggregate || r.aggs.size() != 1 || r.aggs[0].fn != "sum") return;
  int pj = n.inputs[0];
  const Node &pn = p->nodes[pj];
  if (pn.rel->kind != RelKind::Project || readers[pj] != 1) return;
  int jn = pn.inputs[0];
  const Node &j = p->nodes[jn];
  if (j.rel->kind != RelKind::Join || readers[jn] != 1) return;
  const Expr &e = *pn.rel->exprs[r.aggs[0].arg];
  if (e.kind != ExprKind::Call || e.text != "mul") return;
  const Expr &x = *e.args[0], &y = *e.args[1];
  if (x.kind != ExprKind::Col || y.kind != ExprKind::Col) return;
  const Node &ln = p->nodes[j.inputs[0]], &rn = p->nodes[j.inputs[1]];
  int nl = static_cast<int>(ln.cols.size());
  if ((x.col < nl) == (y.col < nl)) return;  // (both factors of one side)
  const Expr &l = x.col < nl ? x : y, &rt = x.col < nl ? y : x;
  Product c;
  c.join = jn;
  c.project = pj;
  c.left = j.inputs[0];
  c.right = j.inputs[1];
  c.lcol = l.col;
  c.rcol = rt.col - nl;
  // each dim of the join: its place among the projection's (the same), the
  // grouping's copy of it, and its left and right originals
  auto kept = [&](int jd) {
    size_t at = Compiler::Place(j.dims, jd);
    return n.from[0][at];  // (the projection's dims are the join's, in order)
  };
  for (size_t at = 0; at < j.dims.size(); at++) {
    int jd = j.dims[at];
    // (two dims of one side made one by the join: the join formed, not a product)
    if (std::count(j.from[0].begin(), j.from[0].end(), jd) > 1 ||
        std::count(j.from[1].begin(), j.from[1].end(), jd) > 1)
      return;
    int li = static_cast<int>(Compiler::Place(j.from[0], jd)), ri = static_cast<int>(Compiler::Place(j.from[1], jd));
    bool inl = li < static_cast<int>(j.from[0].size()), inr = ri < static_cast<int>(j.from[1].size());
    int ad = kept(jd);
    if (ad >= 0) {
      if (inl == inr) return;  // (kept, and of both sides: a batch of products)
      (inl ? c.rows : c.cols).push_back(inl ? ln.dims[li] : rn.dims[ri]);
      (inl ? c.rows_a : c.cols_a).push_back(ad);
    } else {
      if (!inl || !inr) return;  // (summed over, but of one side only)
      c.k.push_back(ln.dims[li]);
      c.kr.push_back(rn.dims[ri]);
    }
  }
  for (const Mask &m : j.masks) {
    if (m.vcol >= 0) return;  // (a comparison with a value: the join formed)
    Mask g = m;
    g.da = kept(m.da);
    g.db = m.cb < 0 ? 0 : kept(m.db);
    if (g.da < 0 || g.db < 0) return;  // (a comparison of a summed dim)
    if (m.cb < 0) g.db = -1;
    c.masks.push_back(g);
  }
  // (the rows' and cols' order in the matrices: the sides' own)
  auto order = [](std::vector<int> *own, std::vector<int> *other, const std::vector<int> &dims) {
    std::vector<size_t> idx(own->size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t a2, size_t b2) {
      return Compiler::Place(dims, (*own)[a2]) < Compiler::Place(dims, (*own)[b2]);
    });
    std::vector<int> o, t;
    for (size_t i2 : idx) {
      o.push_back((*own)[i2]);
      t.push_back((*other)[i2]);
    }
    *own = o;
    *other = t;
  };
  order(&c.rows, &c.rows_a, ln.dims);
  order(&c.cols, &c.cols_a, rn.dims);
  p->nodes[pj].fused = p->nodes[jn].fused = true;
  n.product = std::move(c);
}

}  // namespace

std::shared_ptr<const Program> Compile(const RelP &loss, std::string *why) {
  auto p = std::make_shared<Program>();
  Compiler c{p.get(), {}, "", Uses(loss)};
  if (c.Visit(loss) < 0) {
    *why = c.why;
    return nullptr;
  }
  if (loss->cols.size() != 1 || !IsFloat8(loss->cols[0])) {
    *why = "a loss of other than one float8 column";
    return nullptr;
  }
  std::vector<int> readers(p->nodes.size(), 0);
  for (const Node &n : p->nodes)
    for (int k : n.inputs) readers[k]++;
  for (size_t a = 0; a < p->nodes.size(); a++) FindProduct(p.get(), static_cast<int>(a), readers);
  if (!p->nodes.back().dims.empty()) {
    *why = "a loss of more than one row";
    return nullptr;
  }
  return p;
}

const std::vector<const Rel *> &Scans(const Program &p) { return p.scans; }

bool ReadsColumn(const Program &p, const Rel *scan, size_t col) {
  for (const Node &n : p.nodes)
    if (n.rel == scan) return col < n.cols.size() && (n.cols[col].dim >= 0 || n.cols[col].used);
  return false;
}

}  // namespace ddx::dense
