// Run (include/ddx/dense/program.h): gives each dim its positions (the
// distinct values its class's columns take in the scans' rows, in order),
// fills each relation's arrays forwards, then the adjoints backwards.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ddx/dense/contract.h"
#include "ddx/dense/scalar.h"
#include "program_graph.h"

namespace ddx::dense {

namespace {

// A dim's positions: the distinct values its columns take, in order. A
// value's position is its offset where they are a range of integers (keys
// 0..n-1, the common case), a table's entry where they lie in a span not
// much wider than their number, else a hash table's.
struct Dim {
  size_t n = 0;
  int64_t base = 0;
  bool range = true;
  std::vector<uint32_t> table;  // per value - base: its position (a span)
  std::unordered_map<int64_t, size_t> index;
  std::vector<int64_t> values;  // per position: its value (where not a range)
  int64_t Value(size_t pos) const { return range ? base + static_cast<int64_t>(pos) : values[pos]; }
  size_t Pos(double v) const {
    int64_t k = static_cast<int64_t>(v);
    if (range) return static_cast<size_t>(k - base);
    if (!table.empty()) return table[static_cast<size_t>(k - base)];
    return index.at(k);
  }
};

// A tensor: its dims' extents, its cells' presence, and per column its
// values over the cells (empty for a coordinate), row-major (the first dim
// slowest).
struct Tensor {
  std::vector<int> dims;
  std::vector<size_t> extent, stride;
  size_t cells = 1;
  std::vector<uint8_t> present;
  std::vector<std::vector<double>> val;
};

// An expression's values over a tensor's cells, each subexpression's array
// in post-order (args: its arguments' places).
struct Sub {
  const Expr *e;
  std::vector<size_t> args;
};

struct Runner {
  const Program &p;
  size_t limit;
  Outcome out;
  std::vector<Dim> dim;
  std::vector<Tensor> t;
  std::vector<std::vector<std::vector<double>>> adj;  // per node, per column: adjoints over its cells
  // A projection's active columns' subexpressions, computed forwards and
  // read again backwards (their partials read their values).
  struct Kept {
    std::vector<std::vector<double>> vals;
    std::vector<Sub> subs;
    size_t at = 0;
  };
  std::map<std::pair<int, size_t>, Kept> kept;
  std::map<std::pair<int, size_t>, std::vector<double>> counts;  // an avg's N per group
  size_t bytes = 0;

  bool Refuse(const std::string &why) {
    if (out.why.empty()) out.why = why;
    return false;
  }
  bool Fail(Fault f) {
    if (out.fault == Fault::kNone) out.fault = f;
    return false;
  }
  bool Take(size_t n) {
    bytes += n;
    out.bytes = std::max(out.bytes, bytes);
    return bytes <= limit || Refuse("arrays past the memory limit");
  }

  // A dim's positions: its class's (dims and their copies share them).
  const Dim &D(int d) const { return dim[static_cast<size_t>(p.Find(d))]; }

  // The value columns of n that are computed (Column::used): its arrays.
  static size_t Width(const Node &n) {
    size_t w = 0;
    for (const Column &c : n.cols) w += c.dim < 0 && c.used;
    return w;
  }

  bool Shape(Tensor *x, const std::vector<int> &dims, size_t ncols, size_t width) {
    x->dims = dims;
    x->extent.resize(dims.size());
    x->stride.resize(dims.size());
    x->cells = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      x->extent[i] = D(dims[i]).n;
      x->stride[i] = x->cells;
      if (x->extent[i] && x->cells > limit / x->extent[i]) return Refuse("arrays past the memory limit");
      x->cells *= x->extent[i];
    }
    if (x->cells > limit / (1 + 8 * width)) return Refuse("arrays past the memory limit");
    if (!Take(x->cells * (1 + 8 * width))) return false;
    x->present.assign(x->cells, 0);
    x->val.assign(ncols, {});
    return true;
  }

