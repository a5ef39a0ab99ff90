# shoal build. Plain Make; every layer is its own static library so that a
# half-written upper layer never stops a lower layer's tests from building.
#   make            build libshoal.so, libshoal.a, shoal.pc, the shoal CLI and the test binaries
#   make install    PREFIX=/usr/local (DESTDIR=staging root): library, headers, CLI, shoal.pc, Python package
#   make demo       the main job (installs missing Debian packages first)
#   make test       the test suite, then the same suite under ASan+UBSan
#   make test-fast  the suite without the sanitizer pass
#   make BUILD=dir  build elsewhere (helpers working in parallel use their own dir)

CC      ?= cc
BUILD   ?= build
.DEFAULT_GOAL := all
SAN     ?= 0
V       ?= 0
Q       := $(if $(filter 1,$(V)),,@)
OPT     ?= -O2

# Every object is position independent so one object set serves libshoal.a, libshoal.so and the
# binaries; -fno-semantic-interposition lets calls inside the library stay direct (no PLT).
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation \
                 -Iinclude -Isrc -g -pthread -MMD -MP -fno-strict-aliasing -fPIC -fno-semantic-interposition
ifeq ($(SAN),1)
CFLAGS_COMMON += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_SAN   := -fsanitize=address,undefined
OPT           := -O1
endif
CFLAGS  := $(CFLAGS_COMMON) $(OPT) -march=x86-64-v2 $(EXTRA_CFLAGS)
LDLIBS_BASE := -lm -pthread
LDLIBS_TRAIN := -lopenblas -lz
LDLIBS_SCHED := -lglpk
LDLIBS_SERVE := -lmicrohttpd -ljansson -lcurl
LDLIBS_FLOW := -lmnl

LAYERS := core comm train sched sim serve live flow
# which layers each layer may use (layering: core <- comm <- train <- serve; core <- sched <- sim; sched <- live;
# core <- flow)
DEPS_core  := core
DEPS_comm  := comm core
DEPS_train := train comm core
DEPS_sched := sched core
DEPS_sim   := sim sched core
DEPS_serve := serve train comm core
DEPS_live  := live sched core
DEPS_flow  := flow core

# A static archive names its members by base name, and `ar r` replaces a member of the same name: two
# sub-folders of a layer may hold files of one name (policies/larr.c, planners/larr.c), so archives are
# written anew with `ar q` (append, duplicates kept), and the member count is checked against the objects.
define archive
	@mkdir -p $(@D)
	@rm -f $@
	$(Q)$(AR) qcs $@ $^
	@n=$$($(AR) t $@ | wc -l); [ "$$n" -eq $(words $^) ] || \
	  { echo "$@: $$n members for $(words $^) objects" >&2; rm -f $@; exit 1; }
endef

define layer_rules
SRC_$(1) := $$(wildcard src/$(1)/*.c src/$(1)/*/*.c)
OBJ_$(1) := $$(SRC_$(1):%.c=$(BUILD)/%.o)
$(BUILD)/libshoal_$(1).a: $$(OBJ_$(1))
	$$(archive)
endef
$(foreach L,$(LAYERS),$(eval $(call layer_rules,$(L))))

libs_for = $(foreach L,$(DEPS_$(1)),$(BUILD)/libshoal_$(L).a)

ALL_LIBS := $(foreach L,flow live serve sim sched train comm core,$(BUILD)/libshoal_$(L).a)
# the installable library (libshoal.a/.so) holds the layers with public headers; serve, live and flow are the CLI's
LIB_LAYERS := core comm train sched sim
LIB_LDLIBS := $(LDLIBS_TRAIN) $(LDLIBS_SCHED) $(LDLIBS_BASE)
ALL_LDLIBS := $(LDLIBS_SERVE) $(LDLIBS_FLOW) $(LIB_LDLIBS)

TOOL_SRC := $(wildcard tools/*.c tools/*/*.c)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)

