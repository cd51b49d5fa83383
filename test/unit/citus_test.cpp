// Citus placement: saved copies keyed by primary key, data read in place,
// per-sample steps recomputed on the workers, packed rids with their keys.
#include <gtest/gtest.h>

#include <regex>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// A Citus table is read through a saved copy (its rid computed once, not a
// shard's ctid), and a parameter row in one is identified by its primary
// key: the program's key column, tid NULL. Forward mode refuses it.
TEST(Program, CitusTablesAreSavedAndTheirParameterRowsKeyed) {
  RelP loss = LinearLoss();
  MarkCitus(loss);
  Program p = Build(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find(".ctid"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("t.tableoid"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("ROW(t.f)::text AS key, t.f AS c0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("NULL::tid AS tid, 0 AS pidx"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find(", f.key FROM"), std::string::npos) << p.sql;
  try {
    BuildTangentSql(loss, {});
    ADD_FAILURE() << "forward mode over a Citus table was not refused";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, std::string(sqlstate::kFeatureNotSupported));
  }
}

// In place on Citus: the data (a Citus table without parameters) is read
// where it is, the parameters through their keyed copy, and nothing is
// fenced, so that Citus can push the per-row work to its workers.
TEST(Program, CitusDataInPlaceIsUnfenced) {
  // sum(tanh(pred.z) * y.val) over pred JOIN y, pred = x JOIN w by x.s (the
  // gathered program computes tanh only for pred rows that meet a y row)
  RelP pred = SumBy(XJoinW(-1, 0), MakeCol(0, 0, kInt4),
                    MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
  RelP y = MakeScan("public.y", {"s", "val"}, {kInt4, kFloat8}, {-1, -1});
  RelP yj = MakeJoin(pred, y, JoinKind::Inner,
                     MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(2, 0, kInt4), MakeCol(0, 0, kInt4)}, kBool));
  RelP loss = MakeAggregate(
      MakeProject(yj, {MakeCall("mul", {MakeCall("tanh", {MakeCol(1, 0, kFloat8)}, kFloat8), MakeCol(3, 0, kFloat8)},
                                kFloat8)}),
      0, {{"sum", 0}}, {kFloat8});
  MarkCitus(loss);
  EXPECT_TRUE(ReadsCitusData(loss));
  Program g = BuildGradientProgram(loss);
  Program p = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(g.sql.find("OFFSET 0"), std::string::npos) << g.sql;
  EXPECT_EQ(g.sql.find("public.x a"), std::string::npos) << g.sql;
  EXPECT_EQ(p.sql.find("OFFSET 0"), std::string::npos) << p.sql;
  EXPECT_NE(g.sql.find("EXISTS"), std::string::npos) << g.sql;
  EXPECT_EQ(p.sql.find("EXISTS"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("public.x a0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("ROW(t.f)::text AS key"), std::string::npos) << p.sql;
}

// A group's rid is its keys where they are integers: one key that cannot be
// NULL as it is, a nullable one widened with NULL a bigint no integer is,
// others numbered by row_number(). In place on Citus, a per-sample step with
// such a rid is recomputed by its readers (NOT MATERIALIZED, staying on the
// workers), unless a max compares recomputed values.
TEST(Program, GroupRidsFromKeysAndPerSampleStepsRecomputedInPlace) {
  Program p = Build(LinearLoss());
  EXPECT_NE(p.sql.find("SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS rid, a0.c0 AS c0"),
            std::string::npos)
      << p.sql;
  auto linear = [](const std::string &agg) {
    RelP pred = SumBy(XJoinW(-1, 0, {true, false, false}), MakeCol(0, 0, kInt4),
                      MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
    RelP loss =
        MakeAggregate(MakeProject(pred, {MakeCall("mul", {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)}, kFloat8)}),
                      0, {{agg, 0}}, {kFloat8});
    MarkCitus(loss);
    return loss;
  };
  p = Build(linear("sum"));
  EXPECT_NE(p.sql.find("SELECT (a0.c0) AS rid, a0.c0 AS c0"), std::string::npos) << p.sql;
  Program in = BuildGradientProgram(linear("sum"), CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("f5 AS NOT MATERIALIZED (SELECT (a0.s) AS rid"), std::string::npos) << in.sql;
  Program gathered = BuildGradientProgram(linear("sum"));
  EXPECT_EQ(gathered.sql.find("NOT MATERIALIZED (SELECT (a0."), std::string::npos) << gathered.sql;
  // (in place, the loss aggregate's one-row cotangent, here the seed, stays
  // stored for the workers' tasks to read; read by one step, it is
  // otherwise planned inside it)
  EXPECT_NE(in.sql.find(" AS MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f"), std::string::npos) << in.sql;
  EXPECT_NE(gathered.sql.find(" AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f"), std::string::npos)
      << gathered.sql;
  in = BuildGradientProgram(linear("max"), CitusPlacement::InPlace);
  EXPECT_NE(in.sql.find("f5 AS MATERIALIZED (SELECT (a0.s) AS rid"), std::string::npos) << in.sql;
  // (two keys, both NOT NULL)
  RelP two = MakeAggregate(MakeProject(XJoinW(-1, 0, {true, true, false}),
                                       {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4),
                                        MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)}),
                           2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  p = Build(SumOfSquares(two, 2));
  EXPECT_NE(p.sql.find(
                "(CAST(a0.c0 AS pg_catalog.int8) * 4294967296 + ((CAST(a0.c1 AS pg_catalog.int8) + 2147483648 + "
                "CAST(a0.c0 AS pg_catalog.int8) * 40503) % 4294967296 + 4294967296) % 4294967296) AS rid"),
            std::string::npos)
      << p.sql;
}

// The MLP of the packed-rid tests: x(s, f, val) ⋈ w1(f, j, val) summed by
// (s, j) into the hidden layer h, tanh(h) ⋈ w2(j, val) summed by s, the loss
// a sum of squares; `sample` the type of s (never NULL: a distribution column).
struct HiddenLayer {
  RelP xw, h, w2, loss;
};

HiddenLayer HiddenLayerMlp(const Type &sample) {
  RelP x = MakeScan("public.x", {"s", "f", "val"}, {sample, kInt4, kFloat8}, {-1, -1, -1});
  x->notnull = {true, true, false};
  RelP w1 = MakeScan("public.w1", {"f", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  w1->notnull = {true, true, false};
  RelP xw =
      MakeJoin(x, w1, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP h = MakeAggregate(MakeProject(xw, {MakeCol(0, 0, sample), MakeCol(4, 0, kInt4),
                                          MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                         2, {{"sum", 2}}, {sample, kInt4, kFloat8});
  RelP w2 = MakeScan("public.w2", {"j", "val"}, {kInt4, kFloat8}, {-1, 1});
  RelP hw = MakeJoin(MakeProject(h, {MakeCol(0, 0, sample), MakeCol(1, 0, kInt4),
                                     MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8)}),
                     w2, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP loss = SumOfSquares(
      SumBy(hw, MakeCol(0, 0, sample), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)), 1);
  MarkCitus(loss);
  return {xw, h, w2, loss};
}

// In place on Citus, a per-sample aggregate whose rid packs two keys (the
// MLP's hidden layer, by sample and unit) is matched to its cotangent and
// grouped with the keys beside the rid, so that Citus sees the distribution
// column in both: its cotangent carries them (rk0, rk1), every contribution
// groups by them, the deferred rows rejoin on them, and its transpose reads
// them from the cotangent. Not in the gathered program, nor on one server.
TEST(Program, PackedRidsCarryTheirKeysInPlace) {
  auto [xw, h, w2, loss] = HiddenLayerMlp(kInt4);
  Program in = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("4294967296 + ((CAST("), std::string::npos) << in.sql;  // (the packed rid)
  EXPECT_NE(in.sql.find("GROUP BY q.r0, q.rk0_0, q.rk0_1"), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("AND a0.c0 = n.rk0_0 AND a0.c1 = n.rk0_1"), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("n.rk0_0 AS rk0, n.rk0_1 AS rk1"), std::string::npos) << in.sql;
  // (its groups' keys read from its cotangent alone, not from the hidden
  // layer recomputed again: KeysInCotangent)
  EXPECT_NE(in.sql.find("(SELECT b.rid AS rid, b.rk0 AS c0, b.rk1 AS c1, b.d2 AS bd2 FROM b5 b) a"), std::string::npos)
      << in.sql;
  EXPECT_EQ(in.sql.find("b.rk0 = a.c0"), std::string::npos) << in.sql;
  // (a recomputed step's cotangent is recomputed too, however many read it)
  int recomputed = 0;
  const std::regex step("\\nf([0-9]+) AS NOT MATERIALIZED");
  for (std::sregex_iterator m(in.sql.begin(), in.sql.end(), step), end; m != end; ++m, ++recomputed) {
    std::string b = "\nb" + (*m)[1].str() + " AS ";
    size_t at = in.sql.find(b);
    EXPECT_NE(at, std::string::npos) << b;
    EXPECT_EQ(in.sql.compare(at + b.size(), 17, "NOT MATERIALIZED "), 0) << in.sql.substr(at, 80);
  }
  EXPECT_EQ(recomputed, 2) << in.sql;  // the hidden layer and the output
  // (read twice, by the output and by a sum of its squares: the two
  // contributions summed by the rid and its keys)
  RelP th =
      MakeProject(h, {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4), MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8)});
  RelP hw2 =
      MakeJoin(th, w2, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP z = SumBy(hw2, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
  RelP sq = SumBy(th, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(2, 0, kFloat8)}, kFloat8));
  RelP both =
      MakeJoin(z, sq, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(0, 0, kInt4), MakeCol(2, 0, kInt4)}, kBool));
  RelP twice =
      MakeAggregate(MakeProject(both, {MakeCall("add", {MakeCol(1, 0, kFloat8), MakeCol(3, 0, kFloat8)}, kFloat8)}), 0,
                    {{"sum", 0}}, {kFloat8});
  MarkCitus(twice);
  in = BuildGradientProgram(twice, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find(") z GROUP BY z.rid, z.rk0, z.rk1)"), std::string::npos) << in.sql;
  // (a hidden layer that averages: its backward reads each group's count,
  // which only the saved rows have, so it still joins them on the rid and
  // its keys)
  RelP ha = MakeAggregate(MakeProject(xw, {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4),
                                           MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                          2, {{"avg", 2}}, {kInt4, kInt4, kFloat8});
  RelP haw = MakeJoin(
      MakeProject(ha,
                  {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4), MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8)}),
      w2, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP avg_loss = SumOfSquares(
      SumBy(haw, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)), 1);
  MarkCitus(avg_loss);
  in = BuildGradientProgram(avg_loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("ON b.rid = a.rid AND b.rk0 = a.c0 AND b.rk1 = a.c1"), std::string::npos) << in.sql;
  for (const Program &p : {BuildGradientProgram(loss), Build(loss)}) {
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    EXPECT_EQ(p.sql.find("rk0"), std::string::npos) << p.sql;
  }
}

// A hidden layer whose sample id is a bigint: in place on Citus its rid is
// the two keys packed into a numeric (k0 * 2^64 + (k1 + 2^63)), computed per
// row, with the keys beside it, so that it is recomputed on the workers; not
// row_number(), which Citus computes on the coordinator (the layer gathered).
// Off Citus it keeps row_number().
TEST(Program, BigintKeysPackIntoANumericRidInPlace) {
  RelP loss = HiddenLayerMlp(kInt8).loss;
  Program in = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("AS pg_catalog.numeric) * 18446744073709551616 + (CAST("), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("n.rk0_0 AS rk0, n.rk0_1 AS rk1"), std::string::npos) << in.sql;
  const std::regex recomputed("\\nf([0-9]+) AS NOT MATERIALIZED \\(SELECT \\(CAST");
  EXPECT_TRUE(std::regex_search(in.sql, recomputed)) << in.sql;
  for (const Program &p : {BuildGradientProgram(loss), Build(loss)}) {
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    EXPECT_EQ(p.sql.find("numeric"), std::string::npos) << p.sql;
    EXPECT_NE(p.sql.find("row_number()"), std::string::npos) << p.sql;
  }
}

}  // namespace
}  // namespace ddx