  // For each cell of x, its place among the cells of `dims` (row-major,
  // the first slowest; each one of x's dims): an odometer over x's cells.
  bool Map(const Tensor &x, const std::vector<int> &dims, std::vector<size_t> *m) {
    size_t nd = x.dims.size();
    std::vector<size_t> ts(nd, 0), coord(nd, 0);
    size_t s = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      size_t k = static_cast<size_t>(std::find(x.dims.begin(), x.dims.end(), dims[i]) - x.dims.begin());
      if (k == nd) return Refuse("internal: a dim of another tensor");
      // (a dim listed twice, an input's two dims a join's equalities made
      // one: the input's cells on their diagonal)
      ts[k] += s;
      s *= D(dims[i]).n;
    }
    // (transient, 8 bytes a cell of a tensor counted already: not counted)
    m->resize(x.cells);
    size_t place = 0;
    for (size_t c = 0; c < x.cells; c++) {
      (*m)[c] = place;
      for (size_t k = nd; k-- > 0;) {
        place += ts[k];
        if (++coord[k] < x.extent[k]) break;
        place -= ts[k] * x.extent[k];
        coord[k] = 0;
      }
    }
    return true;
  }
  // A grouping's dims as its input's (the keys' originals), in its order.
  static std::vector<int> Preimage(const Node &n, const Tensor &in) {
    std::vector<int> d;
    for (int own : n.dims) {
      size_t j = static_cast<size_t>(std::find(n.from[0].begin(), n.from[0].end(), own) - n.from[0].begin());
      d.push_back(in.dims[j]);
    }
    return d;
  }
  static std::vector<int> Cat(const std::vector<int> &a, const std::vector<int> &b) {
    std::vector<int> c = a;
    c.insert(c.end(), b.begin(), b.end());
    return c;
  }

  const Node &ScanNode(size_t s) const {
    return *std::find_if(p.nodes.begin(), p.nodes.end(), [&](const Node &x) { return x.rel == p.scans[s]; });
  }

  // Each dim's positions, from its columns' values in the scans' rows: their
  // span first, then which values of it occur (one pass each, no sort
  // where the span is at most 4 values a row).
  bool Positions(const std::vector<const Rows *> &rows) {
    size_t nd = p.parent.size();
    std::vector<int64_t> lo(nd, INT64_MAX), hi(nd, INT64_MIN);
    std::vector<size_t> count(nd, 0);
    for (size_t s = 0; s < p.scans.size(); s++) {
      const Node &n = ScanNode(s);
      const Rows &r = *rows[s];
      for (size_t c = 0; c < n.cols.size(); c++) {
        int d = n.cols[c].dim < 0 ? -1 : p.Find(n.cols[c].dim);
        if (d < 0 && !n.cols[c].used) continue;  // (not read: its NULLs are no matter)
        for (size_t i = 0; i < r.n; i++)
          if (r.null[c][i]) return Refuse(d >= 0 ? "a NULL key" : "a NULL value");
        if (d < 0) continue;
        for (size_t i = 0; i < r.n; i++) {
          if (!(std::fabs(r.val[c][i]) < 9007199254740992.0)) return Refuse("a key past 2^53");
          int64_t v = static_cast<int64_t>(r.val[c][i]);
          lo[d] = std::min(lo[d], v);
          hi[d] = std::max(hi[d], v);
        }
        count[d] += r.n;
      }
    }
    dim.resize(nd);
    for (size_t d = 0; d < nd; d++) {
      if (!count[d]) continue;
      uint64_t span = static_cast<uint64_t>(hi[d] - lo[d]) + 1;
      Dim &m = dim[d];
      m.base = lo[d];
      if (span <= 4 * count[d] + 1024) {
        if (!Take(4 * span)) return false;
        m.table.assign(span, 0);
        for (size_t s = 0; s < p.scans.size(); s++) {
          const Node &n = ScanNode(s);
          for (size_t c = 0; c < n.cols.size(); c++)
            if (n.cols[c].dim >= 0 && p.Find(n.cols[c].dim) == static_cast<int>(d))
              for (size_t i = 0; i < rows[s]->n; i++)
                m.table[static_cast<size_t>(static_cast<int64_t>(rows[s]->val[c][i]) - lo[d])] = 1;
        }
        uint32_t at = 0;
        for (size_t i = 0; i < m.table.size(); i++)
          if (m.table[i]) {
            m.values.push_back(lo[d] + static_cast<int64_t>(i));
            m.table[i] = at++;
          }
        m.n = at;
        m.range = at == span;
        if (m.range) {
          m.table.clear();
          m.values.clear();
        }
        continue;
      }
      std::vector<int64_t> v;
      for (size_t s = 0; s < p.scans.size(); s++) {
        const Node &n = ScanNode(s);
        for (size_t c = 0; c < n.cols.size(); c++)
          if (n.cols[c].dim >= 0 && p.Find(n.cols[c].dim) == static_cast<int>(d))
            for (size_t i = 0; i < rows[s]->n; i++) v.push_back(static_cast<int64_t>(rows[s]->val[c][i]));
      }
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      m.n = v.size();
      m.range = false;
      for (size_t i = 0; i < v.size(); i++) m.index[v[i]] = i;
      m.values = std::move(v);
    }
    return true;
  }

