// Test helper: the golden snapshots of the unit tests' programs
// (test/golden/unit/<Suite>.<Test>.<n>.sql).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ddx/core/program.h"

namespace ddx {

// Every program a test builds is also a golden snapshot: compared with
// test/golden/unit/<Suite>.<Test>.<n>.sql (DDX_UPDATE_GOLDEN=1 writes them),
// so that a reorganization of the core is proven to emit the same bytes.
inline Program Build(const RelP &loss) {
  Program p = BuildGradientProgram(loss);
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  static std::string last;
  static int n = 0;
  std::string key = std::string(info->test_suite_name()) + "." + info->name();
  if (key != last) last = key, n = 0;
  std::string path = std::string(DDX_GOLDEN_DIR) + "/" + key + "." + std::to_string(n++) + ".sql";
  if (std::getenv("DDX_UPDATE_GOLDEN")) {
    std::ofstream(path) << p.sql;
    return p;
  }
  std::ifstream f(path);
  std::stringstream want;
  want << f.rdbuf();
  if (!f.good() || want.str() != p.sql)
    ADD_FAILURE() << "the program differs from its golden snapshot " << path
                  << " (if the change is meant, DDX_UPDATE_GOLDEN=1 rewrites it)";
  return p;
}

}  // namespace ddx
