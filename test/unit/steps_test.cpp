// Which backward steps are stored (MATERIALIZED) and which are planned
// inside their one reader (NOT MATERIALIZED): decided on the references
// that the steps record, not on the program's text.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "ddx/core/program.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// Each step's name and whether it is stored, in order.
std::string Stored(const std::string &sql) {
  static const std::regex step("(?:^WITH |\n)(\\w+) AS (NOT )?MATERIALIZED \\(");
  std::string out;
  for (std::sregex_iterator it(sql.begin(), sql.end(), step), end; it != end; ++it)
    out += (*it)[1].str() + ((*it)[2].matched ? " streamed\n" : " stored\n");
  return out;
}

// Broke once: the references to a step were the words of the printed
// program equal to its name, so a user's table or column of that name
// counted as readers and kept stored a step that one reader reads (the
// MLP's bias table public.b2 beside b2, the cotangent of w1).
TEST(Steps, ATableOrColumnNamedLikeAStepDoesNotKeepItStored) {
  // LinearLoss, with w named public.b2 and the value columns b5 and b7:
  // the names of the cotangents of w (b2), pred (b5) and the loss (b7),
  // each read once (by the gradient rows, w's and pred's contributions)
  RelP x = MakeScan("public.x", {"s", "f", "b7"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  RelP w = MakeScan("public.b2", {"f", "b5"}, {kInt4, kFloat8}, {-1, 0});
  RelP xw =
      MakeJoin(x, w, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP loss = SumOfSquares(
      SumBy(xw, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)), 1);
  Program p = BuildGradientProgram(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("FROM public.b2 t"), std::string::npos) << p.sql;
  for (const char *step : {"\nb7 AS NOT MATERIALIZED (", "\nb5 AS NOT MATERIALIZED (", "\nb2 AS NOT MATERIALIZED ("})
    EXPECT_NE(p.sql.find(step), std::string::npos) << step << p.sql;
  // (stored as with names that no step has)
  EXPECT_EQ(Stored(p.sql), Stored(BuildGradientProgram(LinearLoss()).sql));
}

// A step that its one reader joins twice is stored: a window's max reads
// its cotangent for the pass-through and again for the rows that attain
// each maximum, both in the one contribution to its input.
TEST(Steps, AStepItsOneReaderJoinsTwiceIsStored) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP win = NewRel(RelKind::Window);
  win->inputs = {MakeProject(w, {MakeCol(0, 0, kInt4), MakeCall("exp", {MakeCol(1, 0, kFloat8)}, kFloat8)})};
  win->cols = {kInt4, kFloat8, kFloat8};
  win->order = {SortKey{0, false, false}};
  win->frame.mode = FrameMode::Rows;
  win->frame.start = {BoundKind::Preceding, "1"};
  win->frame.end = {BoundKind::CurrentRow, ""};
  win->wins = {{"max", 1, -1, "1"}};
  Program p = BuildGradientProgram(SumOfSquares(win, 2));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  // (the window is relation 3: after w and the projection it reads)
  size_t def = p.sql.find("\nb3 AS MATERIALIZED (");
  ASSERT_NE(def, std::string::npos) << p.sql;
  size_t first = p.sql.find(" JOIN b3 b ", def), second = p.sql.find(" JOIN b3 b ", first + 1);
  EXPECT_NE(first, std::string::npos) << p.sql;
  EXPECT_NE(second, std::string::npos) << p.sql;
}

}  // namespace
}  // namespace ddx
