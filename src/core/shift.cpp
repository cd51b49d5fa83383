// A softmax's max held constant (see shift.h).
//
// A value's Shape says how it depends on the shift δ of one max column M.m:
// not at all (Inv), as base + n·δ (Add), as base · exp(n·δ) (Mul), or in a
// way the proof does not follow (Top). δ is one per group of M, so two
// shifted values combine only where their rows share the group: `grp` lists
// the columns of the relation the value is over that hold M's keys (for a
// window max, its PARTITION BY columns), and two lists name the same group
// when their columns are equal by the relation's join and filter equalities
// (its classes). The rules:
//   M.m                     Add 1 over M's keys
//   u ± v                   Add a ± b; Mul k + Mul k stays Mul k
//   -v                      Add -a; Mul k
//   u · v, u / v            Mul k ± j (Inv is Mul 0)
//   exp(Add a)              Mul a        ln(Mul k)   Add k
//   sum / avg / min / max   of Mul k over groups within M's: Mul k
//   avg / min / max         of Add a over groups within M's: Add a
// and the loss must come out Inv. Keys, join and filter conditions, window
// orders and everything else must be Inv, or the proof gives up.
#include "ddx/core/shift.h"

#include <functional>
#include <map>
#include <numeric>

#include "ddx/core/agg_rules.h"

namespace ddx {
namespace {

struct Shape {
  enum Kind { Inv, Add, Mul, Top } kind = Inv;
  int n = 0;
  std::vector<int> grp;
};

Shape Top() { return Shape{Shape::Top, 0, {}}; }

// Equality classes of a relation's output columns (union-find roots).
struct Classes {
  std::vector<int> parent;
  explicit Classes(size_t n = 0) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Union(int a, int b) { parent[Find(a)] = Find(b); }
  bool Same(const std::vector<int> &a, const std::vector<int> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
      if (Find(a[i]) != Find(b[i])) return false;
    return true;
  }
};

// Column pairs that a condition's top-level conjuncts hold equal.
void Equal(const ExprP &e, Classes &c) {
  if (!e || e->kind != ExprKind::Opaque) return;
  if (e->name == "AND") {
    for (const auto &a : e->args) Equal(a, c);
  } else if ((e->name == "=" || e->text == "($1 OPERATOR(pg_catalog.=) $2)") && e->args.size() == 2) {
    const ExprP &a = e->args[0], &b = e->args[1];
    if (a->kind == ExprKind::Col && b->kind == ExprKind::Col && a->side == 0 && b->side == 0) c.Union(a->col, b->col);
  }
}

class Prover {
 public:
  explicit Prover(const std::vector<Rel *> &order) : order_(order) {
    for (Rel *r : order_) classes_[r] = ClassesOf(r);
  }

  // Whether the loss (each of its columns) is invariant under a shift of column `col` of M.
  bool Invariant(const Rel *loss, const Rel *m, int col) {
    m_ = m;
    mcol_ = col;
    shapes_.clear();
    for (Rel *r : order_) shapes_[r] = Transfer(r);
    for (const Shape &s : shapes_.at(loss))  // every column: vjp's relations have several
      if (s.kind != Shape::Inv) return false;
    return true;
  }

