# Makefile -- builds the attnext SQLite extension (attnext.so), its tests and its demo.
#   make          build attnext.so
#   make demo     train and query a model on the bundled headlines (data/)
#   make test     every test that can run on this machine (says what it could not run)
#   make check    the one-minute loop: C unit and golden tests, the SQL scripts (see CHECK_TESTS)
#   make install  copy attnext.so where `.load attnext` finds it
# Debian packages needed: see `make deps` (installs them when run as root).

CC      ?= cc
# PLATFORM=linux-arm64, windows-x64 or wasm: a cross build (make test-linux-arm64,
# test-windows-x64, test-wasm: its tests under qemu, wine or node); make PLATFORM=linux-arm64
# packages, PLATFORM=windows-x64 packages: its packages (section "packages").
# PLATFORM=linux-arm64: a cross build for Linux on arm64 (Graviton, Raspberry Pi, Docker on Apple
# Silicon) with Debian's aarch64-linux-gnu-gcc, without BLAS (no arm64 OpenBLAS to link), in
# build/linux-arm64/ (its attnext.so, tests, and the arm64 sqlite3 shell its SQL tests run,
# unpacked from Debian's packages: tests/platform_sysroot.sh). `make PLATFORM=linux-arm64 check`
# runs its C tests and SQL suite under qemu-aarch64 (QEMU_RUN); `make test-linux-arm64` both.
PLATFORM ?=
ifeq ($(PLATFORM),linux-arm64)
CC       := aarch64-linux-gnu-gcc
BLAS     := none
BUILD    ?= build/linux-arm64
SYSROOT  := $(CURDIR)/$(BUILD)/sysroot
QEMU_RUN := qemu-aarch64 -L $(SYSROOT)
SQLITE3  := $(QEMU_RUN) $(SYSROOT)/usr/bin/sqlite3
else ifeq ($(PLATFORM),windows-x64)
# PLATFORM=windows-x64: attnext.dll for 64-bit Windows with Debian's mingw-w64 (the posix
# threads flavour: winpthreads, linked in statically with libgcc, so the DLL needs nothing but
# Windows), without BLAS; SQLite's headers copied from this machine's libsqlite3-dev. Its C
# tests and SQL scripts run under wine (make test-windows-x64), with a sqlite3.exe built from
# an amalgamation by tests/platform_sysroot.sh.
CC       := x86_64-w64-mingw32-gcc-posix
BLAS     := none
BUILD    ?= build/windows-x64
SYSROOT  := $(CURDIR)/$(BUILD)/sysroot
WIN_DEFS := -D__USE_MINGW_ANSI_STDIO=1 -I$(BUILD)/include
QEMU_RUN := env WINEPREFIX=$(SYSROOT)/wine WINEDEBUG=-all wine
SQLITE3  := $(SYSROOT)/sqlite3
else ifeq ($(PLATFORM),wasm)
# PLATFORM=wasm: WebAssembly for Node, with Debian's emscripten (3.1.6), in build/wasm/: a
# sqlite3 shell (sqlite3.js, run by node; build/wasm/sqlite3 runs it) built from SQLite 3.52.0's
# amalgamation (tests/platform_sysroot.sh) with attnext linked in and registered on every
# connection (sqlite3_auto_extension: ext/wasm/shell_init.c, where `.load ./attnext` succeeds
# and does nothing), and libattnext.a, attnext's objects to link into another WebAssembly
# SQLite. WebAssembly has no shared libraries; so no attnext.so (build/wasm/attnext.so is a link
# to libattnext.a, for the tests, which look for $$ATTNEXT.so), no CUDA, no BLAS (engine/gemm.c
# with WASM SIMD128) and no threads: built without -pthread, the engine runs its work on the
# calling thread (pthread_create fails; engine/pool.c then runs every task itself). Every program
# is one .js file with its .wasm inside (SINGLE_FILE: node 18+ would otherwise try to fetch() the
# .wasm beside it), with the machine's files as they are (NODERAWFS). `make PLATFORM=wasm check`
# (or make test-wasm) runs the C tests and the SQL suite in node.
CC       := emcc
BLAS     := none
BUILD    ?= build/wasm
ARCH     ?= -msimd128
CFLAGS   ?=
THREADS  :=
# Debian's emcc runs its JavaScript tools with node, which finds their modules (acorn) there
export NODE_PATH ?= /usr/share/nodejs
WASM_SQLITE := $(BUILD)/sysroot/sqlite
WASM_DEFS   := -I$(WASM_SQLITE)
WASM_LDFLAGS := -sNODERAWFS=1 -sALLOW_MEMORY_GROWTH=1 -sEXIT_RUNTIME=1 -sSINGLE_FILE=1 \
  --post-js ext/wasm/node_streams.js
QEMU_RUN := node
SQLITE3  := $(CURDIR)/$(BUILD)/sqlite3
PLATFORM_ALL := $(BUILD)/sqlite3
else ifneq ($(PLATFORM),)
$(error PLATFORM=$(PLATFORM): unknown (linux-arm64, windows-x64, wasm))
endif
# GCC's -O2 vectorises only loops whose trip count it knows (-fvect-cost-model=very-cheap), which
# left the element-wise kernels of engine/backend_cpu.c scalar; the dynamic model vectorises them
# (training -10%, one-row inference -4%; results unchanged: no reduction is reordered). Only
# where the compiler knows the flag (clang does not).
# Not asked of emcc (clang: it does not know it), whose every start takes seconds.
VECT_COST := $(if $(filter wasm,$(PLATFORM)),,$(shell $(CC) -fvect-cost-model=dynamic -x c -c /dev/null -o /dev/null 2>/dev/null && echo -fvect-cost-model=dynamic))
# Portable by default: the library is compiled for x86-64-v2 (SSE4.2: any x86-64 CPU
# since ~2009), and the CPU backend's kernels (engine/backend_cpu.c: the hot loops) once more per
# CPU_LEVELS, x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), one picked at run time from CPUID
# (attn_version() says which); OpenBLAS picks its own kernels. NATIVE=1: everything for this
# machine's CPU (-march=native), no dispatch; the binary may then die with SIGILL elsewhere.
# Other architectures: the compiler's default target, no dispatch.
MACHINE := $(if $(filter wasm,$(PLATFORM)),wasm32-unknown-emscripten,$(shell $(CC) -dumpmachine 2>/dev/null))
ifeq ($(NATIVE),1)
ARCH       ?= -march=native
CPU_DEFS   := -DNN_CPU_NATIVE
# its objects apart from the portable build's
BUILD      ?= build/native
else ifneq ($(filter x86_64-%,$(MACHINE)),)
ARCH       ?= -march=x86-64-v2 -mtune=generic
CPU_LEVELS := v3 v4
CPU_DEFS   := -DNN_CPU_DISPATCH
endif
OPT     ?= -O2 $(ARCH) $(VECT_COST)
CFLAGS  ?= -g
THREADS ?= -pthread
CFLAGS  += $(OPT) -fopenmp-simd -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE $(THREADS)
CFLAGS  += $(if $(filter windows-%,$(PLATFORM)),$(WIN_DEFS),$(if $(WASM_DEFS),$(WASM_DEFS),-fPIC))
# OpenBLAS: Debian's default (pthread) build. Not the serial build: compiled without
# USE_LOCKING, it is not safe to call from two threads at once (the training shards do), which
# made two-thread training nondeterministic. Our own threads split the work; the engine asks
# OpenBLAS for one thread per call (engine/pool.c).
# BLAS=none: no BLAS library at all, every product on the engine's own (engine/gemm.c), for
# targets without an OpenBLAS (make check-blas-none tests it here). Its objects and its
# attnext.so go to build/blas-none/, apart from the default build's.
BLAS ?= openblas
ifeq ($(BLAS),none)
BLAS_CFLAGS := -DNN_BLAS_NONE
BLAS_LIBS   :=
BUILD       ?= build/blas-none
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
endif
ifeq ($(PLATFORM),windows-x64)
LDLIBS  += -static -pthread
else ifeq ($(PLATFORM),wasm)
LDLIBS  += -lm $(WASM_LDFLAGS)
else
LDLIBS  += $(BLAS_LIBS) -lm -ldl -pthread
endif
PYTHON  ?= /usr/bin/python3
SQLITE3 ?= sqlite3
BUILD   ?= build