  // The cell of row i of a scan (each dim read from its first column); false
  // where two of its columns of one dim disagree (x.i = x.j: no cell).
  bool Cell(const Node &n, const Rows &r, size_t i, const Tensor &x, size_t *at) {
    *at = 0;
    for (size_t k = 0; k < x.dims.size(); k++) {
      int d = x.dims[k];
      size_t c = 0;
      while (n.cols[c].dim != d) c++;
      for (size_t o = c + 1; o < n.cols.size(); o++)
        if (n.cols[o].dim == d && r.val[o][i] != r.val[c][i]) return false;
      *at += D(d).Pos(r.val[c][i]) * x.stride[k];
    }
    return true;
  }

  bool ScanForward(const Node &n, const Rows &r, Tensor *x) {
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    for (size_t c = 0; c < n.cols.size(); c++)
      if (n.cols[c].dim < 0 && n.cols[c].used) x->val[c].assign(x->cells, 0.0);
    for (size_t i = 0; i < r.n; i++) {
      size_t at;
      if (!Cell(n, r, i, *x, &at)) return Refuse("a scan whose two keys are one dim");
      if (x->present[at]) return Refuse("two rows of " + n.rel->table + " with the same keys");
      x->present[at] = 1;
      for (size_t c = 0; c < n.cols.size(); c++)
        if (n.cols[c].dim < 0 && n.cols[c].used) x->val[c][at] = r.val[c][i];
    }
    return true;
  }

  bool JoinForward(const Node &n, Tensor *x) {
    const Tensor &l = t[n.inputs[0]], &r = t[n.inputs[1]];
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    std::vector<size_t> lm, rm;
    if (!Map(*x, n.from[0], &lm) || !Map(*x, n.from[1], &rm)) return false;
    size_t nl = l.val.size();
    for (size_t c = 0; c < n.cols.size(); c++)
      if (n.cols[c].dim < 0 && n.cols[c].used) x->val[c].assign(x->cells, 0.0);
    for (size_t c = 0; c < x->cells; c++) {
      if (!l.present[lm[c]] || !r.present[rm[c]]) continue;
      x->present[c] = 1;
      for (size_t k = 0; k < n.cols.size(); k++)
        if (n.cols[k].dim < 0 && n.cols[k].used) x->val[k][c] = k < nl ? l.val[k][lm[c]] : r.val[k - nl][rm[c]];
    }
    return ApplyMasks(n.masks, x);
  }

  // The comparisons `masks` over x's cells: a cell where one fails is not
  // there (its values stay, unread).
  bool ApplyMasks(const std::vector<Mask> &masks, Tensor *x) {
    for (const Mask &m : masks) {
      std::vector<size_t> a, b;
      bool constant = m.cb < 0;
      if (!Map(*x, {m.da}, &a) || (!constant && !Map(*x, {m.db}, &b))) return false;
      const Dim &da = D(m.da), *db = constant ? nullptr : &D(m.db);
      // the comparison's outcome by the sign of Float8Cmp (-1, 0, 1)
      const bool lt = m.op == "<" || m.op == "<=" || m.op == "<>",
                 eq = m.op == "=" || m.op == "<=" || m.op == ">=", gt = m.op == ">" || m.op == ">=" || m.op == "<>";
      for (size_t c = 0; c < x->cells; c++) {
        if (!x->present[c]) continue;
        // (keys below 2^53 and the constant as doubles: exact)
        // (a float8 value compared as float8 compares, NaN the greatest)
        double u = static_cast<double>(da.Value(a[c]));
        double v = m.vcol >= 0 ? x->val[static_cast<size_t>(m.vcol)][c]
                   : constant  ? m.constant
                               : static_cast<double>(db->Value(b[c]));
        int cmp = Float8Cmp(u, v);
        bool ok = cmp < 0 ? lt : cmp == 0 ? eq : gt;
        if (!ok) x->present[c] = 0;
      }
    }
    return true;
  }

