// Window frames: their SQL, their transpose (the reverse of a windowed sum),
// and the rows of a frame (see pass.h).
#include <string>
#include <vector>

#include "pass.h"

namespace ddx::core {

namespace {

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

}  // namespace

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

bool IsRank(const std::string &fn) { return FlowOf(fn) == AggFlow::Rank; }

// Whether a window's values depend on the order of rows its ORDER BY leaves
// tied (PostgreSQL leaves that order unspecified, so the forward and the
// backward could each see another one).
bool OrderSensitive(const Rel *w) {
  bool rows_frame = w->frame.mode == FrameMode::Rows && !(w->frame.start.kind == BoundKind::UnboundedPreceding &&
                                                          w->frame.end.kind == BoundKind::UnboundedFollowing);
  for (const auto &c : w->wins) {
    const AggRule *rule = FindAggRule(c.fn);
    if (rule && rule->order_sensitive) return true;
    if (!IsRank(c.fn) && rows_frame) return true;
  }
  return false;
}

// PARTITION BY ... ORDER BY ... of a Window over columns `prefix`c<j>; with
// `by`, ORDER BY that saved column instead (pos, grp).
std::string WindowSpec(const Rel *w, const std::string &prefix, const std::string &by) {
  std::vector<std::string> part, ord;
  for (int p : w->partition) part.push_back(prefix + C(p));
  if (!by.empty()) {
    ord.push_back(prefix + by);
  } else {
    for (const auto &k : w->order)
      ord.push_back(prefix + C(k.col) + (k.desc ? " DESC" : " ASC") + (k.nulls_first ? " NULLS FIRST" : " NULLS LAST"));
  }
  std::string s;
  if (!part.empty()) s += "PARTITION BY " + Join(part, ", ");
  if (!ord.empty()) s += std::string(s.empty() ? "" : " ") + "ORDER BY " + Join(ord, ", ");
  return s;
}

// Rows k of the partition of row j that lie in j's frame (aliases j, k of
// the Window's CTE), for min and max, whose backward pairs each output with
// the rows that attain it.
std::string InFrame(const Rel *w) {
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

}  // namespace ddx::core
