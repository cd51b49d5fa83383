// Window functions over the input's region: sum, avg, count, min, max over
// any frame, lag and lead, and ranks (as filters only). The reverse runs
// windows over the transposed frame (frame_sql.cpp's Transpose), lag's is
// lead, and min/max share an output's cotangent among the rows that attain
// it.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::vector<bool> WindowRanks(const Rel &r, const Inputs &in, const RankCheck &check) {
  std::vector<bool> rk(r.cols.size(), false);
  const auto &i0 = in(0);
  for (size_t i = 0; i < i0.size(); i++) rk[i] = i0[i];
  for (size_t k = 0; k < r.wins.size(); k++) {
    const WinCall &w = r.wins[k];
    if (((w.arg >= 0 && i0[w.arg]) || (w.dflt >= 0 && i0[w.dflt])) && FlowOf(w.fn) != AggFlow::None)
      check.refuse("in the window function " + w.fn + "()");
    rk[i0.size() + k] = IsRank(w.fn);
  }
  return rk;
}

std::vector<bool> WindowNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn(r.cols.size(), false);
  for (size_t i = 0; i < in(0).size(); i++) nn[i] = in(0)[i];
  return nn;
}

std::vector<bool> WindowActivity(const Rel &r, const Inputs &in) {
  std::vector<bool> act(r.cols.size(), false);
  const auto &i0 = in(0);
  size_t n = i0.size();
  for (size_t i = 0; i < n; i++) act[i] = i0[i];
  for (size_t k = 0; k < r.wins.size(); k++) {
    const WinCall &w = r.wins[k];
    bool a = (w.arg >= 0 && i0[w.arg]) || (w.dflt >= 0 && i0[w.dflt]);
    act[n + k] = a && PassesGradient(w.fn) && r.cols[n + k].differentiable;
  }
  return act;
}

// A window call over the input region's columns i.c<j>, in window w.
std::string WindowCall(const WinCall &w, const std::string &frame) {
  std::string arg = w.arg < 0 ? "*" : "i." + C(w.arg);
  AggFlow flow = FlowOf(w.fn);
  if (flow == AggFlow::Shifted)
    return w.fn + "(" + arg + ", " + w.offset + (w.dflt >= 0 ? ", i." + C(w.dflt) : "") + ") OVER w";
  if (flow == AggFlow::Rank) return w.fn + "() OVER w";
  return w.fn + "(" + arg + ") OVER (w " + frame + ")";
}

std::string WindowForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  // The input region's rows (leaf rids, the leaf columns its expressions
  // read, its columns), then the window calls over them, and for the
  // backward each row's position (pos) and peer group (grp) in its
  // partition, and (tie) whether its ORDER BY leaves it tied.
  const Region &reg = p.regions.at(r);
  Resolver res = [&](int side, int col) { return p.LeafCol(reg, side, col); };
  std::vector<std::string> inner;
  for (size_t k = 0; k < reg.leaves.size(); k++)
    inner.push_back(p.LeafCol(reg, kLeafSide + static_cast<int>(k), -1) + " AS l" + std::to_string(k));
  std::set<std::pair<int, int>> used;
  for (const auto &e : reg.item.cols) CollectCols(e, used);
  for (const auto &[side, col] : used)
    if (col >= 0) inner.push_back(p.LeafCol(reg, side, col) + " AS " + SavedCol(side, col));
  for (size_t k = 0; k < reg.item.cols.size(); k++) inner.push_back(p.Sql(reg.item.cols[k], res) + " AS " + C(k));
  int n = static_cast<int>(reg.item.cols.size());
  std::string frame = FrameSql(r->frame);
  std::vector<std::string> cols{"row_number() OVER () AS rid", "i.*"};
  for (size_t k = 0; k < r->wins.size(); k++) {
    const WinCall &w = r->wins[k];
    std::string arg = w.arg < 0 ? "*" : "i." + C(w.arg);
    cols.push_back(WindowCall(w, frame) + " AS " + C(n + static_cast<int>(k)));
    if (Counted(w.fn)) cols.push_back("count(" + arg + ") OVER (w " + frame + ") AS n" + std::to_string(k));
  }
  cols.push_back("row_number() OVER w AS pos");
  cols.push_back("dense_rank() OVER w AS grp");
  if (OrderSensitive(r)) cols.push_back("row_number() OVER w - rank() OVER w AS tie");
  sql = "SELECT " + Join(cols, ", ") + " FROM (SELECT " + Join(inner, ", ") + " FROM " + p.FromWhere(reg) +
        ") i WINDOW w AS (" + WindowSpec(r, "i.") + ")";
  return sql;
}

