# gkv - embeddable key-value store engine with graph semantics.
#
# Targets: all (default), test (C tests, then test-python), python,
# test-python, coverage, bench, fuzz, soak, demo, deps,
# install, uninstall, clean.  Overridable:
#   PREFIX, DESTDIR      install locations
#   CUDA                 auto | yes | no  (gpu/ is built when nvcc is there)
#   SAN                  empty, or e.g. address,undefined
#   V                    1 shows full compiler lines
#   BENCH_ARGS, BENCH_GRAPH_ARGS, BENCH_GRAPH_SCALES, BENCH_PART_SCALE,
#   BENCH_PART_METHODS, BENCH_NET_ARGS, BENCH_LOADER_ARGS, BENCH_GPU_ARGS,
#   BENCH_PY_ARGS
#                        what make bench runs (see doc/BENCHMARKS.md)
#   BENCH_TRAINER_OLD    a build of an older trainer for bench/trainer.sh to
#                        run beside this one (unset: this one alone)
# (Comments sit on their own lines: a trailing "# ..." would leave spaces in
# the value.)
PREFIX  ?= /usr/local
DESTDIR ?=
CUDA    ?= auto
SAN     ?=
V       ?= 0
CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=
NVCC    ?= nvcc

BUILD   := build
# make bench: sampling at these R-MAT scales, partitioning at this one
BENCH_GRAPH_SCALES ?= 20 22
BENCH_PART_SCALE   ?= 22
BENCH_PART_METHODS ?= random range metis
PKGS    := lmdb libxxhash jansson nanomsg libsodium
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -llmdb -lxxhash -ljansson -lnanomsg -lsodium)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

GKV_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
              -fPIC -fvisibility=hidden -MMD -MP -Ikv -Igraph -Inet -Iloader -I. $(PKG_CFLAGS)
ifneq ($(SAN),)
GKV_CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer
LDFLAGS    += -fsanitize=$(SAN)
endif
LIBS := $(PKG_LIBS) -lmetis -lm -lpthread

ifeq ($(V),1)
Q :=
else
Q := @
endif

