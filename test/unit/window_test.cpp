// Windows: transposed frames, lag and lead, ranks as filters.
#include <gtest/gtest.h>

#include <string>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// w = SELECT f, val, <call> OVER (ORDER BY f <frame>) FROM w
RelP WindowOver(WinCall call, Frame frame, Type out = kF8) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  auto win = std::make_shared<Rel>();
  win->kind = RelKind::Window;
  win->inputs = {Project(w, {Col(0, kI4), Col(1, kF8)})};
  win->cols = {kI4, kF8, out};
  win->order = {SortKey{0, false, false}};
  win->frame = frame;
  win->wins = {call};
  return win;
}

Frame Rows(BoundKind s, std::string so, BoundKind e, std::string eo) {
  Frame f;
  f.mode = FrameMode::Rows;
  f.start = {s, so};
  f.end = {e, eo};
  return f;
}

// The backward of a sliding sum is a sliding sum of the cotangents over the
// mirrored frame: [j-2, j+1] forward, [k-1, k+2] backward.
TEST(Program, WindowSumRunsTheTransposedFrame) {
  RelP win = WindowOver({"sum", 1, -1, "1"}, Rows(BoundKind::Preceding, "2", BoundKind::Following, "1"));
  RelP loss = SumOfSquares(win, 2);
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("OVER (w ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("OVER (wt ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING)"), std::string::npos) << prog.sql;
  // a ROWS frame depends on the order of ties: the program counts them
  EXPECT_NE(prog.sql.find("-3, count(*)::float8, NULL::text FROM"), std::string::npos);
}

// lag's transpose is lead by the same offset; its default gets the cotangent
// of the rows without a predecessor.
TEST(Program, LagIsTransposedToLead) {
  RelP win = WindowOver({"lag", 1, 1, "2"}, Frame{});
  RelP loss = Aggregate(Project(win, {Col(2, kF8)}), 0, {{"sum", 0}}, {kF8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("lead(b.d2, 2) OVER wp"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("lag(true, 2, false) OVER wp"), std::string::npos) << prog.sql;
}

TEST(Program, RankAsAValueIsRefusedAndAsAFilterAccepted) {
  const Type kI8{"pg_catalog.int8", false};
  RelP win = WindowOver({"row_number", -1, -1, "1"}, Frame{}, kI8);
  RelP value =
      Aggregate(Project(win, {Call("mul", {Col(1, kF8), Call("cast", {Col(2, kI8)})})}), 0, {{"sum", 0}}, {kF8});
  try {
    Build(value);
    FAIL() << "rank used as a value was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
    EXPECT_NE(e.message.find("rank used as a value"), std::string::npos);
  }
  auto f = std::make_shared<Rel>();
  f->kind = RelKind::Filter;
  f->inputs = {win};
  f->cols = win->cols;
  f->cond = Opaque("($1 <= 3)", {Col(2, kI8)}, kBool);
  RelP topk = Aggregate(Project(f, {Col(1, kF8)}), 0, {{"sum", 0}}, {kF8});
  Program prog = Build(topk);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
}

}  // namespace
}  // namespace ddx
