#!/usr/bin/env bash
# Builds and runs bench/dense_kernels.cpp: Eigen against Debian's serial
# OpenBLAS and a plain loop on the models' matrix products (installs
# libeigen3-dev and libopenblas-serial-dev if missing; -O2, as ddx.so is
# built, no -march: the machine's baseline instruction set).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh libeigen3-dev libopenblas-serial-dev
OB=/usr/lib/x86_64-linux-gnu/openblas-serial
mkdir -p build
g++ -std=c++17 -O2 -Iinclude -I/usr/include/eigen3 -I/usr/include/x86_64-linux-gnu/openblas-serial \
  bench/dense_kernels.cpp src/dense/contract.cpp -o build/dense_kernels -L"$OB" -Wl,-rpath,"$OB" -lopenblas
build/dense_kernels