  bool FilterForward(const Node &n, Tensor *x) {
    const Tensor &in = t[n.inputs[0]];
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    x->present = in.present;
    x->val = in.val;
    return ApplyMasks(n.masks, x);
  }

  // e's values over the present cells of `in` (0 elsewhere), its
  // subexpressions' arrays appended to vals in post-order (subs alike):
  // the place of e's own.
  size_t Eval(const Expr &e, const Tensor &in, std::vector<std::vector<double>> *vals, std::vector<Sub> *subs,
              Fault *f) {
    Sub s{&e, {}};
    std::vector<double> v;
    switch (e.kind) {
      case ExprKind::Col:
        v = in.val[e.col];
        break;
      case ExprKind::Const: {
        double k = 0.0;
        ConstValue(e, &k);
        v.assign(in.cells, k);
        break;
      }
      case ExprKind::Call: {
        const ScalarRule *r = FindScalarRule(e.text);
        for (const ExprP &a : e.args) s.args.push_back(Eval(*a, in, vals, subs, f));
        size_t na = s.args.size();
        double a[8];
        bool nulls[8] = {false};
        if (na > 8) return Refuse("a call of more than 8 arguments"), vals->size();
        v.assign(in.cells, 0.0);
        Args args{a, nulls, na};
        for (size_t c = 0; c < in.cells; c++) {
          if (!in.present[c]) continue;
          for (size_t i = 0; i < na; i++) a[i] = (*vals)[s.args[i]][c];
          bool is_null = false;
          v[c] = r->value(args, &is_null, f);
        }
        break;
      }
      default:
        break;
    }
    Take(8 * in.cells);
    vals->push_back(std::move(v));
    subs->push_back(std::move(s));
    return vals->size() - 1;
  }

  bool ProjectForward(int node, const Node &n, Tensor *x) {
    const Tensor &in = t[n.inputs[0]];
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    x->present = in.present;
    for (size_t k = 0; k < n.rel->exprs.size(); k++) {
      if (n.cols[k].dim >= 0 || !n.cols[k].used) continue;
      Fault f = Fault::kNone;
      Kept e;
      e.at = Eval(*n.rel->exprs[k], in, &e.vals, &e.subs, &f);
      if (f != Fault::kNone) return Fail(f);
      if (!out.why.empty()) return false;
      x->val[k] = e.vals[e.at];
      if (n.cols[k].active)
        kept[{node, k}] = std::move(e);
      else
        bytes -= 8 * in.cells * e.vals.size();
    }
    return true;
  }

