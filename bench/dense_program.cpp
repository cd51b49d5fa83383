// The dense program (include/ddx/dense/program.h) on bench/contraction.py's
// matmul: loss = sum(tanh(x . w)^2), x 10,000 x 16 (160,000 rows), w 16 x 8,
// its loss and w's gradient from the scans' rows in memory (what the region
// node would hand it), ms, median of 21 runs after one warm-up. Build and
// run: bench/dense_program.sh. Freed memory is kept as a backend keeps it
// under ddx.retain_memory's default of 256 MB (src/pg/runner/settings.cpp,
// RetainMemory); with glibc's own policy (the figure "cold"), every run
// faults its ~20 MB in again.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ddx/core/ir_build.h"
#include "ddx/dense/program.h"

using namespace ddx;

int main() {
  RelP x = MakeScan("public.x", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  RelP w = MakeScan("public.w", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  ExprP eq = MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "=", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool);
  RelP z = MakeAggregate(MakeProject(MakeJoin(x, w, JoinKind::Inner, eq),
                                     {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4),
                                      MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                         2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  ExprP f = MakeCall("pow", {MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeConst("('2'::integer)", kInt4)},
                     kFloat8);
  RelP loss = MakeAggregate(MakeProject(z, {f}), 0, {{"sum", 0}}, {kFloat8});
  std::string why;
  auto p = dense::Compile(loss, &why);
  if (!p) {
    std::printf("refused: %s\n", why.c_str());
    return 1;
  }
  std::mt19937_64 rng(1);
  std::normal_distribution<double> n(0.0, 1.0);
  auto rows = [&](int a, int b, double scale) {
    dense::Rows r;
    r.n = static_cast<size_t>(a * b);
    r.val.assign(3, std::vector<double>(r.n));
    r.null.assign(3, std::vector<uint8_t>(r.n, 0));
    for (int i = 0; i < a; i++)
      for (int j = 0; j < b; j++) {
        size_t k = static_cast<size_t>(i * b + j);
        r.val[0][k] = i;
        r.val[1][k] = j;
        r.val[2][k] = n(rng) * scale;
      }
    return r;
  };
  dense::Rows xr = rows(10000, 16, 1.0), wr = rows(16, 8, 0.25);
  std::vector<const dense::Rows *> in;
  for (const Rel *s : dense::Scans(*p)) in.push_back(s == x.get() ? &xr : &wr);
  dense::Outcome o;
  auto median = [&]() {
    std::vector<double> ms;
    for (int r = 0; r < 22; r++) {
      auto t = std::chrono::steady_clock::now();
      o = dense::Run(*p, in, size_t(1) << 30);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    ms.erase(ms.begin());
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  double cold = median();
  const int kRetain = 256 * 1024 * 1024;
  (void)mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  (void)mallopt(M_TRIM_THRESHOLD, kRetain);
  (void)mallopt(M_TOP_PAD, kRetain);
  double kept = median();
  std::printf(
      "dense program, matmul 10000x16 . 16x8, tanh^2: %.2f ms, cold %.2f ms (medians of 21), loss %.6f, "
      "%d matrix product(s), peak %.1f MB, %s\n",
      kept, cold, o.loss, o.products, o.bytes / 1e6, o.done ? "done" : o.why.c_str());
  return 0;
}