ENGINE_SRC := $(sort $(wildcard engine/*.c))
EXT_SRC    := $(sort $(wildcard ext/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o) $(CPU_LEVELS:%=$(BUILD)/engine/backend_cpu_%.o) \
  $(CPU_LEVELS:%=$(BUILD)/engine/gemm_%.o)
# The extension: ./attnext.so from the default build, $(BUILD)/attnext.so from any other
# (BLAS=none), so that one never overwrites the other.
SO         := $(if $(filter none,$(BLAS)),$(BUILD)/attnext.so,attnext.so)
ifeq ($(PLATFORM),windows-x64)
SO         := $(BUILD)/attnext.dll
else ifeq ($(PLATFORM),wasm)
SO         := $(BUILD)/attnext.so
endif
EXT_OBJ    := $(EXT_SRC:%.c=$(BUILD)/%.o)
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# The -march=native build beside the portable one (tests/test_portable.sh, make bench-portable).
NATIVE_SO  := $(if $(CPU_LEVELS),$(BUILD)/native/attnext.so)
FAKE_STALE := $(addprefix $(BUILD)/tests/fake_device_,stale_abi.so stale_size.so no_abi.so)
TOOL_SRC   := $(sort $(wildcard tests/tool_*.c tests/bench/tool_*.c))
TOOL_BIN   := $(TOOL_SRC:%.c=$(BUILD)/%)
# The training jobs of a dqlite node (ext/node/: attn_jobs, attn_cancel, attn_job_commit, the
# job runner): linked into build/attnext-node and the tests' module below, never into attnext.so.
NODE_JOB_SRC := ext/node/attn_jobs.c ext/node/attn_job_runner.c
NODE_JOB_OBJ := $(NODE_JOB_SRC:%.c=$(BUILD)/%.o)
# The tests' module of those functions (tests/attnext_jobs_test.c), native builds only (no node
# elsewhere).
JOBS_TEST_SO := $(if $(PLATFORM),,$(BUILD)/tests/attnext_jobs_test.so)
HEADERS    := $(wildcard engine/*.h ext/*.h ext/node/*.h tests/*.h)
# Each compile writes the headers its source includes to a .d file next to its output (-MMD; -MP
# adds an empty rule per header so that a deleted header does not stop make); the .d files are
# included at the end, so a header change rebuilds only what includes it. An output whose .d file
# is missing (built before this scheme) is rebuilt once: the .d is a prerequisite with an empty
# rule.
DEPFLAGS   := -MMD -MP
# emcc writes the .d file after the output: the output is touched after it (DEPDONE), or the next
# make would find it older than its .d and build it again. Its programs (.js, run by node) are
# not made executable, and tests/run_all.sh takes the executables of build/tests as the C tests.
DEPDONE     = $(if $(filter wasm,$(PLATFORM)),touch $@)
PROGDONE    = $(if $(filter wasm,$(PLATFORM)),touch $@ && chmod +x $@)
# The compiler and flags of the last build in $(BUILD): every object depends on this stamp, which
# is rewritten only when they change, so a change of flags (NATIVE=1 in the same BUILD, a pull
# that changes the Makefile's flags) rebuilds everything instead of linking stale objects.
FLAGS_STAMP := $(BUILD)/flags.stamp
FLAGS_NOW   := $(CC) $(CFLAGS) $(CPU_DEFS) $(BLAS_CFLAGS)

# The CUDA backend is built when nvcc is found (see engine/*.cu); otherwise it is skipped.
NVCC ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
CUDA_SRC := $(sort $(wildcard engine/*.cu))
# attnext_cuda.so: its own shared object next to attnext.so, which opens it with dlopen at the
# first model with device "auto" or "cuda" (engine/backend_load.c); attnext.so never needs nvcc
# or the CUDA runtime. sm_80 (A100), sm_90 (H100, H200) and PTX for newer GPUs.
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH  ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCC_FLAGS ?= -O3 -std=c++17 --fmad=false -Xcompiler -fPIC,-Wall $(CUDA_ARCH)
CUDA_SO    := $(if $(PLATFORM),,$(if $(NVCC),$(if $(CUDA_SRC),attnext_cuda.so)))

.PHONY: all deps deps-build demo test check format format-check test-asan bench install uninstall \
  clean fuzz
all: $(SO) $(CUDA_SO) $(PLATFORM_ALL)

$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/%.d $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) -Iengine -c $< -o $@
	@$(DEPDONE)

# The engine's symbols stay inside attnext.so: hidden visibility for the engine, and a version
# script that exports the entry point alone (the ext/ objects keep default visibility for it).
$(ENGINE_OBJ): CFLAGS += -fvisibility=hidden
$(BUILD)/engine/backend_cpu.o: CFLAGS += $(CPU_DEFS)
$(BUILD)/engine/backend_cpu_%.o: engine/backend_cpu.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -march=x86-64-$* -mtune=generic -DNN_CPU_TABLE=nn_backend_cpu_$* \
	  -DNN_CPU_LEVEL=$* $(BLAS_CFLAGS) -Iengine -c $< -o $@
# the products of BLAS=none at the same level as the kernels that call them (engine/gemm.h)
$(BUILD)/engine/gemm_%.o: engine/gemm.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -march=x86-64-$* -mtune=generic -DNN_CPU_LEVEL=$* -Iengine -c $< -o $@
$(NATIVE_SO): $(ENGINE_SRC) $(EXT_SRC) $(HEADERS)
	$(MAKE) NATIVE=1 BUILD=$(BUILD)/native $@
EXPORTS := $(BUILD)/attnext.map
LDEXPORT = -Wl,--version-script=$(EXPORTS)
$(EXPORTS):
	@mkdir -p $(dir $@)
	printf '{\n  global: sqlite3_attnext_init;\n  local: *;\n};\n' > $@

ifeq ($(PLATFORM),windows-x64)
# Only sqlite3_attnext_init is exported: the one __declspec(dllexport) (ext/attnext.c).
$(SO): $(EXT_OBJ) $(BUILD)/libnn.a
	$(CC) $(CFLAGS) -shared -o $@ $(EXT_OBJ) $(BUILD)/libnn.a $(LDLIBS)
$(BUILD)/include/sqlite3ext.h: /usr/include/sqlite3ext.h /usr/include/sqlite3.h
	@mkdir -p $(dir $@)
	cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h $(dir $@)
$(EXT_OBJ): | $(BUILD)/include/sqlite3ext.h
# attnext.so beside it for the tests, which check $$ATTNEXT.so and `.load` $$ATTNEXT (SQLite
# adds .dll)
$(BUILD)/attnext.so: $(SO)
	ln -sf attnext.dll $@
endif

ifeq ($(PLATFORM),wasm)
# The amalgamation (tests/platform_sysroot.sh); the extension's objects use its headers.
$(WASM_SQLITE)/sqlite3.c: tests/platform_sysroot.sh
	sh tests/platform_sysroot.sh wasm $(BUILD)/sysroot
$(WASM_SQLITE)/shell.c: $(WASM_SQLITE)/sqlite3.c
	@test -f $@
$(EXT_OBJ) $(BUILD)/ext/wasm/shell_init.o: | $(WASM_SQLITE)/sqlite3.c
$(BUILD)/libattnext.a: $(EXT_OBJ) $(ENGINE_OBJ)
	@rm -f $@
	emar rcs $@ $^
$(SO): $(BUILD)/libattnext.a
	ln -sf libattnext.a $@
# SQLite's calls to dlopen and its kin go to ext/wasm/shell_init.c's (see there), the shell
# calls its start-up hook; the same options as the Windows shell (tests/platform_sysroot.sh).
WASM_SQLITE_DEFS := -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_COLUMN_METADATA \
  -Ddlopen=attnext_wasm_dlopen -Ddlsym=attnext_wasm_dlsym -Ddlclose=attnext_wasm_dlclose \
  -Ddlerror=attnext_wasm_dlerror -DSQLITE_SHELL_INIT_PROC=attnext_wasm_shell_init
$(BUILD)/sqlite/%.o: $(WASM_SQLITE)/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -w $(WASM_SQLITE_DEFS) -I$(WASM_SQLITE) -c $< -o $@
WASM_SHELL_OBJ := $(BUILD)/sqlite/sqlite3.o $(BUILD)/sqlite/shell.o $(BUILD)/ext/wasm/shell_init.o
$(BUILD)/sqlite3.js: $(WASM_SHELL_OBJ) $(BUILD)/libattnext.a ext/wasm/node_streams.js
	$(CC) $(CFLAGS) -o $@ $(WASM_SHELL_OBJ) $(BUILD)/libattnext.a $(LDLIBS)
$(TEST_BIN): ext/wasm/node_streams.js | $(WASM_SQLITE)/sqlite3.c
# the shell as a command, as the tests run one
$(BUILD)/sqlite3: $(BUILD)/sqlite3.js
	printf '#!/bin/sh\n# SQLite 3.52.0 with attnext built in, in WebAssembly (make PLATFORM=wasm)\nexec node "%s" "$$@"\n' \
	  "$(CURDIR)/$<" > $@
	chmod +x $@
# make PLATFORM=wasm web: the browser page (ext/wasm/web/) in $(WEB): attnext-web.js, SQLite and
# attnext as one script with the .wasm inside (SINGLE_FILE: the page works from file://, where a
# browser fetches nothing), whose createAttnext() gives ccall/cwrap on ext/wasm/web_api.c's two
# entry points; attnext-worker.js, the same wrapped in one function with the page's worker
# (ext/wasm/web/worker.js), which the page starts as a Web Worker from its own source; the
# bundled headlines (data/headlines.csv) as demo_rows.js; index.html and app.js.
WEB      := $(BUILD)/web
WEB_OBJ  := $(BUILD)/sqlite/sqlite3.o $(BUILD)/ext/wasm/shell_init.o $(BUILD)/ext/wasm/web_api.o
WEB_LDFLAGS := -lm -sMODULARIZE=1 -sEXPORT_NAME=createAttnext -sENVIRONMENT=web,worker \
  -sSINGLE_FILE=1 -sALLOW_MEMORY_GROWTH=1 \
  -sEXPORTED_FUNCTIONS=_attnext_web_open,_attnext_web_exec \
  -sEXPORTED_RUNTIME_METHODS=ccall,cwrap
WEB_PAGE := $(WEB)/index.html $(WEB)/app.js $(WEB)/attnext-web.js $(WEB)/attnext-worker.js \
  $(WEB)/demo_rows.js
.PHONY: web
web: $(WEB_PAGE)
$(BUILD)/ext/wasm/web_api.o: | $(WASM_SQLITE)/sqlite3.c
$(WEB)/attnext-web.js: $(WEB_OBJ) $(BUILD)/libattnext.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(WEB_OBJ) $(BUILD)/libattnext.a $(WEB_LDFLAGS)
$(WEB)/attnext-worker.js: $(WEB)/attnext-web.js ext/wasm/web/worker.js
	{ echo '// attnext-worker.js -- make PLATFORM=wasm web: attnext-web.js and ext/wasm/web/worker.js'; \
	  echo 'function attnextWorkerMain(scope) {'; cat $^; echo '}'; \
	  echo "if (typeof WorkerGlobalScope !== 'undefined' && self instanceof WorkerGlobalScope) attnextWorkerMain(self);"; \
	} > $@
$(WEB)/demo_rows.js: data/headlines.csv
	@mkdir -p $(dir $@)
	$(PYTHON) -c 'import json, sys; print("// data/headlines.csv (make PLATFORM=wasm web)\nvar ATTNEXT_DEMO_CSV = " + json.dumps(open(sys.argv[1], encoding="utf-8").read()) + ";")' $< > $@
$(WEB)/%: ext/wasm/web/%
	@mkdir -p $(dir $@)
	cp $< $@
endif

$(BUILD)/libnn.a: $(ENGINE_OBJ)
	@rm -f $@
	$(if $(filter wasm,$(PLATFORM)),emar,ar) rcs $@ $^

attnext.so: $(EXT_OBJ) $(BUILD)/libnn.a $(EXPORTS)
	$(CC) $(CFLAGS) -shared $(LDEXPORT) -o $@ $(EXT_OBJ) $(BUILD)/libnn.a $(LDLIBS)

attnext_cuda.so: $(CUDA_SRC) engine/backend.h
	$(NVCC) $(NVCC_FLAGS) -shared -Iengine $(CUDA_SRC) -o $@ -ldl \
	  -Xlinker -rpath,'$$ORIGIN' -Xlinker -rpath,$(CUDA_HOME)/lib64

$(BUILD)/tests/bench/%: tests/bench/%.c $(BUILD)/libnn.a $(BUILD)/tests/bench/%.d $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) -Iengine -Itests $< $(BUILD)/libnn.a -o $@ $(LDLIBS)
	@$(PROGDONE)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libnn.a $(BUILD)/tests/%.d $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) -Iengine -Itests $< $(BUILD)/libnn.a -o $@ $(LDLIBS)
	@$(PROGDONE)

deps:
	@sh tests/deps.sh

deps-build:
	@sh tests/deps.sh build

# The tour of sql/demo.sql on the bundled headlines (data/), in a fresh demo.db.
demo: deps-build attnext.so
	@rm -f demo.db
	$(SQLITE3) -bail demo.db < sql/demo.sql

# TEST_JOBS tests at a time (make test, make test-asan): the machine's cores, at most 4; the tests
# that measure time run alone after them (ALONE in tests/run_all.sh). TEST_JOBS=1: one at a time.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
test: deps attnext.so $(CUDA_SO) $(TEST_BIN) $(TOOL_BIN) $(FAKE_STALE) $(NATIVE_SO) $(JOBS_TEST_SO) \
  packages web-for-test
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SQLITE3=$(SQLITE3) sh tests/run_all.sh -j $(TEST_JOBS)
# The browser page for tests/test_browser.py and its npm package (tests/test_package_wasm.sh):
# make PLATFORM=wasm web in $(BUILD)/wasm (its library and SQLite, not its shell or C tests:
# ~4 min on 2 cores from nothing), by a second make once deps has installed emscripten.
.PHONY: web-for-test
web-for-test: deps
	@$(if $(PLATFORM),,$(MAKE) --no-print-directory npm-wasm)

# The loop to run while changing code (under a minute on 2 cores, built): the C unit and golden
# tests (not test_faults_oom: 11,000 runs with an injected failure, 7 s), the SQL scripts of
# tests/sql/, the hostile SQL, ext/REFERENCE.md against the registered functions, the documents'
# links and README's tour (test_docs), the exported symbols; CHECK_JOBS at a time. It installs
# nothing (make deps does). One test: sh tests/run_all.sh '^test_sql$'.
CHECK_C     := $(filter-out test_faults_oom,$(TEST_SRC:tests/%.c=%))
CHECK_TESTS := $(CHECK_C) test_sql test_hostile_sql test_readme test_docs test_schema_uses \
  test_exports
CHECK_JOBS  ?= 2
# A cross build's tests: its C tests and the SQL scripts, each through qemu (the target's sqlite3
# shell from tests/platform_sysroot.sh); test_docs and test_schema_uses load the extension into
# this machine's Python, which cannot load the target's; test_cuda's emulated device is built
# for this machine. Same N passed, N failed line.
# The packages of a cross build (make PLATFORM=... packages) are checked there too:
# test_package_contents (their contents and metadata, and their extension loaded into the
# platform's shell: 30 to 50 s for arm64 under qemu, 6 to 30 s for Windows under wine, on 2 cores).
ifeq ($(PLATFORM),linux-arm64)
CHECK_C     := $(filter-out test_cuda,$(CHECK_C))
CHECK_TESTS := $(CHECK_C) test_sql test_hostile_sql test_readme test_exports test_package_contents
PLATFORM_SHELL := $(BUILD)/sysroot/.packages
PLATFORM_PACKAGES := packages
$(PLATFORM_SHELL): tests/platform_sysroot.sh
	sh tests/platform_sysroot.sh arm64 $(BUILD)/sysroot
else ifeq ($(PLATFORM),windows-x64)
# Not there: test_exports (ELF symbols: the DLL's one export is ext/attnext.c's dllexport),
# test_locale (glibc's locales, built in a LOCPATH), test_resource_bounds (setrlimit),
# test_device_plumbing (its fake device is opened with dlopen).
CHECK_C     := $(filter-out test_cuda test_locale test_resource_bounds test_device_plumbing,$(CHECK_C))
CHECK_TESTS := $(CHECK_C) test_sql test_hostile_sql test_readme test_package_contents
PLATFORM_SHELL := $(BUILD)/sysroot/.sqlite3 $(BUILD)/attnext.so
PLATFORM_PACKAGES := packages
$(BUILD)/sysroot/.sqlite3: tests/platform_sysroot.sh
	sh tests/platform_sysroot.sh windows-x64 $(BUILD)/sysroot
else ifeq ($(PLATFORM),wasm)
# Not there: test_exports (ELF symbols), test_device_plumbing (its fake device is a shared
# library), test_cuda, test_locale (Emscripten's C library, musl, has '.' as the decimal point
# in every locale: there is no other locale's number to read).
CHECK_C     := $(filter-out test_cuda test_device_plumbing test_locale,$(CHECK_C))
CHECK_TESTS := $(CHECK_C) test_sql test_hostile_sql test_readme
PLATFORM_SHELL := $(BUILD)/sqlite3
endif
check: $(SO) $(CHECK_C:%=$(BUILD)/tests/%) $(JOBS_TEST_SO) $(PLATFORM_SHELL) $(PLATFORM_PACKAGES)
	@BUILD=$(BUILD) ATTNEXT=./$(basename $(SO)) PYTHON=$(PYTHON) SQLITE3="$(SQLITE3)" \
	  EMULATOR="$(QEMU_RUN)" PLATFORM=$(PLATFORM) sh tests/run_all.sh -j $(CHECK_JOBS) $(CHECK_TESTS:%='^%$$')

.PHONY: test-linux-arm64 test-windows-x64 test-wasm
test-linux-arm64:
	@sh tests/deps.sh cross
	@$(MAKE) --no-print-directory PLATFORM=linux-arm64 check
test-windows-x64:
	@sh tests/deps.sh cross
	@$(MAKE) --no-print-directory PLATFORM=windows-x64 check
test-wasm:
	@sh tests/deps.sh wasm
	@$(MAKE) --no-print-directory PLATFORM=wasm check

# make platforms: every platform's artifacts from one command (the cross tools installed on
# demand): the native packages (build/dist/), linux-arm64's and windows-x64's
# (build/<platform>/dist/) and the browser build's npm package (build/dist/attnext-wasm-*.tgz).
# make test-platforms: the three cross builds' tests one after the other (8 minutes on 2 cores
# once make platforms has built them, emulated), then a line per platform with its `N passed,
# N failed`; it fails when one failed. Not in make test: the emulators' time would take CI past its 30 minutes.
.PHONY: platforms test-platforms
platforms: packages
	@sh tests/deps.sh cross
	@$(MAKE) --no-print-directory $(SUBMAKE_J) PLATFORM=linux-arm64 packages
	@$(MAKE) --no-print-directory $(SUBMAKE_J) PLATFORM=windows-x64 packages
	@sh tests/deps.sh wasm
	@$(MAKE) --no-print-directory npm-wasm
	@ls -1 build/dist/* build/linux-arm64/dist/* build/windows-x64/dist/*
test-platforms:
	@mkdir -p $(BUILD); : > $(BUILD)/platforms.txt; \
	for p in linux-arm64 windows-x64 wasm; do \
	  echo "== test-$$p"; \
	  if $(MAKE) --no-print-directory test-$$p > $(BUILD)/test-$$p.log 2>&1; then s=ok; else s=FAILED; fi; \
	  cat $(BUILD)/test-$$p.log; \
	  echo "$$p: $$(grep -E '^[0-9]+ passed.* [0-9]+ failed' $(BUILD)/test-$$p.log | tail -1) ($$s)" \
	    >> $(BUILD)/platforms.txt; \
	done; \
	echo "== every platform"; cat $(BUILD)/platforms.txt; ! grep -q FAILED $(BUILD)/platforms.txt

# make check on the BLAS-free build (BLAS=none, in build/blas-none/), and two trainings with 1
# and 2 threads that must give the same bits (test_determinism).
.PHONY: check-blas-none
check-blas-none:
	@$(MAKE) --no-print-directory BLAS=none check CHECK_TESTS="$(CHECK_TESTS) test_determinism"

# The house style of the C code is .clang-format (LLVM, 100 columns, short if/loop/case on one
# line), for every C, header and CUDA file of the tree but the generated tables (their
# generators write them: engine/gen_unicode_tables.py, tests/gen_adam_reference.py):
#   make format         reformats them in place
#   make format-check   the same, changing nothing: names each file and line that would move
# Needs clang-format (make deps).
FORMAT_SKIP  := engine/unicode_tables.c tests/adam_reference.h
FORMAT_FILES  = $(filter-out $(FORMAT_SKIP),$(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null))
FORMAT_READY = command -v clang-format >/dev/null 2>&1 || \
	  { echo "$@: clang-format not found (make deps installs it)"; exit 1; }
.PHONY: format format-check
format:
	@$(FORMAT_READY); clang-format -i $(FORMAT_FILES)
format-check:
	@$(FORMAT_READY); out=$$(clang-format --dry-run $(FORMAT_FILES) 2>&1); case "$$out" in \
	  '') echo "$@: $(words $(FORMAT_FILES)) C files follow .clang-format" ;; \
	  *) printf '%s\n' "$$out" | head -60; echo "$@: the lines above differ from .clang-format (make format)"; \
	    exit 1 ;; esac

# The benchmark against the PyTorch lesson (tests/bench/bench.py; ~20 min on 2 cores).
# BENCH_ARGS=--quick for a short run.
# Then the portable build against NATIVE=1, alternating (tests/bench/portable_bench.py).
bench: attnext.so $(NATIVE_SO)
	$(PYTHON) tests/bench/bench.py $(BENCH_ARGS)
	$(PYTHON) tests/bench/bench.py --load 1 --no-scaling $(BENCH_ARGS)
	$(PYTHON) tests/bench/memory_bench.py --json tests/bench/memory_results.json
	$(PYTHON) tests/bench/portable_bench.py --native $(BUILD)/native/attnext $(PORTABLE_BENCH_ARGS)
# Accuracy against fastText and TF-IDF + logistic regression on three corpora, with the
# default recipe's ablations (tests/bench/quality.py; ~30 min on 2 cores). QUALITY_ARGS=--quick
# for a smoke run. The two Debian corpora are built here from apt's lists and WordNet.
.PHONY: bench-quality
bench-quality: attnext.so data/corpora/SOURCES.txt
	$(PYTHON) tests/bench/quality.py $(QUALITY_ARGS)
# Few labels: the learning curve (200 rows to all, with and without the rest of the training
# split as unlabelled rows) against TF-IDF + LR, fastText, fastText with skip-gram vectors and
# self-training (tests/bench/learning_curve.py; CURVE_ARGS=--corpora ag --sizes 200,500 for a
# short run), and attn_uncertain's labelling loop against random labels
# (tests/bench/active_learning.py).
.PHONY: bench-curve bench-active
bench-curve: attnext.so data/corpora/SOURCES.txt
	$(PYTHON) tests/bench/learning_curve.py $(CURVE_ARGS)
bench-active: attnext.so data/corpora/SOURCES.txt
	$(PYTHON) tests/bench/active_learning.py $(ACTIVE_ARGS)
data/corpora/SOURCES.txt: data/make_corpora.py
	$(PYTHON) data/make_corpora.py data/corpora
.PHONY: bench-portable
bench-portable: attnext.so $(NATIVE_SO)
	$(PYTHON) tests/bench/portable_bench.py --native $(BUILD)/native/attnext $(PORTABLE_BENCH_ARGS)

# Installed where dlopen() looks for a bare name, so that `.load attnext` works from any
# directory: dlopen does not search /usr/local/lib for a file not named lib*.so.
LIBDIR ?= /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)
install: attnext.so
	install -d $(DESTDIR)$(LIBDIR)
	install -m 0755 attnext.so $(DESTDIR)$(LIBDIR)/attnext.so
	$(if $(wildcard attnext_cuda.so),install -m 0755 attnext_cuda.so $(DESTDIR)$(LIBDIR)/attnext_cuda.so)
	@echo "installed $(LIBDIR)/attnext.so: in sqlite3, .load attnext"

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/attnext.so $(DESTDIR)$(LIBDIR)/attnext_cuda.so

clean:
	rm -rf $(BUILD) attnext.so attnext_cuda.so demo.db

# ---------------------------------------------------------------- packages
#   make packages   the packages of the platform built (PLATFORM), in $(BUILD)/dist/:
#   make deb        attnext_<version>_<arch>.deb (dpkg-deb; installs into LIBDIR; Linux only)
#   make wheel      attnext-<version>-py3-none-<tag>.whl: manylinux_2_X_x86_64,
#                   manylinux_2_X_aarch64 or win_amd64 (attnext.load(conn); attnext.whl.name
#                   names it)
#   make npm        attnext-<platform>-<version>.tgz, the platform's npm package (attnext-linux-x64,
#                   attnext-linux-arm64, attnext-windows-x64: "os" and "cpu" set), and
#                   attnext-<version>.tgz, the package a user installs, which lists each platform's
#                   as an optional dependency and loads the one that fits (require("attnext").load(db))
# The native build's (build/dist/): the portable attnext.so, and attnext_cuda.so when nvcc built
# it; the deb depends on Debian's OpenBLAS (libopenblas0-pthread); the wheel and the npm package
# bundle it, renamed, beside attnext.so (ext/packages/bundle_libs.py, patchelf).
# make PLATFORM=linux-arm64 packages (build/linux-arm64/dist/): the same three for arm64, with
# the BLAS-free attnext.so (nothing to bundle, no OpenBLAS dependency). make PLATFORM=windows-x64
# packages (build/windows-x64/dist/): the wheel and the npm package, with attnext.dll (no deb).
# Sources: ext/packages/; tests: tests/test_package_*.sh (the native build's, make test) and
# tests/test_package_contents.py (every platform's contents and metadata; make test-linux-arm64
# and make test-windows-x64 also load their packages' extension under qemu and wine).
#   make npm-wasm   build/dist/attnext-wasm-<version>.tgz: the browser build (below)
VERSION := $(shell sed -n 's/^\#define NN_VERSION "\(.*\)"/\1/p' engine/version.c)
DIST    := $(BUILD)/dist
PKG_LIBS := attnext.so $(CUDA_SO)
DEB_ARCH := amd64
NPM_PLATFORM := linux-x64
# the strip that reads the platform's libraries (bundle_libs.py, debian/build.sh)
PKG_STRIP := strip
ifeq ($(PLATFORM),linux-arm64)
PKG_LIBS := $(SO)
DEB_ARCH := arm64
NPM_PLATFORM := linux-arm64
PKG_STRIP := aarch64-linux-gnu-strip
else ifeq ($(PLATFORM),windows-x64)
PKG_LIBS := $(SO)
DEB_ARCH :=
NPM_PLATFORM := windows-x64
PKG_STRIP := x86_64-w64-mingw32-strip
endif
# The documents (README.md, then each beside what it documents) and the pictures they show: the
# deb installs them in /usr/share/doc/attnext/ in the tree's layout, so their links still work.
DOCS     := README.md ext/REFERENCE.md ext/CLIENTS.md ext/CONCURRENCY.md ext/SECURITY.md \
  ext/ARCHITECTURE.md ext/CHANGES.md ext/node/README.md sql/TUTORIAL.md tests/README.md \
  $(wildcard sql/img/*.svg)
PKG_DOCS := $(DOCS) LICENSE
DEB      := $(if $(DEB_ARCH),$(DIST)/attnext_$(VERSION)_$(DEB_ARCH).deb)
WHEEL    := $(DIST)/attnext.whl.name
NPM_MAIN := $(DIST)/attnext-$(VERSION).tgz
NPM_TGZ  := $(DIST)/attnext-$(NPM_PLATFORM)-$(VERSION).tgz
.PHONY: deb wheel npm packages
ifeq ($(PLATFORM),wasm)
deb wheel npm packages:
	@echo "make PLATFORM=wasm $@: no packages for WebAssembly (build/wasm/libattnext.a links into a WebAssembly SQLite)"; exit 1
else
deb: $(if $(DEB),$(DEB),no-deb)
wheel: $(WHEEL)
npm: $(NPM_TGZ) $(NPM_MAIN)
packages: $(DEB) $(WHEEL) $(NPM_TGZ) $(NPM_MAIN)
endif
.PHONY: no-deb
no-deb:
	@echo "make PLATFORM=$(PLATFORM) deb: no Debian package for $(PLATFORM)"; exit 1
$(DEB): $(PKG_LIBS) $(PKG_DOCS) $(wildcard ext/packages/debian/*)
	STRIP=$(PKG_STRIP) DOCS="$(DOCS)" sh ext/packages/debian/build.sh $(VERSION) $(DEB_ARCH) $(DIST) $(LIBDIR) $(PKG_LIBS)
$(WHEEL): $(PKG_LIBS) $(PKG_DOCS) ext/packages/bundle_libs.py $(wildcard ext/packages/python/*.py ext/packages/python/attnext/*)
	STRIP=$(PKG_STRIP) $(PYTHON) ext/packages/python/build_wheel.py $(VERSION) $(DIST) $(PKG_LIBS)
$(NPM_TGZ): $(PKG_LIBS) $(PKG_DOCS) ext/packages/bundle_libs.py $(wildcard ext/packages/node/*)
	STRIP=$(PKG_STRIP) sh ext/packages/node/build.sh $(VERSION) $(DIST) attnext-$(NPM_PLATFORM) $(PKG_LIBS)
$(NPM_MAIN): $(PKG_DOCS) $(wildcard ext/packages/node/*)
	sh ext/packages/node/build.sh $(VERSION) $(DIST)
# make npm-wasm: build/dist/attnext-wasm-<version>.tgz, the browser build (make PLATFORM=wasm
# web, in $(BUILD)/wasm) as an npm package: attnext-web.js, attnext-worker.js, index.d.ts
# (ext/packages/wasm/; tests/test_package_wasm.sh).
WASM_NPM_TGZ := $(DIST)/attnext-wasm-$(VERSION).tgz
.PHONY: npm-wasm
npm-wasm:
	@$(MAKE) --no-print-directory $(SUBMAKE_J) PLATFORM=wasm BUILD=$(BUILD)/wasm web
	@$(MAKE) --no-print-directory $(WASM_NPM_TGZ)
$(WASM_NPM_TGZ): $(BUILD)/wasm/web/attnext-web.js $(BUILD)/wasm/web/attnext-worker.js LICENSE \
  $(wildcard ext/packages/wasm/*)
	sh ext/packages/wasm/build.sh $(VERSION) $(DIST) $(BUILD)/wasm/web

# ---------------------------------------------------------------- reliability
#   make test-asan       engine, extension and C tests with ASan + UBSan in build-asan/, then
#                        the C tests and the SQL tests against that build
#   make test-valgrind   extension without AVX-512 in build-valgrind/, the SQL tests under valgrind
#   make fuzz            the libFuzzer targets of tests/fuzz/, 3 x FUZZ_SECONDS in all (clang)
# Tests that load the extension take it from $ATTNEXT (default ./attnext) and run the sqlite3
# shell as $SQLITE3 (a valgrind command line here); Python tests preload $ATTNEXT_PRELOAD.
ASAN_BUILD     ?= build-asan
VALGRIND_BUILD ?= build-valgrind
FUZZ_BUILD     ?= build-fuzz
FUZZ_SECONDS   ?= 20
FUZZ_TARGETS   := safetensors config text
ASAN_OPT       := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
# asked of the compiler only when a recipe needs it (emcc takes seconds to answer)
LIBASAN         = $(shell $(CC) -print-file-name=libasan.so 2>/dev/null)
VALGRIND       ?= valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=no --quiet
.PHONY: test-valgrind

# The extension inside a build directory (sanitizer and valgrind builds keep ./attnext.so;
# PLATFORM=windows-x64 and wasm have their own rules above).
ifeq ($(filter windows-x64 wasm,$(PLATFORM)),)
$(BUILD)/attnext.so: $(EXT_OBJ) $(BUILD)/libnn.a $(EXPORTS)
	$(CC) $(CFLAGS) -shared $(LDEXPORT) -o $@ $(EXT_OBJ) $(BUILD)/libnn.a $(LDLIBS)
endif

# The SQL functions of a dqlite node's jobs on a plain connection, for the tests that check
# them outside a node (tests/sql/jobs.sql, test_jobs_json, test_json_subtype, test_readme,
# test_sqlite_versions): attnext's objects and the node's job files, registered as the node
# registers them (attn_node_init) with no job runner started. Loaded instead of attnext.so; it
# exports its entry point alone, as attnext.so does.
$(BUILD)/tests/attnext_jobs_test.map:
	@mkdir -p $(dir $@)
	printf '{\n  global: sqlite3_attnextjobstest_init;\n  local: *;\n};\n' > $@
$(BUILD)/tests/attnext_jobs_test.so: tests/attnext_jobs_test.c $(EXT_OBJ) $(NODE_JOB_OBJ) \
  $(BUILD)/libnn.a $(BUILD)/tests/attnext_jobs_test.map $(HEADERS)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Iengine -shared \
	  -Wl,--version-script=$(BUILD)/tests/attnext_jobs_test.map -o $@ $< $(EXT_OBJ) \
	  $(NODE_JOB_OBJ) $(BUILD)/libnn.a $(LDLIBS)

# A GPU stand-in for the host/device plumbing test (tests/fake_device.c, loaded with dlopen).
$(BUILD)/tests/fake_device.so: tests/fake_device.c $(BUILD)/libnn.a $(BUILD)/tests/fake_device.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) $(BLAS_CFLAGS) -Iengine -shared $< $(BUILD)/libnn.a -o $@ $(LDLIBS)
$(BUILD)/tests/test_device_plumbing: $(BUILD)/tests/fake_device.so
# Stale CUDA libraries for tests/test_cuda_abi.sh: another ABI number, another table size, none.
$(BUILD)/tests/fake_device_stale_abi.so: FAKE_DEFS := -DFAKE_DEVICE_ABI=999
$(BUILD)/tests/fake_device_stale_size.so: FAKE_DEFS := -DFAKE_DEVICE_TABLE_SIZE=8
$(BUILD)/tests/fake_device_no_abi.so: FAKE_DEFS := -DFAKE_DEVICE_NO_ABI
$(FAKE_STALE): tests/fake_device.c $(BUILD)/libnn.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FAKE_DEFS) $(BLAS_CFLAGS) -Iengine -shared $< $(BUILD)/libnn.a -o $@ $(LDLIBS)

# The CUDA backend's source compiled for the host (tests/cuda_emulate.h): its kernels run on the
# CPU, for tests/test_cuda_emulated.sh on machines without a GPU.
# With BLAS=none its cuBLAS stand-in multiplies on engine/gemm.c.
EMU_GEMM := $(if $(filter none,$(BLAS)),$(BUILD)/engine/gemm.o)
$(BUILD)/tests/emu_cuda.so: engine/backend_cuda.cu tests/cuda_emulate.h engine/backend.h $(EMU_GEMM)
	@mkdir -p $(dir $@)
	$(CXX) -x c++ -std=c++17 -O1 -g -ffp-contract=off -fPIC -shared -Wall -Wno-unused-function \
	  -DATTNEXT_CUDA_EMULATE -Iengine -Itests $(BLAS_CFLAGS) $< -x none $(EMU_GEMM) -o $@ \
	  $(BLAS_LIBS)
$(BUILD)/tests/test_cuda: $(BUILD)/tests/emu_cuda.so

# Every test with "auto" = the CUDA backend emulated on the host (every model of every test runs
# the CUDA kernels' code): the engine and the extension on the device path, without a GPU.
.PHONY: test-cuda-emulated
test-cuda-emulated: deps attnext.so $(TEST_BIN) $(TOOL_BIN) $(JOBS_TEST_SO) $(BUILD)/tests/emu_cuda.so
	@ATTNEXT_CUDA_LIB=$(CURDIR)/$(BUILD)/tests/emu_cuda.so BUILD=$(BUILD) PYTHON=$(PYTHON) \
	 SQLITE3=$(SQLITE3) PREDICT_FLOOR=10000 sh tests/run_all.sh

# The fault-injection harness links SQLite itself (it replaces SQLite's allocator).
$(BUILD)/tests/test_faults_oom: LDLIBS += -lsqlite3
$(BUILD)/tests/test_fuzz_replay: $(wildcard tests/fuzz/*.c)

# Without the run-time dispatch (CPU_LEVELS empty): ASan checks a 32- or 64-byte vector access
# through a call (__asan_loadN), which made the x86-64-v3/v4 copies 4x slower than the baseline's
# 16-byte accesses (test_agnews's speed floor failed); the copies are the same C code.
# The sub-makes build TEST_JOBS objects at a time (deps has run; -j given to make wins).
SUBMAKE_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS))
test-asan: deps
	$(MAKE) $(SUBMAKE_J) BUILD=$(ASAN_BUILD) OPT="$(ASAN_OPT)" CPU_LEVELS= CPU_DEFS= \
	  $(ASAN_BUILD)/attnext.so $(TEST_SRC:tests/%.c=$(ASAN_BUILD)/tests/%) \
	  $(TOOL_SRC:%.c=$(ASAN_BUILD)/%) $(FAKE_STALE:$(BUILD)/%=$(ASAN_BUILD)/%) \
	  $(ASAN_BUILD)/tests/attnext_jobs_test.so
	@# Python loads the ASan extension with libasan preloaded (no leak report for Python itself)
	@printf '#!/bin/sh\nLD_PRELOAD=%s ASAN_OPTIONS="$$ASAN_OPTIONS:detect_leaks=0" exec %s "$$@"\n' \
	  "$(LIBASAN)" "$(PYTHON)" > $(ASAN_BUILD)/python-asan && chmod +x $(ASAN_BUILD)/python-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
	 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	 ATTNEXT=$(ASAN_BUILD)/attnext ATTNEXT_PRELOAD=$(LIBASAN) PREDICT_FLOOR=5000 \
	 SQLITE3="env LD_PRELOAD=$(LIBASAN) $(SQLITE3)" \
	 BUILD=$(ASAN_BUILD) PYTHON=$(ASAN_BUILD)/python-asan sh tests/run_all.sh -j $(TEST_JOBS)

# The SQL scripts run in two halves beside test_hostile_sql, TEST_JOBS of the three at a time
# (valgrind runs a process on one core), each one's lines printed when it ends.
VALGRIND_SQL := $(sort $(basename $(notdir $(wildcard tests/sql/*.sql))))
VALGRIND_RUNS := valgrind-hostile_sql valgrind-sql-1 valgrind-sql-2
.PHONY: $(VALGRIND_RUNS)
test-valgrind: deps
	$(MAKE) $(SUBMAKE_J) BUILD=$(VALGRIND_BUILD) OPT="-O1 -g -mavx2 -mfma" $(VALGRIND_BUILD)/attnext.so \
	  $(VALGRIND_BUILD)/tests/attnext_jobs_test.so
	@$(MAKE) --no-print-directory -k $(SUBMAKE_J) -Otarget $(VALGRIND_RUNS)
valgrind-hostile_sql:
	@echo "== valgrind: tests/test_hostile_sql.sh"; \
	ATTNEXT=$(VALGRIND_BUILD)/attnext SQLITE3="$(VALGRIND) $(SQLITE3)" sh tests/test_hostile_sql.sh
valgrind-sql-1 valgrind-sql-2: valgrind-sql-%:
	@names="$$(printf '%s\n' $(VALGRIND_SQL) | awk 'NR % 2 == $* % 2')"; \
	echo "== valgrind: tests/test_sql.sh" $$names; \
	ATTNEXT=$(VALGRIND_BUILD)/attnext ATTNEXT_JOBS=$(VALGRIND_BUILD)/tests/attnext_jobs_test \
	SQLITE3="$(VALGRIND) $(SQLITE3)" sh tests/test_sql.sh $$names

# The engine is compiled once for the three fuzzers (instrumented, without libFuzzer's main),
# each target's own file with it, and linked with libFuzzer.
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -pthread -fno-sanitize-recover=undefined
FUZZ_ENGINE_OBJ := $(ENGINE_SRC:engine/%.c=$(FUZZ_BUILD)/engine/%.o)
.SECONDARY: $(FUZZ_ENGINE_OBJ)
$(FUZZ_BUILD)/engine/%.o: engine/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined $(BLAS_CFLAGS) -Iengine \
	  -c $< -o $@
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_ENGINE_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $(BLAS_CFLAGS) -Iengine $< \
	  $(FUZZ_ENGINE_OBJ) -o $@ $(LDLIBS)

# Each target runs over a copy of its corpus, FUZZ_JOBS targets at a time (each fuzzer is one
# process on one core; its lines are printed when it ends); a crash is left in
# $(FUZZ_BUILD)/crashes/ (copy it to tests/fuzz/crashes/<target>/ as a regression input).
# With two at a time (FUZZ_JOBS 2, as on a 2-core machine) the targets share 3 x FUZZ_SECONDS
# by FUZZ_SHARE_<target> percent, so that the two lanes end together (safetensors alone, config
# then text) with no core idle: the weights' file parser runs ~1,400 inputs/s and gets the most;
# the options' parser, ~34,000/s, the least. With one lane, or three, each runs FUZZ_SECONDS.
# The fuzzers are all built before the first runs. A target runs at least 1 s (libFuzzer reads
# -max_total_time=0 as no limit).
FUZZ_SHARE_safetensors := 150
FUZZ_SHARE_config      := 67
FUZZ_SHARE_text        := 83
FUZZ_JOBS ?= $(TEST_JOBS)
FUZZ_RUNS := $(FUZZ_TARGETS:%=fuzz-run-%)
FUZZ_SHARE = $(if $(filter 2,$(FUZZ_JOBS)),$(or $(FUZZ_SHARE_$*),100),100)
.PHONY: $(FUZZ_RUNS)
fuzz:
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	@$(MAKE) --no-print-directory -k -j$(FUZZ_JOBS) -Otarget $(FUZZ_RUNS) && echo "fuzz: no crash"
$(FUZZ_RUNS): fuzz-run-%: $(FUZZ_BUILD)/fuzz_%
	@mkdir -p $(FUZZ_BUILD)/corpus/$* $(FUZZ_BUILD)/crashes; \
	cp tests/fuzz/corpus/$*/* tests/fuzz/crashes/$*/* $(FUZZ_BUILD)/corpus/$*/ 2>/dev/null; \
	secs=$$(( ($(FUZZ_SECONDS) * $(FUZZ_SHARE) + 50) / 100 )); [ $$secs -ge 1 ] || secs=1; \
	echo "== fuzz $* for $${secs}s"; \
	$< -max_total_time=$$secs -max_len=65536 -timeout=20 \
	  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$*- \
	  $(FUZZ_BUILD)/corpus/$* >$(FUZZ_BUILD)/fuzz_$*.log 2>&1; \
	grep -E '^(#[0-9]+.*DONE|==[0-9]+==|SUMMARY|stat::number_of_executed_units|Test unit written)' $(FUZZ_BUILD)/fuzz_$*.log; \
	! ls $(FUZZ_BUILD)/crashes/$*-* >/dev/null 2>&1 || \
	  { echo "fuzz $*: crash inputs in $(FUZZ_BUILD)/crashes/"; exit 1; }

# ---------------------------------------------------------------- scale-out
#   build/attnext-node   a dqlite node with attnext linked in (built by `make` when
#                        libdqlite-dev is installed; ext/node/attnext_node.c)
#   make cluster-demo    three nodes on loopback: import, train, predict, kill the leader,
#                        predict again on the new leader, restart the node (tests/cluster_demo.sh)
# The node links attnext's objects (not attnext.so): dqlite opens its connections itself, so the
# extension is registered with sqlite3_auto_extension before the node starts.
DQLITE_LIBS := $(shell pkg-config --libs dqlite 2>/dev/null)
NODE_BIN    := $(if $(PLATFORM),,$(if $(DQLITE_LIBS),$(BUILD)/attnext-node))
.PHONY: node node-if-dqlite cluster-demo
all: $(NODE_BIN)
node: $(NODE_BIN)
# make test on a fresh machine: tests/deps.sh installs libdqlite-dev after this Makefile was read,
# so the node is built by a second make once the extension's objects exist.
test: node-if-dqlite
node-if-dqlite: deps attnext.so
	@if pkg-config --exists dqlite 2>/dev/null; then \
	  $(MAKE) --no-print-directory $(BUILD)/attnext-node DQLITE_LIBS="$$(pkg-config --libs dqlite)"; fi

NODE_SRC := ext/node/attnext_node.c ext/node/attnext_wire.c
$(BUILD)/attnext-node: $(NODE_SRC) $(EXT_OBJ) $(NODE_JOB_OBJ) $(BUILD)/libnn.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $$(pkg-config --cflags dqlite) $(NODE_SRC) $(EXT_OBJ) $(NODE_JOB_OBJ) \
	  $(BUILD)/libnn.a -o $@ \
	  $(DQLITE_LIBS) -lsqlite3 $(LDLIBS)

cluster-demo:
	@sh tests/deps.sh cluster
	@$(MAKE) --no-print-directory attnext.so
	@$(MAKE) --no-print-directory $(BUILD)/attnext-node DQLITE_LIBS="$$(pkg-config --libs dqlite)"
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SQLITE3=$(SQLITE3) sh tests/cluster_demo.sh

# The header dependencies written by -MMD (see DEPFLAGS); absent before the first build.
$(BUILD)/%.d: ;
.PRECIOUS: $(BUILD)/%.d
-include $(ENGINE_OBJ:.o=.d) $(EXT_OBJ:.o=.d) $(NODE_JOB_OBJ:.o=.d) $(TEST_BIN:=.d) $(TOOL_BIN:=.d) $(BUILD)/tests/fake_device.d
