# shoal build. Plain Make; every layer is its own static library so that a
# half-written upper layer never stops a lower layer's tests from building.
#   make            build libshoal.a, the shoal CLI and the test binaries
#   make demo       the main job (installs missing Debian packages first)
#   make test       the test suite, then the same suite under ASan+UBSan
#   make test-fast  the suite without the sanitizer pass
#   make BUILD=dir  build elsewhere (helpers working in parallel use their own dir)

CC      ?= cc
BUILD   ?= build
SAN     ?= 0
V       ?= 0
Q       := $(if $(filter 1,$(V)),,@)
OPT     ?= -O2

CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation \
                 -Iinclude -Isrc -g -pthread -MMD -MP -fno-strict-aliasing
ifeq ($(SAN),1)
CFLAGS_COMMON += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_SAN   := -fsanitize=address,undefined
OPT           := -O1
endif
CFLAGS  := $(CFLAGS_COMMON) $(OPT) -march=x86-64-v2 $(EXTRA_CFLAGS)
LDLIBS_BASE := -lm -pthread
LDLIBS_TRAIN := -lopenblas -lz
LDLIBS_SCHED := -lglpk

LAYERS := core comm train sched sim
# which layers each layer may use (layering: core <- comm <- train; core <- sched <- sim)
DEPS_core  := core
DEPS_comm  := comm core
DEPS_train := train comm core
DEPS_sched := sched core
DEPS_sim   := sim sched core

define layer_rules
SRC_$(1) := $$(wildcard src/$(1)/*.c)
OBJ_$(1) := $$(SRC_$(1):%.c=$(BUILD)/%.o)
$(BUILD)/libshoal_$(1).a: $$(OBJ_$(1))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(Q)$$(AR) rcs $$@ $$^
endef
$(foreach L,$(LAYERS),$(eval $(call layer_rules,$(L))))

libs_for = $(foreach L,$(DEPS_$(1)),$(BUILD)/libshoal_$(L).a)

ALL_LIBS := $(foreach L,sim sched train comm core,$(BUILD)/libshoal_$(L).a)
ALL_LDLIBS := $(LDLIBS_TRAIN) $(LDLIBS_SCHED) $(LDLIBS_BASE)

TOOL_SRC := $(wildcard tools/*.c)
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

.PHONY: all lib tools tests test test-fast test-sanitize demo deps deps-bench clean bench config $(addprefix test-,$(LAYERS))
all: $(BUILD)/shoal $(TEST_BINS)

$(BUILD)/libshoal.a: $(foreach L,$(LAYERS),$(OBJ_$(L)))
	@mkdir -p $(@D)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^
lib: $(BUILD)/libshoal.a

$(BUILD)/shoal: $(TOOL_OBJ) $(ALL_LIBS)
	$(Q)$(CC) $(LDFLAGS_SAN) -o $@ $(TOOL_OBJ) -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(ALL_LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

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

test: test-fast test-sanitize

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
