// Which kernel library for dense regions (issue 38): Eigen 3.4 against
// OpenBLAS 0.3.21 (Debian's serial build) and a plain loop, on the matrix
// products of the bench's models, one thread, float64; and what ddx's
// contraction with PostgreSQL's semantics (src/dense/contract.cpp: the
// guard's scan, the product, existence and the zero-sign fix) adds to
// Eigen's bare product. Build and run: bench/dense_kernels.sh.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "ddx/dense/contract.h"
extern "C" {
#include <cblas.h>
}

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class F>
double MedianNs(F f, int reps) {
  std::vector<double> t;
  f();  // (warm)
  for (int r = 0; r < reps; r++) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  struct Shape {
    const char *what;
    int i, k, j;
  } shapes[] = {{"matmul x.w", 10000, 16, 8},        {"MLP layer 1", 4096, 16, 32},
                {"MLP layer 2", 4096, 32, 4},        {"attention q.k^T", 256, 16, 256},
                {"GPT demo: qkv", 128, 32, 96},      {"GPT demo: fc", 128, 32, 128},
                {"GPT demo: proj", 128, 128, 32},    {"GPT demo: lm head", 128, 32, 76},
                {"GPT 2x4x64: fc", 256, 64, 256}};
  std::mt19937_64 rng(1);
  std::normal_distribution<double> g;
  std::printf("%-20s %6s %6s %6s %10s %10s %10s %10s   (ns per multiply-add, medians)\n", "shape", "i", "k", "j",
              "loop", "OpenBLAS", "Eigen", "contract");
  for (const Shape &s : shapes) {
    ddx::dense::Matrix a(s.i, s.k), b(s.k, s.j);
    for (int x = 0; x < s.i; x++)
      for (int y = 0; y < s.k; y++) a.Set(x, y, g(rng));
    for (int x = 0; x < s.k; x++)
      for (int y = 0; y < s.j; y++) b.Set(x, y, g(rng));
    std::vector<double> c(static_cast<size_t>(s.i) * s.j);
    double madds = static_cast<double>(s.i) * s.k * s.j;
    int reps = std::max(5, static_cast<int>(2e8 / madds));
    double loop = MedianNs(
        [&] {
          std::fill(c.begin(), c.end(), 0.0);
          for (int x = 0; x < s.i; x++)
            for (int y = 0; y < s.k; y++) {
              double av = a.val[a.At(x, y)];
              const double *br = &b.val[b.At(y, 0)];
              double *cr = &c[static_cast<size_t>(x) * s.j];
              for (int z = 0; z < s.j; z++) cr[z] += av * br[z];
            }
        },
        reps);
    double blas = MedianNs(
        [&] {
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.i, s.j, s.k, 1.0, a.val.data(), s.k,
                      b.val.data(), s.j, 0.0, c.data(), s.j);
        },
        reps);
    double eigen = MedianNs(
        [&] {
          Eigen::Map<RowMajor>(c.data(), s.i, s.j).noalias() =
              Eigen::Map<const RowMajor>(a.val.data(), s.i, s.k) * Eigen::Map<const RowMajor>(b.val.data(), s.k, s.j);
        },
        reps);
    double contract = MedianNs([&] { ddx::dense::Contract(a, b); }, std::max(3, reps / 4));
    std::printf("%-20s %6d %6d %6d %10.3f %10.3f %10.3f %10.3f\n", s.what, s.i, s.k, s.j, loop / madds, blas / madds,
                eigen / madds, contract / madds);
  }
  return 0;
}