 private:
  Classes ClassesOf(const Rel *r) {
    Classes out(r->cols.size());
    auto in = [&](size_t k) -> Classes & { return classes_.at(r->inputs[k].get()); };
    switch (r->kind) {
      case RelKind::Project: {
        std::map<int, int> first;  // input class -> first output column
        for (size_t i = 0; i < r->exprs.size(); i++) {
          const ExprP &e = r->exprs[i];
          if (e->kind != ExprKind::Col || e->side != 0) continue;
          int k = in(0).Find(e->col);
          if (first.count(k))
            out.Union(static_cast<int>(i), first[k]);
          else
            first[k] = static_cast<int>(i);
        }
        break;
      }
      case RelKind::Filter:
      case RelKind::Limit:
        out = in(0);
        if (r->kind == RelKind::Filter) Equal(r->cond, out);
        break;
      case RelKind::Join: {
        Classes &l = in(0), &rr = in(1);
        int nl = static_cast<int>(r->inputs[0]->cols.size());
        for (int i = 0; i < static_cast<int>(r->cols.size()); i++)
          out.parent[i] = i < nl ? l.Find(i) : nl + rr.Find(i - nl);
        if (r->join == JoinKind::Inner) Equal(r->cond, out);
        break;
      }
      case RelKind::Aggregate:
        for (int k = 0; k < r->nkeys; k++)
          for (int j = 0; j < k; j++)
            if (in(0).Find(k) == in(0).Find(j)) out.Union(k, j);
        break;
      case RelKind::Window:
        for (size_t i = 0; i < r->inputs[0]->cols.size(); i++) out.parent[i] = in(0).Find(static_cast<int>(i));
        break;
      default:
        break;
    }
    return out;
  }

  // The shape of e over a relation whose columns have shapes `sh` and classes `cls`.
  Shape Eval(const ExprP &e, const std::vector<Shape> &sh, Classes &cls) {
    switch (e->kind) {
      case ExprKind::Col:
        return e->side == 0 ? sh.at(e->col) : Shape{};
      case ExprKind::Const:
        return Shape{};
      case ExprKind::Sublink: {
        for (const Shape &s : shapes_.at(e->sub.get()))
          if (s.kind != Shape::Inv) return Top();
        if (e->test && Eval(e->test, sh, cls).kind != Shape::Inv) return Top();
        if (e->corr && Eval(e->corr, sh, cls).kind != Shape::Inv) return Top();
        return Shape{};
      }
      case ExprKind::Opaque: {
        for (const auto &a : e->args)
          if (Eval(a, sh, cls).kind != Shape::Inv) return Top();
        return Shape{};
      }
      case ExprKind::Case: {
        for (size_t k = 0; k + 1 < e->args.size(); k += 2)
          if (Eval(e->args[k], sh, cls).kind != Shape::Inv) return Top();
        Shape out = Eval(e->args.back(), sh, cls);
        for (size_t k = 1; k < e->args.size(); k += 2) {
          Shape v = Eval(e->args[k], sh, cls);
          if (v.kind != out.kind || v.n != out.n || (v.kind != Shape::Inv && !cls.Same(v.grp, out.grp))) return Top();
        }
        return out;
      }
      case ExprKind::Call:
        break;
    }
    std::vector<Shape> a;
    bool inv = true;
    for (const auto &x : e->args) {
      a.push_back(Eval(x, sh, cls));
      if (a.back().kind == Shape::Top) return Top();
      inv = inv && a.back().kind == Shape::Inv;
    }
    if (inv) return Shape{};
    const std::string &op = e->text;
    if (op == "pos" || op == "stop_gradient" || (op == "cast" && e->type.differentiable)) return a[0];
    if (op == "neg") return a[0].kind == Shape::Add ? Shape{Shape::Add, -a[0].n, a[0].grp} : a[0];
    if (op == "exp") return a[0].kind == Shape::Add ? Shape{Shape::Mul, a[0].n, a[0].grp} : Top();
    if (op == "ln") return a[0].kind == Shape::Mul ? Norm(Shape{Shape::Add, a[0].n, a[0].grp}) : Top();
    if (a.size() != 2) return Top();
    Shape &x = a[0], &y = a[1];
    const std::vector<int> &grp = x.kind != Shape::Inv ? x.grp : y.grp;
    if (x.kind != Shape::Inv && y.kind != Shape::Inv && !cls.Same(x.grp, y.grp)) return Top();
    if (op == "add" || op == "sub") {
      int s = op == "add" ? 1 : -1;
      if (x.kind != Shape::Mul && y.kind != Shape::Mul) return Norm(Shape{Shape::Add, x.n + s * y.n, grp});
      if (x.kind == Shape::Mul && y.kind == Shape::Mul && x.n == y.n) return x;
      return Top();
    }
    if (op == "mul" || op == "div") {
      if (x.kind == Shape::Add || y.kind == Shape::Add) return Top();
      return Norm(Shape{Shape::Mul, x.n + (op == "mul" ? 1 : -1) * y.n, grp});
    }
    return Top();
  }

