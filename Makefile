# ddx: PGXS build. `make && make install`; tests: scripts/test.sh
EXTENSION = ddx
EXTVERSION = 0.1
MODULE_big = ddx
# The install script is built from the SQL API's parts, sql/*.sql in name
# order (one concern each).
DATA_built = ddx--$(EXTVERSION).sql
SQL_PARTS = $(sort $(wildcard $(srcdir)/sql/*.sql))
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

# pg_regress: every test/regress/sql/*.sql, in name order, in one database.
REGRESS = $(sort $(patsubst $(srcdir)/test/regress/sql/%.sql,%,$(wildcard $(srcdir)/test/regress/sql/*.sql)))
# (Their results in test/out, or REGRESS_OUT: one folder per major.)
REGRESS_OUT ?= test/out
REGRESS_OPTS = --inputdir=$(srcdir)/test/regress --outputdir=$(REGRESS_OUT) --load-extension=ddx
REGRESS_PREP = regress_out

# No LLVM bitcode: it needs a clang matching the server's LLVM and buys nothing here.
override with_llvm = no

EXTRA_CLEAN = $(OBJS:.o=.d)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

-include $(OBJS:.o=.d)

# A build in a folder of its own (one per PostgreSQL major, as scripts/test.sh
# does: make -f SRC/Makefile VPATH=SRC): the objects' folders exist there too.
ifneq ($(srcdir),.)
$(shell mkdir -p $(sort $(dir $(OBJS))) test)
endif

.PHONY: regress_out
regress_out:
	mkdir -p $(REGRESS_OUT)

ddx--$(EXTVERSION).sql: $(SQL_PARTS)
	for f in $^; do cat $$f; echo; done > $@