  // The aggregates as PostgreSQL's float8 ones compute them, each group's
  // cells in the cells' order: sum (float8pl, from the first value), avg
  // (float8_accum's Youngs-Cramer N, Sx and Sxx, with its overflow check,
  // then Sx / N), max and min (float8larger, float8smaller: ties take the
  // later value). avg keeps N per group for the backward (counts).
  bool AggregateForward(int node, const Node &n, Tensor *x) {
    const Tensor &in = t[n.inputs[0]];
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    const Rel &r = *n.rel;
    std::vector<size_t> g;
    if (!Map(in, Preimage(n, in), &g)) return false;
    if (r.nkeys == 0) x->present[0] = 1;  // (no GROUP BY: one row, if no input row)
    std::vector<uint8_t> has(x->cells, 0);
    for (size_t a = 0; a < r.aggs.size(); a++) {
      if (!n.cols[r.nkeys + a].used) continue;  // (an aggregate no reader reads: not computed)
      // (the function's name compared once, not per cell)
      const bool avg = r.aggs[a].fn == "avg", sum = r.aggs[a].fn == "sum", max = r.aggs[a].fn == "max";
      std::vector<double> &s = x->val[r.nkeys + a];
      s.assign(x->cells, 0.0);
      std::fill(has.begin(), has.end(), 0);
      std::vector<double> count, sxx;
      if (avg) {
        if (!Take(16 * x->cells)) return false;
        count.assign(x->cells, 0.0);
        sxx.assign(x->cells, 0.0);
      }
      const std::vector<double> &arg = in.val[r.aggs[a].arg];
      for (size_t c = 0; c < in.cells; c++) {
        if (!in.present[c]) continue;
        size_t o = g[c];
        double v = arg[c];
        x->present[o] = 1;
        if (avg) {
          double n0 = count[o], sx0 = s[o];
          count[o] = n0 + 1.0;
          s[o] = sx0 + v;
          if (n0 > 0.0) {
            double tmp = v * count[o] - s[o];
            sxx[o] += tmp * tmp / (count[o] * n0);
            if (std::isinf(s[o]) || std::isinf(sxx[o])) {
              if (!std::isinf(sx0) && !std::isinf(v)) return Fail(Fault::kOverflow);
              sxx[o] = NAN;
            }
          } else if (std::isnan(v) || std::isinf(v)) {
            sxx[o] = NAN;
          }
          has[o] = 1;
          continue;
        }
        if (!has[o]) {
          s[o] = v;  // (the first value: a sum of -0.0s stays -0.0)
          has[o] = 1;
          continue;
        }
        if (sum) {
          double t2 = s[o] + v;
          if (std::isinf(t2) && !std::isinf(s[o]) && !std::isinf(v)) return Fail(Fault::kOverflow);
          s[o] = t2;
        } else if (max) {
          s[o] = Float8Cmp(s[o], v) > 0 ? s[o] : v;
        } else {
          s[o] = Float8Cmp(s[o], v) < 0 ? s[o] : v;
        }
      }
      for (size_t o = 0; o < x->cells; o++)
        if (x->present[o] && !has[o]) return Refuse("an aggregate of no rows (NULL)");
      if (avg) {
        for (size_t o = 0; o < x->cells; o++)
          if (has[o]) s[o] /= count[o];
        counts[{node, a}] = std::move(count);
      }
    }
    return true;
  }

  // --- products (Product) --------------------------------------------------

  size_t Extent(const std::vector<int> &dims) const {
    size_t n = 1;
    for (int d : dims) n *= D(d).n;
    return n;
  }
  // Column `col` of node's tensor (or its adjoints) as a matrix of rdims x
  // cdims (the tensor's dims, each once).
  bool Gather(int node, size_t col, const std::vector<int> &rdims, const std::vector<int> &cdims, bool adjoint,
              Matrix *m) {
    const Tensor &x = t[node];
    size_t rows = Extent(rdims), cols = Extent(cdims);
    if (cols && rows > limit / 10 / cols) return Refuse("arrays past the memory limit");
    if (!Take(rows * cols * 10)) return false;  // (the caller gives it back: Give)
    std::vector<size_t> at;
    if (!Map(x, Cat(rdims, cdims), &at)) return false;
    *m = Matrix(static_cast<int64_t>(rows), static_cast<int64_t>(cols));
    const std::vector<double> &v = adjoint ? adj[node][col] : x.val[col];
    for (size_t c = 0; c < x.cells; c++)
      if (x.present[c]) {
        m->val[at[c]] = v.empty() ? 0.0 : v[c];
        m->present[at[c]] = 1;
      }
    return true;
  }
  // A matrix of Gather's, done with: its bytes no longer counted (with the
  // product's out, counted alike).
  void Give(const Matrix &m) { bytes -= std::min(bytes, m.val.size() * 10); }
  bool Failed(FloatError e) {
    if (e == FloatError::kNone) return false;
    Fail(e == FloatError::kOverflow ? Fault::kOverflow : Fault::kUnderflow);
    return true;
  }

  bool ContractForward(const Node &n, Tensor *x) {
    const Product &c = n.product;
    if (!Shape(x, n.dims, n.cols.size(), Width(n))) return false;
    Matrix a, b;
    if (!Gather(c.left, c.lcol, c.rows, c.k, false, &a) || !Gather(c.right, c.rcol, c.kr, c.cols, false, &b))
      return false;
    if (!Take(Extent(c.rows_a) * Extent(c.cols_a) * 10)) return false;
    ddx::dense::Contraction z = Contract(a, b);
    out.products++;
    Give(a);
    Give(b);
    if (Failed(z.error)) return false;
    std::vector<size_t> at;
    if (!Map(*x, Cat(c.rows_a, c.cols_a), &at)) return false;
    size_t g = static_cast<size_t>(n.rel->nkeys);
    x->val[g].assign(x->cells, 0.0);
    for (size_t cell = 0; cell < x->cells; cell++) {
      if (!z.out.present[at[cell]]) continue;
      if (z.out.null[at[cell]]) return Refuse("a sum of no rows (NULL)");
      x->present[cell] = 1;
      x->val[g][cell] = z.out.val[at[cell]];
    }
    Give(z.out);
    if (!ApplyMasks(c.masks, x)) return false;
    if (n.rel->nkeys == 0 && !x->present[0]) return Refuse("a sum of no rows (NULL)");
    return true;
  }

