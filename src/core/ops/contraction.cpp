// The contraction transpose (DESIGN.md): an aggregate's sum over a join,
// differentiated for one side by joining the other side with the
// cotangents first and summing by what the side is compared with.
#include "contraction.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"

namespace ddx::core {
namespace {

// Whether condition c of aggregate r's region reads only group keys (its
// columns are keys, of types whose equality is identity): then c has one
// value per group, true for every group there is (a group exists only if
// some row passed c), and a join with the cotangent, whose rows are the
// groups, need not test it again where every column it reads is bound to
// the cotangent's keys. Attention's k.t <= q.t in the two transposed
// passes of q·k: 526k tests each, saved in each pass (measured:
// bench/RESULTS.md, 'Figures from code comments').
bool HoldsPerGroup(const Rel *r, const Region &reg, const ExprP &c) {
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

// L's adjoint from the other leaves O joined with the cotangents (see
// Transposed), built in three passes over the region (its group keys, its
// conditions, the terms of its sums), each of which may find that the rule
// does not apply.
class LeafTranspose {
 public:
  LeafTranspose(const Pass &p, const Rel *r, const Region &reg, std::set<std::pair<int, int>> used, int L,
                std::set<int> dropped)
      : p_(p), r_(r), reg_(reg), L_(L), dropped_(std::move(dropped)), ocols_(std::move(used)), lets_(p, "r", Res()) {}

  // Whether the contribution's rows also have L's saved columns (Carries,
  // SavedRowCols).
  bool Carried() const { return carried_; }
  // The contribution's SQL as head + "(" + pre + ") t " + tail, pre's
  // grouping columns `by` (Contrib).
  const std::string &Head() const { return head_; }
  const std::string &Pre() const { return pre_; }
  const std::string &Tail() const { return tail_; }
  const std::vector<std::string> &By() const { return by_; }

  // The contribution's SQL, the backward steps it reads (reads) and the
  // columns of L it has, or "". Not where L's terms read a value of L,
  // which O joined with the cotangents does not have: decided on the terms'
  // expressions (AdjointReads) and the values computed for them
  // (Lets::Reads), before anything is assembled.
  std::string Sql(Refs &reads, std::set<int> &cols) {
    if (!Keys() || !Conditions() || !Sums()) return "";
    if (reads_l_ || lets_.Reads(L_)) return "";
    return Assemble(reads, cols);
  }

 private:
  // What a value of L prints as over O's rows: only in SQL that Sql then
  // refuses (or drops unused), and no SQL at all were it ever kept.
  static constexpr const char *kNoValue = "\x01";

  Resolver Inside() const { return p_.Inside(reg_); }
  Resolver Res() const {
    const Region *reg = &reg_;
    int L = L_;
    return [reg, L](int side, int col) { return side == L ? std::string(kNoValue) : "r." + FlatName(*reg, side, col); };
  }
  // Whether e reads L (l) and other leaves (o).
  void Reads(const ExprP &e, bool &l, bool &o) const {
    std::set<int> sides = LeafSides(e);
    l = sides.count(L_) > 0;
    o = sides.size() > (l ? 1u : 0u);
  }

  // Keys: of O (the cotangent's join) or of L (grouped, matched with L).
  bool Keys() {
    auto eqs = Equalities(reg_.conds);
    const std::vector<bool> &nn = p_.notnull.at(r_->inputs[0].get());
    Resolver inside = Inside();
    keyed_ = r_->nkeys == 0;
    for (int k = 0; k < r_->nkeys; k++) {
      ExprP e = reg_.item.cols[k];
      // (a key of a leaf left out, read by nothing else: KeyLeaves)
      std::set<int> ls = LeafSides(e);
      bool left_out = !ls.empty();
      for (int x : ls) left_out = left_out && dropped_.count(x);
      if (left_out) continue;
      bool l, o;
      Reads(e, l, o);
      if (l && o) return false;
      if (l && e->kind == ExprKind::Col)
        for (const auto &[a, b] : eqs) {
          bool bl, bo;
          Reads(b, bl, bo);
          if (a->kind == ExprKind::Col && a->side == e->side && a->col == e->col && !bl && bo) {
            e = b;
            l = false;
            break;
          }
        }
      std::string ks = std::to_string(k), ak = "a." + C(k);
      if (!l) {
        keyed_ = true;
        for (const auto &c : p_.KeyCols(r_, k, p_.Sql(e, inside), "k" + ks)) sel_.push_back(c);
        on_.push_back(p_.KeyEq(r_, k, "r.k" + ks));
      } else {
        qsel_.push_back(ak + " AS g" + ks);
        gcols_.push_back("q.g" + ks);
        std::string lk = p_.Sql(e, inside), tk = "t.g" + ks;
        fon_.push_back(nn[k] ? lk + " = " + tk : NullSafeEq(lk, tk, r_->cols[k].sql));
        if (e->kind == ExprKind::Col && IdentityEq(e->type)) lkeys_.emplace(e->col, ak);
      }
    }
    return true;
  }

  // e with L's group-key columns replaced by the cotangent's.
  ExprP ByKeys(const ExprP &e) const {
    if (e->kind == ExprKind::Col && e->side == L_ && lkeys_.count(e->col)) {
      auto c = std::make_shared<Expr>(*e);
      c->kind = ExprKind::Const;
      c->text = lkeys_.at(e->col);
      return c;
    }
    if (e->args.empty()) return e;
    auto c = std::make_shared<Expr>(*e);
    for (auto &a : c->args) a = ByKeys(a);
    return c;
  }

  // Conditions: on O alone (inside); reading L only through its group
  // keys (with the cotangent's columns instead, when joining the
  // cotangents: attention's k.t <= q.t is then no link column of O, and
  // the sum stays a contraction); or reading L otherwise (applied when
  // joining L, to one value per group of O's columns they read: sound
  // only where equal values are the same value — x.n::text = w.t tells
  // numeric 1.0 from 1.00 — and possible only for types with an
  // equality, not json).
  bool Conditions() {
    Resolver inside = Inside(), res = Res();
    std::vector<ExprP> links;
    std::set<std::pair<int, int>> linkcols, bound;
    std::map<int, std::vector<ExprP>> equated;  // a column of L -> the columns of O equated with it
    for (const auto &c : Conjuncts(reg_.conds)) {
      bool l, o;
      Reads(c, l, o);
      if (!l) {
        oconds_.push_back(p_.Sql(c, inside));
        continue;
      }
      ExprP ck = ByKeys(c);
      Reads(ck, l, o);
      if (!l && HoldsPerGroup(r_, reg_, c)) continue;  // (x.k = y.k, the link of L, is not: L reads x.k)
      if (!l) {
        CollectCols(ck, ocols_);
        cconds_.push_back(p_.Sql(ck, res));
        continue;
      }
      links.push_back(c);
      // (an equality of a value of L with a column of O binds that column)
      bool binds = false;
      for (const auto &[a, b] : Equalities({c}))
        if (LeafSides(a) == std::set<int>{L_} && b->kind == ExprKind::Col && b->side != L_ && b->col >= 0) {
          bound.insert({b->side, b->col}), binds = true;
          if (a->kind == ExprKind::Col && a->col >= 0) equated[a->col].push_back(b);
        }
      // (a condition on L alone, the GPT's a1.l = 1 of a layer's rows,
      // joins no row of L to more than one group)
      if (o) once_ = once_ && binds;
      std::set<std::pair<int, int>> cs;
      CollectCols(c, cs);
      for (const auto &x : cs) {
        if (x.first == L_) continue;
        if (x.second >= 0 && !IdentityEq(reg_.leaves[x.first - kLeafSide]->cols[x.second])) return false;
        linkcols.insert(x), ocols_.insert(x);
      }
    }
    if (!keyed_) return false;
    // Columns of O equated with one column of L are equal to each other in
    // every row that joins L (= of a type whose equality is identity is
    // transitive; a NULL joins nothing either way): said inside O, the
    // rows that cannot join are not formed. The GPT's attention scores
    // q·k with both biases: q's transpose crossed bq (16 rows) with k's
    // 1024 (16,384 rows, 1,024 kept after its GROUP BY), bq.h and k.h both
    // being q.h.
    for (const auto &[col, os] : equated) {
      const Type &lt = reg_.leaves[L_ - kLeafSide]->cols[col];
      if (!IdentityEq(lt)) continue;
      for (size_t i = 1; i < os.size(); i++) {
        const Type &t0 = reg_.leaves[os[0]->side - kLeafSide]->cols[os[0]->col];
        const Type &ti = reg_.leaves[os[i]->side - kLeafSide]->cols[os[i]->col];
        if (t0.sql == lt.sql && ti.sql == lt.sql && !(os[i]->side == os[0]->side && os[i]->col == os[0]->col))
          oconds_.push_back(p_.Sql(os[0], inside) + " OPERATOR(pg_catalog.=) " + p_.Sql(os[i], inside));
      }
    }
    for (const auto &x : linkcols) once_ = once_ && bound.count(x);
    for (const auto &[side, col] : ocols_)
      if (side != L_) sel_.push_back(inside(side, col) + " AS " + FlatName(reg_, side, col));
    if (sel_.empty()) sel_.push_back("1 AS one");
    for (const auto &[side, col] : linkcols) {
      qsel_.push_back(res(side, col) + " AS o" + FlatName(reg_, side, col));
      gcols_.push_back("q.o" + FlatName(reg_, side, col));
    }
    const Region &reg = reg_;
    int L = L_;
    Resolver fin = [&](int side, int col) { return side == L ? inside(side, col) : "t.o" + FlatName(reg, side, col); };
    for (const auto &c : links) fon_.push_back(p_.Sql(c, fin));
    return true;
  }

  // Terms: sum's and avg's adjoints with the NULL test split between O
  // (inside) and L (when joining L): a strict argument is NULL exactly when
  // a column it reads is.
  bool Sums() {
    Resolver inside = Inside(), res = Res();
    ActiveFn all = p_.LeafActivity(reg_);
    int L = L_;
    ActiveFn act = [&all, L](int side, int col) { return side == L && all(side, col); };
    for (int o : p_.bcols.at(r_)) {
      int k = o - r_->nkeys;
      const AggCall &ag = r_->aggs[k];
      const ExprP &arg = reg_.item.cols[ag.arg];
      CheckVolatile(arg);
      std::set<std::pair<int, int>> nc;
      if (!StrictIn(arg, nc)) return false;
      std::vector<std::string> onull, lnulls;
      for (const auto &[side, col] : nc)
        (side == L_ ? lnulls : onull).push_back((side == L_ ? inside(side, col) : res(side, col)) + " IS NULL");
      if (lnull_ && *lnull_ != Join(lnulls, " OR ")) return false;
      lnull_ = Join(lnulls, " OR ");
      std::string d = "a.b" + D(o);
      // (n = 0: every argument of the group is NULL, every row is cut by the NULL test)
      if (Counted(ag.fn)) d = "(" + d + " / NULLIF(a.n" + std::to_string(k) + ", 0))";
      // In a product of a factor over O and one over L, L's term has O's
      // factor as a factor: NULL (and summed as 0) exactly where the test
      // would cut it. The test then only costs (a CASE per joined row: the
      // matmul's 1.28M).
      bool factored = false;
      if (arg->kind == ExprKind::Call && arg->text == "mul")
        for (int i = 0; i < 2; i++) {
          std::set<int> li = LeafSides(arg->args[i]), lo = LeafSides(arg->args[1 - i]);
          factored = factored || (li == std::set<int>{L_} && !lo.empty() && !lo.count(L_));
        }
      Backprop(arg,
               onull.empty() || factored ? d : "(CASE WHEN " + Join(onull, " OR ") + " THEN NULL ELSE " + d + " END)",
               lets_, act, terms_);
      reads_l_ = reads_l_ || AdjointReads(arg, L_, act);
    }
    return true;
  }

  // O joined with the cotangents, summed by L's links and keys, then joined to L.
  std::string Assemble(Refs &reads, std::set<int> &cols) {
    Resolver inside = Inside();
    std::vector<std::string> tsel{inside(L_, -1) + " AS rid"};
    for (const auto &[key, t] : terms_) {
      if (key.first != L_) Internal("transposed contraction: gradient of another leaf");
      std::string dj = D(key.second);
      qsel_.push_back(SumTerms(t) + " AS " + dj);
      cols.insert(key.second);
      std::string v = lnull_->empty() ? "t." + dj : "CASE WHEN " + *lnull_ + " THEN 0::float8 ELSE t." + dj + " END";
      tsel.push_back((once_ ? v : "sum(" + v + ")") + " AS " + dj);
    }
    std::vector<std::string> qout = gcols_;
    for (int c : cols) qout.push_back("sum(q." + D(c) + ") AS " + D(c));
    std::vector<std::string> from;
    for (size_t k = 0; k < reg_.leaves.size(); k++) {
      int side = kLeafSide + static_cast<int>(k);
      if (side != L_ && !dropped_.count(side)) from.push_back(p_.LeafFrom(reg_.leaves[k], reg_.Alias(k)));
    }
    std::string src = lets_.Wrap("(SELECT " + Join(sel_, ", ") + " FROM " + Join(from, " CROSS JOIN ") +
                                 (oconds_.empty() ? "" : " WHERE " + Join(oconds_, " AND ")) + p_.Fence() + ")");
    std::vector<std::string> on = on_;
    on.insert(on.end(), cconds_.begin(), cconds_.end());
    std::string grp = p_.Groups(r_, reads);
    std::string source =
        " FROM " + src + (on.empty() ? " CROSS JOIN " + grp : " JOIN " + grp + " ON " + Join(on, " AND "));
    std::string pre = "SELECT " + Join(qout, ", ") + " FROM (SELECT " + Join(qsel_, ", ") + source + ") q" +
                      (gcols_.empty() ? "" : " GROUP BY " + Join(gcols_, ", "));
    // (a saved aggregate's columns, for its cotangent to carry: see Carries)
    const Rel *leaf = reg_.leaves[L_ - kLeafSide];
    std::vector<std::string> by{"1"};
    for (size_t j = 0; Carries(leaf) && j < leaf->cols.size(); j++) {
      tsel.push_back(inside(L_, static_cast<int>(j)) + " AS " + C(static_cast<int>(j)));
      by.push_back(std::to_string(tsel.size()));
    }
    carried_ = Carries(leaf);
    // (a saved region's columns, where each of its rows is here once: the
    // MLP's hidden layer tanh(hp.z + b1.val), whose reverse then joined its
    // 131k saved rows on rid again)
    if (!carried_ && once_) {
      std::vector<std::string> row = SavedRowCols(p_, leaf);
      for (const auto &name : row) tsel.push_back(reg_.Alias(L_ - kLeafSide) + "." + name + " AS " + name);
      carried_ = !row.empty();
    }
    head_ = "SELECT " + Join(tsel, ", ") + " FROM ";
    pre_ = pre;
    tail_ = (fon_.empty() ? "CROSS JOIN " : "JOIN ") + p_.LeafFrom(leaf, reg_.Alias(L_ - kLeafSide)) +
            (fon_.empty() ? "" : " ON " + Join(fon_, " AND ")) + (once_ ? "" : " GROUP BY " + Join(by, ", "));
    for (const auto &g : gcols_) by_.push_back(g.substr(2));  // (q.<name>)
    return head_ + "(" + pre_ + ") t " + tail_;
  }

  const Pass &p_;
  const Rel *r_;
  const Region &reg_;
  int L_;
  std::set<int> dropped_;                // leaves left out of O (KeyLeaves)
  std::set<std::pair<int, int>> ocols_;  // O's columns the sums and links read
  Lets lets_;
  // O's select list (sel), the cotangent's join (on, cconds), the joined
  // rows' select list (qsel) and grouping (gcols), L's join (fon)
  std::vector<std::string> sel_, on_, qsel_, gcols_, fon_, oconds_, cconds_;
  std::map<int, std::string> lkeys_;  // a column of L that is a group key: the cotangent's column
  bool keyed_ = false;
  // Whether each row of L joins one row of the sums: every column they are
  // grouped by is bound by an equality to a value of L (its group keys, and
  // links such as x.j = w.i, not attention's k.t <= q.t), and the sums'
  // groups are distinct, so L's rows need no summing by rid again (the MLP's
  // hidden layer: 131k rows hashed into 131k groups, spilling to disk).
  bool once_ = true;
  Terms terms_;
  std::optional<std::string> lnull_;  // L's NULL test, the same for every call
  bool reads_l_ = false;              // whether L's terms read a value of L (AdjointReads)
  bool carried_ = false;
  std::string head_, pre_, tail_;
  std::vector<std::string> by_;
};

// e with the columns of `to`'s keys replaced by its values.
ExprP Replaced(const ExprP &e, const std::map<std::pair<int, int>, ExprP> &to) {
  if (e->kind == ExprKind::Col) {
    auto it = to.find({e->side, e->col});
    return it == to.end() ? e : it->second;
  }
  if (e->args.empty()) return e;
  auto c = std::make_shared<Expr>(*e);
  for (auto &a : c->args) a = Replaced(a, to);
  return c;
}

// The region of aggregate r's transposes without the leaves that only tie
// its group keys together (their sides in `dropped`), or false where it has
// none. A leaf R is such a leaf where every column of it that the region
// reads (its conditions, group keys, the sums `used`: none of these) is a
// group key, either of a type whose equality is identity and equated (=)
// with a column of another leaf that is not left out ("linked"), or read
// by nothing but its key; and R is unique on its linked columns and those
// of the others that cannot be NULL (a table's unique index, a saved
// aggregate's group keys). Then each group has exactly one row of R, whose
// values are the group's keys: the cotangent, whose rows are the groups,
// says all R says. R's linked columns become the columns they equal (its
// equalities, X = X, go: a NULL never equals a group's key, which the
// cotangent's join tests), and its other keys are joined on nothing
// (LeafTranspose::Keys). Matrix factorization's pred(u, i) = sum_k U[u,k]
// V[i,k] over the ratings r (u, i, val): U's transpose joined r with V
// (313k rows at 20k ratings, k = 16) before joining the cotangent on (u, i,
// val); without r it is dp(u, i) ⋈ V(i, k) on i, a contraction for the
// node.
bool KeyLeaves(const Rel *r, const Region &reg, const std::set<std::pair<int, int>> &used, Region &out,
               std::set<int> &dropped) {
  out = reg;
  for (bool found = true; found;) {
    found = false;
    for (size_t k = 0; k < out.leaves.size() && !found; k++) {
      int s = kLeafSide + static_cast<int>(k);
      const Rel *leaf = out.leaves[k];
      if (dropped.count(s) || out.leaves.size() - dropped.size() <= 2) continue;
      std::set<std::pair<int, int>> read = used;
      for (const auto &c : out.conds) CollectCols(c, read);
      bool plain = true;
      for (int j = 0; j < r->nkeys; j++) {
        CollectCols(out.item.cols[j], read);
        plain = plain && !HasSublink(out.item.cols[j]) && !ContainsVolatile(out.item.cols[j]);
      }
      if (!plain) break;
      std::set<int> cols;
      for (const auto &x : read)
        if (x.first == s) cols.insert(x.second);
      if (cols.empty()) continue;
      std::set<std::pair<int, int>> in_conds;
      for (const auto &c : out.conds) CollectCols(c, in_conds);
      std::map<std::pair<int, int>, ExprP> to;
      auto eqs = Equalities(out.conds);
      std::set<int> pinned;  // the linked columns, and the others that cannot be NULL
      bool ok = true;
      for (int c : cols) {
        bool key = false;
        for (int j = 0; j < r->nkeys && !key; j++) {
          const ExprP &e = out.item.cols[j];
          key = e->kind == ExprKind::Col && e->side == s && e->col == c;
        }
        if (c < 0 || used.count({s, c}) || !key) {
          ok = false;
          break;
        }
        if (!in_conds.count({s, c})) {  // read by nothing but its key
          if (leaf->kind == RelKind::Aggregate || (c < static_cast<int>(leaf->notnull.size()) && leaf->notnull[c]))
            pinned.insert(c);
          continue;
        }
        for (const auto &[a, b] : eqs)
          if (a->kind == ExprKind::Col && a->side == s && a->col == c && b->kind == ExprKind::Col &&
              b->side >= kLeafSide && b->side != s && !dropped.count(b->side) && b->col >= 0 &&
              out.leaves[b->side - kLeafSide]->cols[b->col].sql == leaf->cols[c].sql) {
            to.emplace(std::make_pair(s, c), b);
            break;
          }
        ok = IdentityEq(leaf->cols[c]) && to.count({s, c}) > 0;
        if (!ok) break;
        pinned.insert(c);
      }
      if (!ok || to.empty()) continue;
      bool unique_key = false;
      for (const auto &u : UniqueKeys(leaf)) {
        bool in = !u.empty();
        for (int j : u) in = in && pinned.count(j);
        unique_key = unique_key || in;
      }
      if (!unique_key) continue;
      std::vector<ExprP> conds;
      for (const auto &c : Conjuncts(out.conds)) {
        ExprP e = Replaced(c, to);
        bool same = false;
        for (const auto &[a, b] : Equalities({e}))
          same =
              same || (a->kind == ExprKind::Col && b->kind == ExprKind::Col && a->side == b->side && a->col == b->col);
        if (!same) conds.push_back(e);
      }
      out.conds = conds;
      for (auto &e : out.item.cols) e = Replaced(e, to);
      dropped.insert(s);
      found = true;
    }
  }
  return !dropped.empty();
}

}  // namespace

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
bool Transposed(Pass &p, const Rel *r, const Region &reg) {
  const std::set<int> &bc = p.bcols.at(r);
  if (reg.outer || reg.leaves.size() < 2) return false;
  for (const auto &c : reg.conds)
    if (HasSublink(c)) return false;
  std::set<std::pair<int, int>> used;
  for (int o : bc) {
    if (o < r->nkeys) return false;
    const AggCall &ag = r->aggs[o - r->nkeys];
    if (FlowOf(ag.fn) != AggFlow::Linear || HasSublink(reg.item.cols[ag.arg])) return false;
    CollectCols(reg.item.cols[ag.arg], used);
  }
  ActiveFn act = p.LeafActivity(reg);
  std::set<int> active;
  for (const auto &[side, col] : used)
    if (act(side, col)) active.insert(side);
  // Each leaf that receives gradient, transposed on its own (one pass
  // over the others joined with the cotangents per leaf: faster for
  // attention's q·k backward than one pass over the region with GROUPING
  // SETS, whose inequality join paired 1M rows to keep 526k; measured:
  // bench/RESULTS.md, 'Figures from code comments'), or none.
  struct Out {
    std::string head, pre, tail;
    std::vector<std::string> by;
    Refs reads;
    std::set<int> cols;
    bool carried;
  };
  // (with the leaves that only tie the group keys together left out where
  // there are such, else, or where that does not apply, as the region is)
  Region keyed;
  std::set<int> dropped;
  bool without = KeyLeaves(r, reg, used, keyed, dropped);
  std::vector<Out> out;
  for (int pass = without ? 0 : 1; pass < 2 && out.size() < active.size(); pass++) {
    out.clear();
    for (int L : active) {
      Refs reads;
      std::set<int> cols;
      LeafTranspose t(p, r, pass == 0 ? keyed : reg, used, L, pass == 0 ? dropped : std::set<int>{});
      std::string sql = t.Sql(reads, cols);
      if (sql.empty()) break;
      out.push_back({t.Head(), t.Pre(), t.Tail(), t.By(), reads, cols, t.Carried()});
    }
  }
  if (out.empty() || out.size() < active.size()) return false;
  size_t i = 0;
  for (int L : active)
    p.ContributeTransposed(reg.leaves[L - kLeafSide], out[i].head, out[i].pre, out[i].tail, out[i].by, out[i].reads,
                           out[i].cols, out[i].carried),
        i++;
  return true;
}

}  // namespace ddx::core