  static Shape Norm(Shape s) { return s.n == 0 ? Shape{} : s; }

  // Shapes over input columns, re-expressed over output columns: out_col(c)
  // is an output column equal to input column c, or -1 (the group is lost).
  static Shape Remap(const Shape &s, const std::function<int(int)> &out_col) {
    if (s.kind == Shape::Inv || s.kind == Shape::Top) return s;
    Shape o = s;
    for (int &c : o.grp) {
      c = out_col(c);
      if (c < 0) return Top();
    }
    return o;
  }

  std::vector<Shape> Transfer(const Rel *r) {
    size_t n = r->cols.size();
    std::vector<Shape> out(n);
    auto in = [&](size_t k) -> const std::vector<Shape> & { return shapes_.at(r->inputs[k].get()); };
    auto cls = [&](size_t k) -> Classes & { return classes_.at(r->inputs[k].get()); };
    auto all_top = [&] { return std::vector<Shape>(n, Top()); };
    switch (r->kind) {
      case RelKind::Scan:
      case RelKind::Values:
      case RelKind::Function:
        return out;
      case RelKind::Project: {
        Classes &c = cls(0);
        auto out_col = [&](int col) {
          for (size_t i = 0; i < r->exprs.size(); i++) {
            const ExprP &e = r->exprs[i];
            if (e->kind == ExprKind::Col && e->side == 0 && c.Find(e->col) == c.Find(col)) return static_cast<int>(i);
          }
          return -1;
        };
        for (size_t i = 0; i < n; i++) out[i] = Remap(Eval(r->exprs[i], in(0), c), out_col);
        return out;
      }
      case RelKind::Filter:
        if (Eval(r->cond, in(0), cls(0)).kind != Shape::Inv) return all_top();
        return in(0);
      case RelKind::Limit:
        for (const auto &k : r->order)
          if (in(0).at(k.col).kind != Shape::Inv) return all_top();
        return in(0);
      case RelKind::Join: {
        size_t nl = in(0).size();
        for (size_t i = 0; i < n; i++) {
          out[i] = i < nl ? in(0)[i] : in(1)[i - nl];
          if (i >= nl)
            for (int &g : out[i].grp) g += static_cast<int>(nl);
        }
        if (r->cond && Eval(r->cond, out, classes_.at(r)).kind != Shape::Inv) return all_top();
        return out;
      }
      case RelKind::Aggregate: {
        Classes &c = cls(0);
        for (int k = 0; k < r->nkeys; k++)
          if (in(0).at(k).kind != Shape::Inv) return all_top();
        auto key_of = [&](int col) {
          for (int k = 0; k < r->nkeys; k++)
            if (c.Find(k) == c.Find(col)) return k;
          return -1;
        };
        for (size_t k = 0; k < r->aggs.size(); k++) {
          const AggCall &a = r->aggs[k];
          Shape &o = out[r->nkeys + k];
          if (r == m_ && r->nkeys + static_cast<int>(k) == mcol_) {
            o = Shape{Shape::Add, 1, {}};
            for (int j = 0; j < r->nkeys; j++) o.grp.push_back(j);
            continue;
          }
          if (FlowOf(a.fn) == AggFlow::None || a.arg < 0) continue;
          const Shape &s = in(0).at(a.arg);
          if (s.kind == Shape::Inv) continue;
          const AggRule *rule = FindAggRule(a.fn);
          bool ok = rule && ((s.kind == Shape::Mul && rule->scales) || (s.kind == Shape::Add && rule->translates));
          o = ok ? Remap(s, key_of) : Top();
        }
        return out;
      }
      case RelKind::UnionAll:
        for (size_t i = 0; i < n; i++) {
          out[i] = in(0).at(i);
          for (size_t k = 1; k < r->inputs.size(); k++) {
            const Shape &s = in(k).at(i);
            if (s.kind != out[i].kind || s.n != out[i].n || s.grp != out[i].grp) out[i] = Top();
          }
        }
        return out;
      case RelKind::Scalar:  // one row: a shift of one group (M without keys) stays one
        out[0] = in(0).at(0).grp.empty() ? in(0).at(0) : Top();
        return out;
      case RelKind::Window: {
        const std::vector<Shape> &i0 = in(0);
        Classes &c = cls(0);
        for (int p : r->partition)
          if (i0.at(p).kind != Shape::Inv) return all_top();
        for (const auto &k : r->order)
          if (i0.at(k.col).kind != Shape::Inv) return all_top();
        size_t ni = i0.size();
        for (size_t i = 0; i < ni; i++) out[i] = i0[i];
        auto within = [&](const Shape &s) {  // every row of a frame shares the group
          for (int g : s.grp) {
            bool found = false;
            for (int p : r->partition) found = found || c.Find(p) == c.Find(g);
            if (!found) return false;
          }
          return true;
        };
        for (size_t k = 0; k < r->wins.size(); k++) {
          const WinCall &w = r->wins[k];
          Shape &o = out[ni + k];
          if (r == m_ && static_cast<int>(ni + k) == mcol_) {
            o = Shape{Shape::Add, 1, r->partition};
            continue;
          }
          if (w.arg < 0 || !PassesGradient(w.fn)) continue;
          const Shape &s = i0.at(w.arg);
          bool dflt_inv = w.dflt < 0 || i0.at(w.dflt).kind == Shape::Inv;
          if (s.kind == Shape::Inv && dflt_inv) continue;
          const AggRule *rule = FindAggRule(w.fn);
          bool ok = within(s) && dflt_inv && rule &&
                    ((s.kind == Shape::Mul && rule->scales) || (s.kind == Shape::Add && rule->translates));
          o = ok ? s : Top();
        }
        return out;
      }
    }
    return all_top();
  }