  // The adjoints of the product's two columns: dZ times the other side,
  // transposed, at the cells each side has (a cell with no pair: 0).
  bool ContractBackward(const Node &n, int k) {
    const Product &c = n.product;
    size_t g = static_cast<size_t>(n.rel->nkeys);
    if (adj[k][g].empty() || !n.cols[g].active) return true;
    Matrix dz;
    if (!Gather(k, g, c.rows_a, c.cols_a, true, &dz)) return false;
    for (int s = 0; s < 2; s++) {
      int node = s == 0 ? c.left : c.right, other = s == 0 ? c.right : c.left;
      size_t col = static_cast<size_t>(s == 0 ? c.lcol : c.rcol), ocol = static_cast<size_t>(s == 0 ? c.rcol : c.lcol);
      if (!p.nodes[node].cols[col].active) continue;
      Matrix o;
      ddx::dense::Contraction r;
      if (s == 0) {  // dA (rows x k) = dZ (rows x cols) . B^T (cols x k)
        if (!Gather(other, ocol, c.cols, c.kr, false, &o)) return false;
        r = Contract(dz, o);
      } else {  // dB (k x cols) = A^T (k x rows) . dZ (rows x cols)
        if (!Gather(other, ocol, c.k, c.rows, false, &o)) return false;
        r = Contract(o, dz);
      }
      Give(o);
      if (Failed(r.error) || !Take(r.out.val.size() * 10)) return false;
      const Tensor &x = t[node];
      std::vector<size_t> at;
      if (!Map(x, s == 0 ? Cat(c.rows, c.k) : Cat(c.kr, c.cols), &at)) return false;
      std::vector<double> d(x.cells, 0.0);
      for (size_t cell = 0; cell < x.cells; cell++)
        if (x.present[cell] && r.out.present[at[cell]] && !r.out.null[at[cell]]) d[cell] = r.out.val[at[cell]];
      Give(r.out);
      if (!AddAll(node, col, d, nullptr)) return false;
    }
    Give(dz);
    return true;
  }

  // adj[node][col] += d (at map[c] for each c of d's cells where a map is
  // given), with float8_pl's check.
  bool AddAll(int node, size_t col, const std::vector<double> &d, const std::vector<size_t> *map) {
    std::vector<double> &a = adj[node][col];
    if (a.empty()) {
      if (!Take(8 * t[node].cells)) return false;
      a.assign(t[node].cells, 0.0);
    }
    for (size_t c = 0; c < d.size(); c++) {
      size_t o = map ? (*map)[c] : c;
      double s = a[o] + d[c];
      if (std::isinf(s) && !std::isinf(a[o]) && !std::isinf(d[c])) return Fail(Fault::kOverflow);
      a[o] = s;
    }
    return true;
  }