RUNNER_OBJ := $(BUILD)/tests/runner.o $(BUILD)/tests/harness.o
define test_rules
TSRC_$(1) := $$(wildcard tests/$(1)/*.c)
TOBJ_$(1) := $$(TSRC_$(1):%.c=$(BUILD)/%.o)
$(BUILD)/tests/test_$(1): $$(TOBJ_$(1)) $(RUNNER_OBJ) $$(call libs_for,$(1))
	@mkdir -p $$(@D)
	$$(Q)$$(CC) $$(LDFLAGS_SAN) -o $$@ $$(TOBJ_$(1)) $(RUNNER_OBJ) -Wl,--start-group $$(call libs_for,$(1)) -Wl,--end-group $(ALL_LDLIBS)
endef
$(foreach L,$(LAYERS),$(eval $(call test_rules,$(L))))
TEST_BINS := $(foreach L,$(LAYERS),$(BUILD)/tests/test_$(L))
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

.PHONY: all lib tools tests test test-fast test-sanitize check-code demo deps deps-bench clean bench config install uninstall pythondir \
        torch $(addprefix test-,$(LAYERS))
all: $(BUILD)/shoal $(TEST_BINS) lib $(EXAMPLE_BINS) torch

# ---- the torch.distributed backend: a C++ extension module (python/shoal/csrc) over libshoal.so ----
# Built where Debian's libtorch-dev (with python3-dev) and pybind11-dev are installed; skipped with a
# message elsewhere, and in the sanitizer build (ASan would have to be preloaded into the interpreter).
PY_INC      := $(shell /usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
TORCH_INC   ?= /usr/include
HAVE_TORCH  := $(if $(filter 1,$(SAN)),,$(and $(wildcard $(TORCH_INC)/torch/csrc/distributed/c10d/ProcessGroup.hpp),$(wildcard \
                 /usr/include/pybind11/pybind11.h),$(wildcard $(PY_INC)/Python.h)))
TORCH_EXT   := $(BUILD)/_c10d.so
CXX         ?= g++
TORCH_CXXFLAGS := -std=c++17 -O2 -g -fPIC -Wall -Wextra -Werror -Wno-unused-parameter -MMD -MP -Iinclude \
                  -isystem $(TORCH_INC)/torch/csrc/api/include -isystem $(PY_INC) -D_GLIBCXX_USE_CXX11_ABI=1 \
                  -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_c10d
ifneq ($(HAVE_TORCH),)
torch: $(TORCH_EXT)
$(BUILD)/python/shoal/csrc/%.o: python/shoal/csrc/%.cpp
	@mkdir -p $(@D)
	$(Q)$(CXX) $(TORCH_CXXFLAGS) -c -o $@ $<
$(TORCH_EXT): $(BUILD)/python/shoal/csrc/process_group.o $(BUILD)/libshoal.so
	$(Q)$(CXX) -shared -o $@ $< -L$(BUILD) -l:$(SONAME) -ltorch -ltorch_cpu -lc10 -ltorch_python
else
torch:
	@echo "shoal: torch backend (shoal.torch) skipped: $(if $(filter 1,$(SAN)),not built under the sanitizers,libtorch-dev, python3-dev and pybind11-dev are not all installed (scripts/deps.sh test installs them))"
endif

# ---- the installable library ----
# Version: the one in include/shoal/shoal.h. Soname libshoal.so.MAJOR.
ver_field = $(shell sed -n 's/^\#define SHOAL_VERSION_$(1) \([0-9][0-9]*\).*/\1/p' include/shoal/shoal.h)
VERSION_MAJOR := $(call ver_field,MAJOR)
VERSION := $(VERSION_MAJOR).$(call ver_field,MINOR).$(call ver_field,PATCH)
SONAME := libshoal.so.$(VERSION_MAJOR)
LIB_OBJ := $(foreach L,$(LIB_LAYERS),$(OBJ_$(L)))
PUBLIC_HEADERS := $(wildcard include/shoal/*.h)

$(BUILD)/libshoal.a: $(LIB_OBJ)
	$(archive)
# Only the functions declared in the public headers are exported (a linker version script made from them).
$(BUILD)/libshoal.map: $(PUBLIC_HEADERS) scripts/export-map.sh
	@mkdir -p $(@D)
	$(Q)scripts/export-map.sh $(VERSION_MAJOR) $(PUBLIC_HEADERS) > $@.tmp && mv $@.tmp $@
$(BUILD)/libshoal.so.$(VERSION): $(LIB_OBJ) $(BUILD)/libshoal.map
	$(Q)$(CC) $(LDFLAGS_SAN) -shared -Wl,-soname,$(SONAME) -Wl,--version-script,$(BUILD)/libshoal.map \
	  -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LIB_LDLIBS)
$(BUILD)/$(SONAME): $(BUILD)/libshoal.so.$(VERSION)
	$(Q)ln -sf $(<F) $@
$(BUILD)/libshoal.so: $(BUILD)/$(SONAME)
	$(Q)ln -sf $(<F) $@
# pkg-config file: written at install time for the PREFIX/LIBDIR given then.
pc_subst = sed -e 's|@VERSION@|$(VERSION)|' -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
             -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' scripts/shoal.pc.in
lib: $(BUILD)/libshoal.a $(BUILD)/libshoal.so

# Examples build against the public headers only, like a user's program.
$(BUILD)/examples/%: examples/%.c $(BUILD)/libshoal.a
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libshoal.a $(LDFLAGS_SAN) $(LIB_LDLIBS)

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# Debian's /usr/bin/python3 searches /usr/lib/python3/dist-packages and /usr/local/lib/python3.X/dist-packages,
# under PREFIX/lib whatever LIBDIR is (a multiarch LIBDIR holds no Python packages)
PYVER       = $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHONDIR  ?= $(if $(or $(filter /usr,$(PREFIX)),$(if $(PYVER),,none)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYVER)/dist-packages)
DESTDIR    ?=
install: lib $(BUILD)/shoal torch
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/shoal $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(PYTHONDIR)/shoal
	install -m 755 $(BUILD)/shoal $(DESTDIR)$(BINDIR)/shoal
	install -m 755 $(BUILD)/libshoal.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libshoal.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libshoal.so
	install -m 644 $(BUILD)/libshoal.a $(DESTDIR)$(LIBDIR)/
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/shoal/
	$(pc_subst) > $(DESTDIR)$(PKGCONFIGDIR)/shoal.pc
	install -m 644 $(wildcard python/shoal/*.py) $(DESTDIR)$(PYTHONDIR)/shoal/
	$(if $(HAVE_TORCH),install -m 755 $(TORCH_EXT) $(DESTDIR)$(PYTHONDIR)/shoal/,@echo "shoal: torch backend not installed (not built)")
	@# where the package finds the library when PYTHONDIR is not under PREFIX/lib
	printf '# written by make install\nLIBDIR = "%s"\n' '$(LIBDIR)' > $(DESTDIR)$(PYTHONDIR)/shoal/_install.py
	@echo "python package: $(PYTHONDIR)/shoal (on /usr/bin/python3's path for PREFIX=/usr and /usr/local without PYTHONDIR; otherwise PYTHONPATH=$(PYTHONDIR))"
pythondir:
	@echo $(PYTHONDIR)
# exactly what install wrote (another version's libshoal.so.N stays); the Python and pkg-config
# directories go too if nothing else is in them
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/shoal $(DESTDIR)$(LIBDIR)/libshoal.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/libshoal.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libshoal.a $(DESTDIR)$(PKGCONFIGDIR)/shoal.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/shoal $(DESTDIR)$(PYTHONDIR)/shoal
	-rmdir $(DESTDIR)$(PYTHONDIR) $(DESTDIR)$(PKGCONFIGDIR) 2>/dev/null

$(BUILD)/shoal: $(TOOL_OBJ) $(ALL_LIBS)
	$(Q)$(CC) $(LDFLAGS_SAN) -o $@ $(TOOL_OBJ) -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(ALL_LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<
# files the assembler includes into the library (src/sched/model/shipped.c)
$(BUILD)/src/sched/model/shipped.o: data/interference-measured.json data/marl-default.weights

deps:
	@scripts/deps.sh test
deps-bench:
	@scripts/deps.sh bench

# Per-test timeout in seconds (the runner kills the whole process group of a test past it).
TEST_TIMEOUT ?= 120
TEST_ARGS ?=
test-fast: deps
	@$(MAKE) --no-print-directory all
	@scripts/run-tests.sh $(BUILD) $(TEST_TIMEOUT) $(TEST_ARGS)

test-sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build-san SAN=1 all
	@SHOAL_SANITIZE=1 scripts/run-tests.sh build-san $(TEST_TIMEOUT) $(TEST_ARGS)

test: check-code test-fast test-sanitize

# The code's shape: no function over 100 lines without a "Long function:" reason (at most 8), no call
# circle between the files of src/comm or tools/ (scripts/code-report.py --help).
check-code: deps
	@python3 scripts/code-report.py --check

$(foreach L,$(LAYERS),$(eval test-$(L): deps $(BUILD)/tests/test_$(L) $(BUILD)/shoal ; @SHOAL_BIN=$(BUILD)/shoal $(BUILD)/tests/test_$(L) -t $(TEST_TIMEOUT) $(TEST_ARGS)))

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)

bench: deps-bench
	@$(MAKE) --no-print-directory all
	@bench/run-all.sh $(BUILD)

config: $(BUILD)/shoal
	@$(BUILD)/shoal config

clean:
	rm -rf build build-san build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
