# ddx: PGXS build. `make && make install`; tests: scripts/test.sh
EXTENSION = ddx
MODULE_big = ddx
DATA = ddx--0.1.sql
PGFILEDESC = "ddx - differentiable SQL"

# The core: every file of src/core and src/core/ops (one per operator).
CORE_SRCS = $(sort $(wildcard $(srcdir)/src/core/*.cpp $(srcdir)/src/core/ops/*.cpp))
# The adapter: every file of src/pg and its folders (one per entry point).
PG_SRCS = $(sort $(wildcard $(srcdir)/src/pg/*.cpp $(srcdir)/src/pg/*/*.cpp))
OBJS = src/ddx.o $(patsubst $(srcdir)/%.cpp,%.o,$(CORE_SRCS) $(PG_SRCS))

PG_CPPFLAGS = -I$(srcdir)/include
# -MMD -MP: each object's header dependencies (x.d beside x.o), included below,
# so that a changed header rebuilds every file that includes it.
PG_CXXFLAGS = -std=c++17 -MMD -MP -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register -Wno-cast-function-type
SHLIB_LINK = -lstdc++

# Every sql/*.sql must be listed here (scripts/test.sh checks it).
REGRESS = grad_basic constructs scalars forms errors security vjp backward windows frames train runs params explain \
          optim_fixture jvp contraction contraction_refusals unique functions guards
REGRESS_OPTS = --outputdir=test/out --load-extension=ddx

# No LLVM bitcode: it needs a clang matching the server's LLVM and buys nothing here.
override with_llvm = no

EXTRA_CLEAN = $(OBJS:.o=.d)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

-include $(OBJS:.o=.d)