  // The chain rule through subexpression `at` (subs, vals: Eval's) with
  // adjoints d over the cells of `in` (node `node`).
  bool Backprop(const std::vector<Sub> &subs, const std::vector<std::vector<double>> &vals, size_t at,
                const std::vector<double> &d, int node, const Tensor &in, Fault *f) {
    const Expr &e = *subs[at].e;
    if (e.kind == ExprKind::Col) {
      std::vector<double> masked(d);
      for (size_t c = 0; c < in.cells; c++)
        if (!in.present[c]) masked[c] = 0.0;
      return AddAll(node, static_cast<size_t>(e.col), masked, nullptr);
    }
    if (e.kind != ExprKind::Call) return true;
    const ScalarRule *r = FindScalarRule(e.text);
    if (!r->partial) return true;
    const std::vector<size_t> &ax = subs[at].args;
    size_t na = ax.size();
    double a[8];
    bool nulls[8] = {false};
    Args args{a, nulls, na};
    for (size_t i = na; i-- > 0;) {
      if (!ReadsActive(*e.args[i], p.nodes[node].cols)) continue;
      int one = Unit(e.text, i);
      std::vector<double> next(in.cells, 0.0);
      for (size_t c = 0; c < in.cells; c++) {
        if (!in.present[c]) continue;
        if (one == 1) {
          next[c] = d[c];
          continue;
        }
        if (one == -1) {
          next[c] = -d[c];
          continue;
        }
        for (size_t j = 0; j < na; j++) a[j] = vals[ax[j]][c];
        double pv = r->partial(i, args, vals[at][c], f);
        double v = d[c] * pv;
        if (std::isinf(v) && !std::isinf(d[c]) && !std::isinf(pv) && *f == Fault::kNone) *f = Fault::kOverflow;
        if (v == 0.0 && d[c] != 0.0 && pv != 0.0 && *f == Fault::kNone) *f = Fault::kUnderflow;
        next[c] = v;
      }
      if (*f != Fault::kNone) return Fail(*f);
      if (!Backprop(subs, vals, ax[i], next, node, in, f)) return false;
    }
    return true;
  }
  // Rules whose partial is the literal 1 or -1 (rules.cpp): the SQL program
  // passes the adjoint itself, or its negation, with no product.
  static int Unit(const std::string &rule, size_t i) {
    if (rule == "add" || rule == "pos" || rule == "cast") return 1;
    if (rule == "sub") return i == 0 ? 1 : -1;
    if (rule == "neg") return -1;
    return 0;
  }

  bool Backward(int k) {
    const Node &n = p.nodes[k];
    const Rel &r = *n.rel;
    const Tensor &x = t[k];
    if (n.fused) return true;
    if (n.product.join >= 0) return ContractBackward(n, k);
    switch (r.kind) {
      case RelKind::Scan:
        return true;
      case RelKind::Join: {
        int li = n.inputs[0], ri = n.inputs[1];
        size_t nl = t[li].val.size();
        for (size_t col = 0; col < n.cols.size(); col++) {
          if (adj[k][col].empty() || !n.cols[col].active) continue;
          bool left = col < nl;
          int to = left ? li : ri;
          std::vector<size_t> m;
          if (!Map(x, n.from[left ? 0 : 1], &m)) return false;
          std::vector<double> d(adj[k][col]);
          for (size_t c = 0; c < x.cells; c++)
            if (!x.present[c]) d[c] = 0.0;
          if (!AddAll(to, left ? col : col - nl, d, &m)) return false;
        }
        return true;
      }
      case RelKind::Filter: {
        for (size_t col = 0; col < n.cols.size(); col++) {
          if (adj[k][col].empty() || !n.cols[col].active) continue;
          std::vector<double> d(adj[k][col]);
          for (size_t c = 0; c < x.cells; c++)
            if (!x.present[c]) d[c] = 0.0;
          if (!AddAll(n.inputs[0], col, d, nullptr)) return false;
        }
        return true;
      }
      case RelKind::Project: {
        int in = n.inputs[0];
        for (size_t col = 0; col < n.cols.size(); col++) {
          if (adj[k][col].empty() || !n.cols[col].active) continue;
          Fault f = Fault::kNone;
          const Kept &e = kept.at({k, col});
          if (!Backprop(e.subs, e.vals, e.at, adj[k][col], in, t[in], &f)) return false;
        }
        return true;
      }
      case RelKind::Aggregate: {
        int in = n.inputs[0];
        const Tensor &y = t[in];
        std::vector<size_t> g;
        if (!Map(y, Preimage(n, y), &g)) return false;
        for (size_t a = 0; a < r.aggs.size(); a++) {
          const std::vector<double> &d = adj[k][r.nkeys + a];
          if (d.empty() || !n.cols[r.nkeys + a].active) continue;
          const std::string &fn = r.aggs[a].fn;
          const std::vector<double> &arg = y.val[r.aggs[a].arg], &value = x.val[r.nkeys + a];
          // the SQL program's adjoints: sum d; avg d / n; max and min
          // d / (the group's cells equal to it), its ties sharing it
          std::vector<double> per(x.cells, 0.0), spread(y.cells, 0.0);
          if (fn == "max" || fn == "min") {
            for (size_t c = 0; c < y.cells; c++)
              if (y.present[c] && Float8Cmp(arg[c], value[g[c]]) == 0) per[g[c]] += 1.0;
          } else if (fn == "avg") {
            per = counts.at({k, a});
          }
          const bool sum = fn == "sum", avg = fn == "avg";  // (compared once, not per cell)
          Fault f = Fault::kNone;
          for (size_t c = 0; c < y.cells; c++) {
            if (!y.present[c]) continue;
            size_t o = g[c];
            if (sum)
              spread[c] = d[o];
            else if (avg || Float8Cmp(arg[c], value[o]) == 0)
              spread[c] = Float8Div(d[o], per[o], &f);
          }
          if (f != Fault::kNone) return Fail(f);
          if (!AddAll(in, static_cast<size_t>(r.aggs[a].arg), spread, nullptr)) return false;
        }
        return true;
      }
      default:
        return Refuse("no backward");
    }
  }
};

}  // namespace

