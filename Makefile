# ddx: PGXS build. `make && make install`; tests: scripts/test.sh
EXTENSION = ddx
# The newest version: ddx.control's default_version, the library's
# ddx_version(). Every release is a line of sql/upgrades/RELEASES (and a tag
# vA.B); a change of the SQL API after one raises this and ships
# sql/upgrades/ddx--A.B--C.D.sql beside the parts (test/upgrade checks that
# the two give the same objects).
EXTVERSION = 0.2
MODULE_big = ddx
# The install script of the newest version is built from the SQL API's parts,
# sql/*.sql in name order (one concern each); older versions are reached
# through the upgrade scripts. (An absolute name: in a build folder of its own
# (VPATH), make would otherwise take the source tree's copy for it.)
DATA_built = $(abspath ddx--$(EXTVERSION).sql)
DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/upgrades/ddx--*--*.sql))
SQL_PARTS = $(sort $(wildcard $(srcdir)/sql/*.sql))
PGFILEDESC = "ddx - differentiable SQL"

# The core: every file of src/core and src/core/ops (one per operator).
CORE_SRCS = $(sort $(wildcard $(srcdir)/src/core/*.cpp $(srcdir)/src/core/ops/*.cpp))
# The adapter: every file of src/pg and its folders (one per entry point).
PG_SRCS = $(sort $(wildcard $(srcdir)/src/pg/*.cpp $(srcdir)/src/pg/*/*.cpp))
# The dense programs: every file of src/dense (pure C++, Eigen's kernels).
DENSE_SRCS = $(sort $(wildcard $(srcdir)/src/dense/*.cpp))
OBJS = src/ddx.o $(patsubst $(srcdir)/%.cpp,%.o,$(CORE_SRCS) $(DENSE_SRCS) $(PG_SRCS))

PG_CPPFLAGS = -I$(srcdir)/include -I/usr/include/eigen3 -DEIGEN_NO_DEBUG -DDDX_VERSION='"$(EXTVERSION)"'
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

ifneq ($(shell sed -n "s/^default_version = '\(.*\)'$$/\1/p" $(srcdir)/ddx.control),$(EXTVERSION))
$(error ddx.control's default_version is not EXTVERSION $(EXTVERSION))
endif

# A build in a folder of its own (make -f SRC/Makefile VPATH=SRC, as Debian's
# pg_buildext does for each major): the objects' folders exist there too. (As
# for any PGXS build, the source tree must hold no build of its own: make
# would take its ddx.so for the folder's.)
ifneq ($(srcdir),.)
$(shell mkdir -p $(sort $(dir $(OBJS))) test)
endif

.PHONY: regress_out
regress_out:
	mkdir -p $(REGRESS_OUT)

$(abspath ddx--$(EXTVERSION).sql): $(SQL_PARTS)
	for f in $^; do cat $$f; echo; done > $@