void WindowReverse(Pass &p, const Rel &rel, Steps &s) {
  const Rel *r = &rel;
  const std::set<int> &bc = p.bcols.at(r);
  std::string b = p.B(r);
  // Per input column, its adjoint: the pass-through cotangent plus, for
  // each call reading it, the transpose of the call (frame_sql.cpp's
  // Transpose for frames; lag's is lead). Then the chain rule through
  // the input region, as for a saved projection.
  const Region &reg = p.regions.at(r);
  int n = static_cast<int>(r->inputs[0]->cols.size());
  const auto &in_act = p.active.at(r->inputs[0].get());
  std::map<int, std::vector<std::string>> adj;
  std::string joins;
  Refs reads{b};  // q's join with the cotangent, and each attaining call's below
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
      AggFlow flow = FlowOf(w.fn);
      if (flow == AggFlow::Linear && !Counted(w.fn))
        adj[w.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE sum(COALESCE(" + d + ", 0::float8))" + over +
                             " END");
      else if (flow == AggFlow::Linear)
        adj[w.arg].push_back("CASE WHEN " + x + " IS NULL THEN NULL ELSE sum(COALESCE(" + d + " / NULLIF(f.n" + ks +
                             ", 0), 0::float8))" + over + " END");
      else if (flow == AggFlow::Shifted)  // lag's transpose is lead, lead's lag
        adj[w.arg].push_back(std::string(FindAggRule(w.fn)->mirror) + "(" + d + ", " + w.offset + ") OVER wp");
      else if (flow == AggFlow::Attained) {
        // Each output's cotangent, shared evenly by the rows of its
        // frame that attain it.
        std::string g = "g" + ks;
        joins +=
            " LEFT JOIN (SELECT t.rid, sum(t.bd / t.cnt) AS g FROM (SELECT k.rid, j.bd, count(*) OVER "
            "(PARTITION BY j.rid) AS cnt FROM (SELECT f.*, " +
            d + " AS bd FROM " + p.F(r) + " f JOIN " + b + " b ON b.rid = f.rid WHERE " + d + " IS NOT NULL AND f." +
            C(o) + " IS NOT NULL) j JOIN " + p.F(r) + " k ON k." + C(w.arg) + " = j." + C(o) + " AND " + InFrame(r) +
            ") t GROUP BY t.rid) " + g + " ON " + g + ".rid = f.rid";
        reads.push_back(b);
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
  std::string q = "SELECT " + Join(sel, ", ") + " FROM " + p.F(r) + " f LEFT JOIN " + b + " b ON b.rid = f.rid" +
                  joins + " WINDOW wt AS (" + wt + "), wp AS (" + WindowSpec(r, "f.", "pos") + ")";
  Resolver saved = [&](int side, int col) {
    return col < 0 ? "q.l" + std::to_string(side - kLeafSide) : "q." + SavedCol(side, col);
  };
  Terms terms;
  Lets lets(p, "q", saved);
  for (const auto &[o, t] : adj) {
    if (!in_act[o]) continue;
    CheckVolatile(reg.item.cols[o]);
    Backprop(reg.item.cols[o], "q.a" + std::to_string(o), lets, p.LeafActivity(reg), terms);
  }
  p.ContributeToLeaves(
      s, reg, " FROM " + lets.Wrap("(" + q + ")"), reads, terms, [](int k) { return "q.l" + std::to_string(k); },
      "m" + std::to_string(p.id.at(r)));
}

// Forward mode: the same frame over the tangents (of the rows whose
// argument is not NULL), lag and lead of the tangents; min and max average
// the tangents of the frame's rows that attain them (_ddx.max_tangent,
// src/pg/attained.cpp), as the reverse shares a cotangent among them.
std::string WindowTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  const Region &reg = p.regions.at(r);
  Resolver res = p.Inside(reg);
  const std::vector<bool> &in_act = p.active.at(r->inputs[0].get()), &act = p.active.at(r);
  int n = static_cast<int>(reg.item.cols.size());
  std::vector<std::string> inner;
  for (int k = 0; k < n; k++) inner.push_back(p.Sql(reg.item.cols[k], res) + " AS " + C(k));
  for (int k = 0; k < n; k++)
    if (in_act[k]) inner.push_back(p.TangentSql(reg, reg.item.cols[k]) + " AS t" + std::to_string(k));
  // the tangent of input column j: NULL where its value is
  auto tan = [&](int j) {
    return "CASE WHEN i." + C(j) + " IS NULL THEN NULL ELSE " + (in_act[j] ? "i.t" + std::to_string(j) : "0::float8") +
           " END";
  };
  std::string frame = FrameSql(r->frame);
  std::vector<std::string> cols{kTangentRid}, tans;
  for (int k = 0; k < n; k++) {
    cols.push_back("i." + C(k));
    if (in_act[k]) cols.push_back("i.t" + std::to_string(k));
  }
  for (size_t k = 0; k < r->wins.size(); k++) {
    const WinCall &w = r->wins[k];
    std::string o = std::to_string(n + static_cast<int>(k));
    AggFlow flow = FlowOf(w.fn);
    cols.push_back(WindowCall(w, frame) + " AS c" + o);
    if (!act[n + k]) continue;
    if (flow == AggFlow::Linear)
      tans.push_back(w.fn + "(" + tan(w.arg) + ") OVER (w " + frame + ") AS t" + o);
    else if (flow == AggFlow::Shifted)
      tans.push_back(w.fn + "(" + (w.arg >= 0 ? tan(w.arg) : std::string("0::float8")) + ", " + w.offset +
                     (w.dflt >= 0 ? ", " + tan(w.dflt) : "") + ") OVER w AS t" + o);
    else if (flow == AggFlow::Attained)  // the tangents of the frame's rows that attain it, averaged
      tans.push_back("_ddx." + w.fn + "_tangent(i." + C(w.arg) + ", " + tan(w.arg) + ") OVER (w " + frame + ") AS t" +
                     o);
    else
      Internal("window call " + w.fn + " carries a tangent");
  }
  cols.insert(cols.end(), tans.begin(), tans.end());
  return "SELECT " + Join(cols, ", ") + " FROM (SELECT " + Join(inner, ", ") + " FROM " + p.FromWhere(reg) +
         ") i WINDOW w AS (" + WindowSpec(r, "i.") + ")";
}

}  // namespace

extern const OpRule kWindowOp;
const OpRule kWindowOp{
    "window", WindowRanks, WindowNotNull, WindowActivity, WindowForward, WindowReverse, RegionOf::Input, WindowTangent,
};

}  // namespace ddx::core
