# ddx: PGXS build. `make && make install`; tests: scripts/test.sh
EXTENSION = ddx
MODULE_big = ddx
DATA = ddx--0.1.sql
PGFILEDESC = "ddx - differentiable SQL"

OBJS = src/ddx.o \
       src/core/rules.o src/core/program.o src/core/shift.o \
       src/pg/guard.o src/pg/translate.o src/pg/hook.o src/pg/runner.o

PG_CPPFLAGS = -I$(srcdir)/include
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register -Wno-cast-function-type
SHLIB_LINK = -lstdc++

# Every sql/*.sql must be listed here (scripts/test.sh checks it).
REGRESS = grad_basic constructs scalars forms errors security vjp backward windows frames train runs params explain \
          optim_fixture
REGRESS_OPTS = --outputdir=test/out --load-extension=ddx

# No LLVM bitcode: it needs a clang matching the server's LLVM and buys nothing here.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