  const std::vector<Rel *> &order_;
  std::map<const Rel *, Classes> classes_;
  std::map<const Rel *, std::vector<Shape>> shapes_;
  const Rel *m_ = nullptr;
  int mcol_ = -1;
};

// A window whose every row's frame is its whole partition. Only then is a
// shift per partition a shift of each max value: with running frames, rows
// of one partition have different maxima (and argmax rows), and a loss
// invariant under moving them all together may still depend on each.
bool WholePartition(const Rel *w) {
  const Frame &f = w->frame;
  if (!w->order.empty() || !f.exclude.empty() || f.start.kind != BoundKind::UnboundedPreceding) return false;
  return f.end.kind == BoundKind::UnboundedFollowing ||
         (f.mode != FrameMode::Rows && f.end.kind == BoundKind::CurrentRow);
}

}  // namespace

std::set<std::pair<const Rel *, int>> HeldMaxima(const Rel *loss, const std::vector<Rel *> &order) {
  std::set<std::pair<const Rel *, int>> held;
  Prover prover(order);
  for (const Rel *r : order) {
    if (r->kind == RelKind::Aggregate) {
      for (size_t k = 0; k < r->aggs.size(); k++) {
        const AggCall &a = r->aggs[k];
        int col = r->nkeys + static_cast<int>(k);
        if (FlowOf(a.fn) == AggFlow::Attained && r->cols[col].differentiable && prover.Invariant(loss, r, col))
          held.insert({r, col});
      }
    } else if (r->kind == RelKind::Window && WholePartition(r)) {
      size_t ni = r->inputs[0]->cols.size();
      for (size_t k = 0; k < r->wins.size(); k++) {
        const WinCall &w = r->wins[k];
        int col = static_cast<int>(ni + k);
        if (FlowOf(w.fn) == AggFlow::Attained && r->cols[col].differentiable && prover.Invariant(loss, r, col))
          held.insert({r, col});
      }
    }
  }
  return held;
}

}  // namespace ddx
