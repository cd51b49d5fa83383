#!/usr/bin/env bash
# Builds and runs bench/dense_program.cpp (-O2, as ddx.so is built), then
# PyTorch's forward and backward of the same loss (float64, one thread,
# warm, median of 21 runs of 10 calls each) in the same invocation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh libeigen3-dev
mkdir -p build
g++ -std=c++17 -O2 -Iinclude -I/usr/include/eigen3 bench/dense_program.cpp src/dense/*.cpp src/core/ir_build.cpp \
  -o build/dense_program
build/dense_program
/usr/bin/python3 - <<'PY'
import statistics, time
import torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(1)
X = torch.randn(10000, 16, dtype=torch.float64, generator=g)
W = torch.randn(16, 8, dtype=torch.float64, generator=g) / 4
def step():
    w = W.clone().requires_grad_(True)
    (torch.tanh(X @ w) ** 2).sum().backward()
for _ in range(10): step()
ms = []
for _ in range(21):
    t = time.perf_counter()
    for _ in range(10): step()
    ms.append((time.perf_counter() - t) * 100)
print(f"PyTorch forward + backward, the same loss: {statistics.median(ms):.2f} ms (median of 21 x 10)")
PY