# ---- CUDA switch: gpu/ sources are built only when nvcc is usable ----------
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
GPU_SRC   := $(wildcard gpu/*.cu)
GPU_CSRC  := $(wildcard gpu/*.c)
ifeq ($(CUDA),yes)
ifneq ($(HAVE_NVCC),1)
$(error CUDA=yes but $(NVCC) was not found; install the CUDA Toolkit or use CUDA=no)
endif
USE_CUDA := 1
else ifeq ($(CUDA),auto)
USE_CUDA := $(HAVE_NVCC)
else ifeq ($(CUDA),no)
USE_CUDA :=
else
$(error CUDA must be auto, yes or no, not '$(CUDA)')
endif
# Device code for Hopper (sm_90: the H100/H200 the GPU work is measured
# on) plus PTX that newer GPUs compile at load time.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
ifeq ($(USE_CUDA)$(if $(GPU_SRC),x,),1x)
GKV_CFLAGS += -DGKV_HAVE_CUDA=1
GPU_OBJ := $(GPU_SRC:%.cu=$(BUILD)/%.o) $(GPU_CSRC:%.c=$(BUILD)/%.o)
# The CUDA runtime's directory, lib64 or else lib of: `make CUDA_HOME=DIR`,
# else the toolkit the nvcc in use lives in (NVCC=/opt/cuda-12.4/bin/nvcc
# links /opt/cuda-12.4/lib64: the runtime of the compiler), else
# $CUDA_HOME from the environment.
ifneq ($(origin CUDA_HOME),command line)
CUDA_HOME := $(or $(shell cd "$$(dirname "$$(command -v $(NVCC))")/.." \
  2>/dev/null && pwd),$(CUDA_HOME))
endif
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib) \
  $(CUDA_HOME)/lib64)
CUDA_LIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart
LIBS    += $(CUDA_LIBS)
GPU_HEADERS := $(wildcard gpu/gkv_*.h)
else
GPU_OBJ :=
CUDA_LIBS :=
GPU_HEADERS :=
endif

# ---- library -----------------------------------------------------------------
LIB_SRC := $(wildcard base/*.c kv/*.c graph/*.c net/*.c loader/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(GPU_OBJ)
HEADERS := gkv.h $(wildcard kv/gkv_*.h graph/gkv_*.h net/gkv_*.h loader/gkv_*.h) \
           $(GPU_HEADERS)

# ---- tools: build/NAME is tools/NAME.c, a program of one file, or
# tools/NAME/*.c, a program of several; tools/common/*.c is shared by them --
TOOL_SRC    := $(wildcard tools/*.c)
TOOL_DIRS   := $(filter-out common,$(patsubst tools/%/,%,$(wildcard tools/*/)))
TOOLS       := $(TOOL_SRC:tools/%.c=$(BUILD)/%) $(TOOL_DIRS:%=$(BUILD)/%)
TCOMMON_SRC := $(wildcard tools/common/*.c)
TCOMMON_OBJ := $(TCOMMON_SRC:%.c=$(BUILD)/%.o)
MANPAGES    := $(wildcard doc/man/*.1)

# ---- tests: test/NAME_test.c is one cmocka program; test/gkvt*.c are helpers --
TEST_SRC    := $(wildcard test/*_test.c)
TESTS       := $(TEST_SRC:test/%.c=$(BUILD)/test/%)
THELP_SRC   := $(filter-out $(TEST_SRC),$(wildcard test/*.c))
THELP_OBJ   := $(THELP_SRC:%.c=$(BUILD)/%.o)

all: $(BUILD)/libgkv.a $(BUILD)/libgkv.so $(TOOLS) $(BUILD)/gkv.pc

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -c -o $@ $<

$(BUILD)/gpu/%.o: gpu/%.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) -O2 $(NVCC_ARCH) -MMD -MP -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wshadow,-Wno-unused-parameter \
	  -Ikv -Igraph -Inet -Iloader -I. -c -o $@ $<

$(BUILD)/libgkv.a: $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libgkv.so: $(LIB_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libgkv.so.0 $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/%: tools/%.c $(TCOMMON_OBJ) $(BUILD)/libgkv.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -Itools/common $(LDFLAGS) -o $@ $< $(TCOMMON_OBJ) $(BUILD)/libgkv.a $(LIBS)

# The benchmark also drives a Redis server through hiredis (the reference
# a user would pick instead).
$(BUILD)/gkv-bench: LIBS += -lhiredis

# tools/common/X.c and tools/NAME/X.c (which also sees its own folder's
# headers); the emulated-GPU build below links the same objects.
$(BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -Itools/common -I$(<D) -c -o $@ $<

# The objects of folder tool $(1)
tool_obj = $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/$(1)/*.c))

# build/NAME from tools/NAME/*.c (one-file tools take the pattern rule above)
define TOOL_DIR_RULE
$$(BUILD)/$(1): $$(call tool_obj,$(1)) $$(TCOMMON_OBJ) $$(BUILD)/libgkv.a
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  LINK    $$@")
	$$(Q)$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$(call tool_obj,$(1)) $$(TCOMMON_OBJ) $$(BUILD)/libgkv.a $$(LIBS)
endef
$(foreach d,$(TOOL_DIRS),$(eval $(call TOOL_DIR_RULE,$(d))))

# ---- the GPU tests without a GPU: gpu/*.cu compiled by g++ against
# gpu/emu/ (a stand-in for the CUDA runtime that runs each kernel's threads
# on the calling thread, with guard pages round device memory) into a
# test-only library. build/test/X_emu_test is test/X_test.c linked to it
# (gpu_test: the kernels, and build/emu/gkv-bench-gpu on a small size;
# net_graph_test: the GPU loader through servers, with
# build/emu/gkv-example-train), so every kernel runs in `make test` on any
# machine that builds gpu/, GPU or not.
ifneq ($(GPU_OBJ),)
EMU_OBJ := $(GPU_SRC:%.cu=$(BUILD)/emu/%.o) $(BUILD)/emu/gpu/emu/emu.o
EMU_CXXFLAGS := -std=c++17 -fno-exceptions -fno-rtti -Wall -Wextra -Wshadow \
  -Wno-unused-parameter -fPIC -fvisibility=hidden -MMD -MP -DGKV_HAVE_CUDA=1 \
  $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer) \
  -Igpu/emu -Ikv -Igraph -Inet -Iloader -I.
EMU_TESTS := $(BUILD)/test/gpu_emu_test $(BUILD)/test/net_graph_emu_test
EMU_TOOLS := $(BUILD)/emu/gkv-example-train $(BUILD)/emu/gkv-bench-gpu

$(BUILD)/emu/gpu/%.o: gpu/%.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $< (emulated GPU)")
	$(Q)$(CXX) $(CFLAGS) $(EMU_CXXFLAGS) -x c++ -c -o $@ $<

$(BUILD)/emu/gpu/emu/emu.o: gpu/emu/emu.cc
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $<")
	$(Q)$(CXX) $(CFLAGS) $(EMU_CXXFLAGS) -c -o $@ $<

$(BUILD)/emu/libgkv-emu.a: $(filter-out $(GPU_SRC:%.cu=$(BUILD)/%.o),$(LIB_OBJ)) $(EMU_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/test/%_emu_test: test/%_test.c $(THELP_OBJ) $(TCOMMON_OBJ) $(BUILD)/emu/libgkv-emu.a $(EMU_TOOLS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -DGKVT_GPU_EMU=1 -Wno-unused-function -Itest -Itools/common $(LDFLAGS) -o $@ $< $(THELP_OBJ) $(TCOMMON_OBJ) $(BUILD)/emu/libgkv-emu.a $(filter-out $(CUDA_LIBS),$(LIBS)) $(CMOCKA_LIBS)

$(BUILD)/emu/%: tools/%.c $(TCOMMON_OBJ) $(BUILD)/emu/libgkv-emu.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@ (emulated GPU)")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -Itools/common $(LDFLAGS) -o $@ $< $(TCOMMON_OBJ) $(BUILD)/emu/libgkv-emu.a $(filter-out $(CUDA_LIBS),$(LIBS))

define TOOL_DIR_EMU_RULE
$$(BUILD)/emu/$(1): $$(call tool_obj,$(1)) $$(TCOMMON_OBJ) $$(BUILD)/emu/libgkv-emu.a
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  LINK    $$@ (emulated GPU)")
	$$(Q)$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$(call tool_obj,$(1)) $$(TCOMMON_OBJ) $$(BUILD)/emu/libgkv-emu.a $$(filter-out $$(CUDA_LIBS),$$(LIBS))
endef
$(foreach d,$(TOOL_DIRS),$(eval $(call TOOL_DIR_EMU_RULE,$(d))))
else
EMU_TESTS :=
EMU_TOOLS :=
endif

$(BUILD)/test/%_test: test/%_test.c $(THELP_OBJ) $(TCOMMON_OBJ) $(BUILD)/libgkv.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) $(GKV_CFLAGS) -Itest -Itools/common $(LDFLAGS) -o $@ $< $(THELP_OBJ) $(TCOMMON_OBJ) $(BUILD)/libgkv.a $(LIBS) $(CMOCKA_LIBS)

# gkv.pc holds PREFIX and the CUDA libraries, which the command line may
# change between runs (`make` then `make install PREFIX=X`): it is remade
# whenever they differ from what the last one was made with, recorded in
# gkv.pc.vars (rewritten only when they change, so nothing else reruns).
PC_VARS := prefix=$(PREFIX) cuda=$(CUDA_LIBS)

$(BUILD)/gkv.pc.vars: FORCE
	@mkdir -p $(BUILD)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(PC_VARS)' ]; then \
	  printf '%s\n' '$(PC_VARS)' > $@; fi

FORCE:
.PHONY: FORCE

# The compiler and flags (SAN, CFLAGS, CUDA, ...) are recorded in
# BUILD/flags the same way, and every object depends on it, so `make` then
# `make SAN=address` rebuilds everything rather than linking old objects to
# new ones. One build directory whose flags file changes, rather than one
# directory per flag set: build/kvctl and friends stay where tests, docs
# and `make install` expect them. The file is compared when the Makefile is
# read (so `make -q` still answers "up to date") and written only when it
# differs; the first time, tools/deps.sh --check stops a build that lacks a
# package with a message naming `make deps`.
BUILD_FLAGS = $(strip cc=$(CC) cxx=$(CXX) nvcc=$(NVCC) $(CFLAGS) $(GKV_CFLAGS) \
  $(EMU_CXXFLAGS) $(NVCC_ARCH) ld=$(LDFLAGS) $(LIBS))
ifneq ($(file <$(BUILD)/flags),$(BUILD_FLAGS))
$(BUILD)/flags: FORCE
endif
$(BUILD)/flags: export GKV_BUILD_FLAGS = $(BUILD_FLAGS)
$(BUILD)/flags:
	@tools/deps.sh --check
	@mkdir -p $(BUILD)
	@printf '%s\n' "$$GKV_BUILD_FLAGS" > $@

$(sort $(LIB_OBJ) $(EMU_OBJ) $(TCOMMON_OBJ) $(THELP_OBJ) \
  $(foreach d,$(TOOL_DIRS),$(call tool_obj,$(d))) \
  $(shell find $(BUILD) -name '*.o' 2>/dev/null)): $(BUILD)/flags

# gkv.pc names the CUDA runtime (-lcudart, for a static link) but not
# the directory this build found it in: that is the build machine's, and
# a user's CUDA may lie elsewhere. Where it is outside the linker's and
# loader's default paths, the user adds -L DIR (and an rpath) of their
# own, as README.md says. A CUDA=no build names no CUDA at all.
PC_CUDA_LIBS := $(if $(CUDA_LIBS),-lcudart)

$(BUILD)/gkv.pc: Makefile kv/gkv_kv.h $(BUILD)/gkv.pc.vars
	@mkdir -p $(BUILD)
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: gkv\nDescription: embeddable key-value store engine with graph semantics\nVersion: %s\nRequires.private: lmdb libxxhash jansson nanomsg libsodium\nLibs: -L$${libdir} -lgkv\nLibs.private: -lmetis -lm -lpthread $(PC_CUDA_LIBS)\nCflags: -I$${includedir}/gkv\n' \
	  '$(PREFIX)' "$$(sed -n 's/^#define GKV_VERSION_STRING "\(.*\)"/\1/p' kv/gkv_kv.h)" > $@

# ---- set-up, tests, benchmarks ------------------------------------------------
deps:
	@tools/deps.sh

# The test run re-enters make so flags are read after deps are installed.
# Tests find the programs they run (kvctl, gkv-server, ...) in GKVT_BUILD.
test: deps
	@$(MAKE) --no-print-directory build-tests
	@GKVT_BUILD=$(abspath $(BUILD)) test/run.sh $(TESTS) $(EMU_TESTS)
	@$(MAKE) --no-print-directory test-python

build-tests: all $(TESTS) $(EMU_TESTS) $(EMU_TOOLS)

bench:
	@tools/deps.sh --bench
	@$(MAKE) --no-print-directory all
	@$(BUILD)/gkv-bench $(BENCH_ARGS)
	@for s in $(BENCH_GRAPH_SCALES); do \
	  $(BUILD)/gkv-bench-graph --scale $$s $(BENCH_GRAPH_ARGS) || exit 1; done
	@BUILD=$(BUILD) DGL_PYTHON=$(PY_VENV)/bin/python tools/bench-partition.sh $(BENCH_PART_SCALE) $(BENCH_PART_METHODS)
	@$(BUILD)/gkv-bench-net $(BENCH_NET_ARGS)
	@$(BUILD)/gkv-bench-loader $(BENCH_LOADER_ARGS)
	@BUILD=$(BUILD) OLD_BUILD=$(BENCH_TRAINER_OLD) bench/trainer.sh
	@if [ -x $(BUILD)/gkv-bench-gpu ]; then $(BUILD)/gkv-bench-gpu $(BENCH_GPU_ARGS); fi
	@$(MAKE) --no-print-directory python
	@$(PY_VENV)/bin/python bench/python_bench.py --build $(BUILD) $(BENCH_PY_ARGS)

# A soak program may run for long (kv_damage_test changes every byte of a
# store, one case at a time): an hour each unless GKVT_TIMEOUT says.
soak: deps
	@$(MAKE) --no-print-directory build-tests
	@GKVT_SOAK=1 GKVT_TIMEOUT=$${GKVT_TIMEOUT:-3600} \
	  GKVT_BUILD=$(abspath $(BUILD)) test/run.sh $(TESTS) $(EMU_TESTS)

# make coverage: the tests built with gcov counters (-O0 --coverage;
# atomic, as threads share them) in COV_BUILD, so build/ keeps its flags,
# and run once (a failing test is reported and the figures still printed;
# install_test is left out: it links a program of its own without
# --coverage to the installed library); then line coverage per layer with
# gcovr (tools/deps.sh --coverage installs it), per file in
# COV_BUILD/coverage.txt. gpu/ counts what the emulated-GPU tests run;
# gpu/emu/ and test/ themselves are left out. Figures: doc/COVERAGE.md.
COV_BUILD ?= build-cov
coverage:
	@tools/deps.sh --coverage
	@$(MAKE) --no-print-directory BUILD=$(COV_BUILD) SAN= LDFLAGS=--coverage \
	  CFLAGS='-O0 -g --coverage -fprofile-update=atomic' build-tests
	@find $(COV_BUILD) -name '*.gcda' -delete; st=0; \
	GKVT_BUILD=$(abspath $(COV_BUILD)) GKVT_TIMEOUT=$${GKVT_TIMEOUT:-900} test/run.sh \
	  $(patsubst $(BUILD)/%,$(COV_BUILD)/%,$(filter-out %/install_test,$(TESTS) $(EMU_TESTS))) \
	  || st=$$?; \
	echo "  GCOVR   $(COV_BUILD)/coverage.txt"; \
	gcovr -r . -j 2 -e 'test/' -e 'gpu/emu/' --txt $(COV_BUILD)/coverage.txt \
	  --csv $(COV_BUILD)/coverage.csv $(COV_BUILD) || exit 1; \
	awk -F, 'NR > 1 { l = $$1; sub("/.*", "", l); n[l] += $$2; c[l] += $$3; \
	    N += $$2; C += $$3 } \
	  END { k = split("base kv graph net loader gpu tools", L, " "); \
	    for (i = 1; i <= k; i++) if (n[L[i]]) printf "  %-6s %5.1f%% of %6d lines\n", \
	      L[i], 100 * c[L[i]] / n[L[i]], n[L[i]]; \
	    printf "  all    %5.1f%% of %6d lines\n", 100 * C / N, N }' $(COV_BUILD)/coverage.csv; \
	exit $$st

fuzz:
	@tools/deps.sh --fuzz
	@d=$(or $(FUZZ_BUILD),build-fuzz); cc=$(or $(FUZZ_CC),clang); \
	fl="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=all -I. -Ikv -Inet $(PKG_CFLAGS)"; \
	src="test/fuzz/wire_fuzz.c net/wire.c kv/util.c base/alloc.c base/clock.c base/err.c"; \
	mkdir -p $$d/corpus && \
	echo "  FUZZ    $$d/wire_fuzz ($(or $(FUZZ_SECONDS),600) s, ASan+UBSan; FUZZ_SECONDS, FUZZ_BUILD, FUZZ_CC)" && \
	$$cc $$fl -fsanitize=fuzzer,address,undefined -o $$d/wire_fuzz $$src $(PKG_LIBS) -lm -lpthread && \
	$$cc $$fl -fsanitize=address,undefined -DWIRE_FUZZ_SEEDS -o $$d/wire_seeds $$src $(PKG_LIBS) -lm -lpthread && \
	$$d/wire_seeds $$d/corpus && \
	$$d/wire_fuzz -max_total_time=$(or $(FUZZ_SECONDS),600) -print_final_stats=1 -artifact_prefix=$$d/ $$d/corpus

demo: deps
	@$(MAKE) --no-print-directory all
	@tools/demo.sh

# ---- Python (python/): the extension over libgkv.a, and its tests ----------------
# python/setup.py links build/libgkv.a with the libraries `make python-libs`
# prints (one list of link flags, this file's). `make python` installs the
# package into a virtual environment of the project's own, PY_VENV, made
# once per requirements file and Python version (the directory name holds
# a hash of both) and kept between runs: pip downloads what
# python/requirements-test.txt names (numpy, pytest, setuptools, wheel) into it
# the first time, nothing after. The package is rebuilt (pip install
# --no-build-isolation: no download) when its sources or libgkv.a change.
# `make test-python` runs its tests (pytest) with the tools in GKVT_BUILD.
PYTHON     ?= python3
PY_REQ     := python/requirements-test.txt
PY_KEY     := $(shell { $(PYTHON) -c 'import sys; print(sys.version)' 2>/dev/null; cat $(PY_REQ) 2>/dev/null; } | sha256sum | cut -c1-12)
PY_VENV    ?= $(HOME)/.cache/gkv-venv/$(PY_KEY)
PY_SRC     := $(wildcard python/src/*.c python/src/*.h python/gkv/*.py) python/setup.py python/pyproject.toml

python-libs:
	@echo $(LIBS)

python-venv:
	@echo $(PY_VENV)

$(PY_VENV)/.requirements: $(PY_REQ)
	@echo "  VENV    $(PY_VENV) (pip install -r $(PY_REQ))"
	$(Q)$(PYTHON) -m venv $(PY_VENV)
	$(Q)$(PY_VENV)/bin/pip install -q -r $(PY_REQ)
	$(Q)cp $(PY_REQ) $@

# The torch layer (python/requirements-torch.txt: torch, torch_geometric;
# about 3.3 GB from PyPI the first time, README.md "Python") goes into the
# same environment; PY_TORCH=no leaves it out (the torch tests then skip).
PY_TORCH     ?= yes
PY_REQ_TORCH := python/requirements-torch.txt

$(PY_VENV)/.requirements-torch: $(PY_REQ_TORCH) $(PY_VENV)/.requirements
	@echo "  VENV    $(PY_VENV) (pip install -r $(PY_REQ_TORCH): torch, ~3.3 GB the first time)"
	$(Q)$(PY_VENV)/bin/pip install -q -r $(PY_REQ) -r $(PY_REQ_TORCH)
	$(Q)cp $(PY_REQ_TORCH) $@

# The package goes in after the torch layer (two pip runs in one
# environment at once, as make -j would start them, could break it).
PY_TORCH_LAYER := $(if $(filter yes,$(PY_TORCH)),$(PY_VENV)/.requirements-torch)

$(PY_VENV)/.gkv-installed: $(PY_VENV)/.requirements $(BUILD)/libgkv.a $(PY_SRC) | $(PY_TORCH_LAYER)
	@echo "  PIP     python/ into $(PY_VENV)"
	$(Q)rm -rf python/build python/gkv.egg-info
	$(Q)GKV_BUILD=$(abspath $(BUILD)) $(PY_VENV)/bin/pip install -q --no-build-isolation --no-deps ./python
	$(Q)rm -rf python/build python/gkv.egg-info
	$(Q)touch $@

python: $(PY_VENV)/.gkv-installed

test-python: all python
	@cd python/tests && GKVT_BUILD=$(abspath $(BUILD)) $(PY_VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

.PHONY: python python-libs python-venv test-python

# ---- install -------------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/include/gkv $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/libgkv.a $(DESTDIR)$(PREFIX)/lib/libgkv.a
	install -m 755 $(BUILD)/libgkv.so $(DESTDIR)$(PREFIX)/lib/libgkv.so.0
	ln -sf libgkv.so.0 $(DESTDIR)$(PREFIX)/lib/libgkv.so
	install -m 644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/gkv/
	install -m 644 $(BUILD)/gkv.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/gkv.pc
	$(if $(TOOLS),install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(MANPAGES),install -m 644 $(MANPAGES) $(DESTDIR)$(PREFIX)/share/man/man1/)

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libgkv.a $(DESTDIR)$(PREFIX)/lib/libgkv.so \
	  $(DESTDIR)$(PREFIX)/lib/libgkv.so.0 $(DESTDIR)$(PREFIX)/lib/pkgconfig/gkv.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/gkv
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(TOOLS)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(MANPAGES)))

clean:
	rm -rf $(BUILD) $(COV_BUILD)

.PHONY: all deps test build-tests coverage bench soak fuzz demo install uninstall clean

# (build/NAME.d of a tool that has since become a folder would name the
# gone tools/NAME.c as a prerequisite: skipped)
-include $(filter-out $(TOOL_DIRS:%=$(BUILD)/%.d),$(shell find $(BUILD) -name '*.d' 2>/dev/null))

# tools/common objects and the emulated-GPU tools the tests run are kept
# (not intermediate files, which make would delete after the build)
.SECONDARY: $(TCOMMON_OBJ) $(THELP_OBJ) $(EMU_TOOLS)