Outcome Run(const Program &p, const std::vector<const Rows *> &rows, size_t limit, bool (*interrupted)()) {
  Runner run{p, limit, {}, {}, {}, {}, {}, {}, 0};
  Outcome &out = run.out;
  // (a fault too: the dense program evaluates every cell, the SQL program
  // only the rows its plan reaches, an inlined projection's after the joins
  // above it; whether PostgreSQL raises is the SQL program's to find)
  auto stop = [&out]() {
    out.done = false;
    if (out.why.empty() && out.fault != Fault::kNone) out.why = std::string("a float error: ") + Message(out.fault);
    return out;
  };
  if (rows.size() != p.scans.size()) {
    out.why = "rows for another number of scans";
    return out;
  }
  if (!run.Positions(rows)) return out;
  run.t.resize(p.nodes.size());
  run.adj.resize(p.nodes.size());
  auto asked = [&out, interrupted]() {
    if (!interrupted || !interrupted()) return false;
    out.interrupted = true;
    out.why = "interrupted";
    return true;
  };
  for (size_t k = 0; k < p.nodes.size(); k++) {
    if (asked()) return stop();
    const Node &n = p.nodes[k];
    run.adj[k].resize(n.cols.size());
    bool ok = true;
    switch (n.rel->kind) {
      case RelKind::Scan: {
        size_t s = static_cast<size_t>(std::find(p.scans.begin(), p.scans.end(), n.rel) - p.scans.begin());
        ok = run.ScanForward(n, *rows[s], &run.t[k]);
        break;
      }
      case RelKind::Join:
        ok = n.fused || run.JoinForward(n, &run.t[k]);
        break;
      case RelKind::Project:
        ok = n.fused || run.ProjectForward(static_cast<int>(k), n, &run.t[k]);
        break;
      case RelKind::Filter:
        ok = run.FilterForward(n, &run.t[k]);
        break;
      case RelKind::Aggregate:
        ok = n.product.join >= 0 ? run.ContractForward(n, &run.t[k])
                                 : run.AggregateForward(static_cast<int>(k), n, &run.t[k]);
        break;
      default:
        ok = run.Refuse("a relation of another kind");
        break;
    }
    if (!ok) return stop();
  }
  const Tensor &root = run.t.back();
  if (!root.present[0]) {
    out.why = "a loss of no row";
    return out;
  }
  out.loss = root.val[0][0];
  // backwards, from the loss's adjoint 1
  int last = static_cast<int>(p.nodes.size()) - 1;
  if (!run.AddAll(last, 0, std::vector<double>(1, 1.0), nullptr)) return stop();
  for (int k = last; k >= 0; k--)
    if (asked() || !run.Backward(k)) return stop();
  // each scan's parameter columns, read at each row's cell
  for (size_t s = 0; s < p.scans.size(); s++) {
    int k = static_cast<int>(&run.ScanNode(s) - p.nodes.data());
    const Node &n = p.nodes[k];
    for (size_t c = 0; c < n.cols.size(); c++) {
      if (c >= n.rel->param.size() || n.rel->param[c] < 0) continue;
      ColumnGradient g{n.rel, static_cast<int>(c), std::vector<double>(rows[s]->n, 0.0)};
      if (!run.adj[k][c].empty())
        for (size_t i = 0; i < rows[s]->n; i++) {
          size_t at;
          if (run.Cell(n, *rows[s], i, run.t[k], &at)) g.val[i] = run.adj[k][c][at];
        }
      out.grads.push_back(std::move(g));
    }
  }
  out.done = true;
  return out;
}

}  // namespace ddx::dense
