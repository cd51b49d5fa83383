// Windows: transposed frames, lag and lead, ranks as filters.
#include <gtest/gtest.h>

#include <string>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// w = SELECT f, val, <call> OVER (ORDER BY f <frame>) FROM w
RelP WindowOver(WinCall call, Frame frame, Type out = kFloat8) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP win = NewRel(RelKind::Window);
  win->inputs = {MakeProject(w, {MakeCol(0, 0, kInt4), MakeCol(1, 0, kFloat8)})};
  win->cols = {kInt4, kFloat8, out};
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
  RelP loss = MakeAggregate(MakeProject(win, {MakeCol(2, 0, kFloat8)}), 0, {{"sum", 0}}, {kFloat8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("lead(b.d2, 2) OVER wp"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("lag(true, 2, false) OVER wp"), std::string::npos) << prog.sql;
}

TEST(Program, RankAsAValueIsRefusedAndAsAFilterAccepted) {
  RelP win = WindowOver({"row_number", -1, -1, "1"}, Frame{}, kInt8);
  RelP value = MakeAggregate(
      MakeProject(
          win, {MakeCall("mul", {MakeCol(1, 0, kFloat8), MakeCall("cast", {MakeCol(2, 0, kInt8)}, kFloat8)}, kFloat8)}),
      0, {{"sum", 0}}, {kFloat8});
  try {
    Build(value);
    FAIL() << "rank used as a value was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
    EXPECT_NE(e.message.find("rank used as a value"), std::string::npos);
  }
  RelP f = MakeFilter(win, MakeOpaque("($1 <= 3)", {MakeCol(2, 0, kInt8)}, kBool));
  RelP topk = MakeAggregate(MakeProject(f, {MakeCol(1, 0, kFloat8)}), 0, {{"sum", 0}}, {kFloat8});
  Program prog = Build(topk);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
}

}  // namespace
}  // namespace ddx
