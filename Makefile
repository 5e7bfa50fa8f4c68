# Makefile -- builds the attnext SQLite extension (attnext.so), its tests and its demo.
#   make          build attnext.so
#   make demo     train and query a model on the bundled headlines (data/)
#   make test     every test that can run on this machine (says what it could not run)
#   make install  copy attnext.so where `.load attnext` finds it
# Debian packages needed: see `make deps` (installs them when run as root).

CC      ?= cc
OPT     ?= -O2 -march=native
CFLAGS  ?= -g
CFLAGS  += $(OPT) -fopenmp-simd -std=c11 -Wall -Wextra -Wno-unused-parameter -fPIC -D_GNU_SOURCE -pthread
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null || echo -I/usr/include/x86_64-linux-gnu/openblas-pthread)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
LDLIBS  += $(BLAS_LIBS) -lm -ldl -pthread
PYTHON  ?= /usr/bin/python3
SQLITE3 ?= sqlite3
BUILD   ?= build

ENGINE_SRC := $(sort $(wildcard engine/*.c))
EXT_SRC    := $(sort $(wildcard ext/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
EXT_OBJ    := $(EXT_SRC:%.c=$(BUILD)/%.o)
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC   := $(sort $(wildcard tests/tool_*.c tests/bench/tool_*.c))
TOOL_BIN   := $(TOOL_SRC:%.c=$(BUILD)/%)
HEADERS    := $(wildcard engine/*.h ext/*.h tests/*.h)

# The CUDA backend is built when nvcc is found (see engine/*.cu); otherwise it is skipped.
NVCC ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
CUDA_SRC := $(sort $(wildcard engine/*.cu))

.PHONY: all deps demo test test-asan bench install clean fuzz
all: attnext.so

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Iengine -c $< -o $@

$(BUILD)/libnn.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

attnext.so: $(EXT_OBJ) $(BUILD)/libnn.a
	$(CC) $(CFLAGS) -shared -o $@ $(EXT_OBJ) $(BUILD)/libnn.a $(LDLIBS)

$(BUILD)/tests/bench/%: tests/bench/%.c $(BUILD)/libnn.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Iengine -Itests $< $(BUILD)/libnn.a -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libnn.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -Iengine -Itests $< $(BUILD)/libnn.a -o $@ $(LDLIBS)

deps:
	@sh tests/deps.sh

# The tour of sql/demo.sql on the bundled headlines (data/), in a fresh demo.db.
demo: deps attnext.so
	@rm -f demo.db
	$(SQLITE3) -bail demo.db < sql/demo.sql

test: deps attnext.so $(TEST_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) SQLITE3=$(SQLITE3) sh tests/run_all.sh

# The benchmark against the PyTorch lesson (tests/bench/bench.py; ~20 min on 2 cores).
# BENCH_ARGS=--quick for a short run.
bench: attnext.so
	$(PYTHON) tests/bench/bench.py $(BENCH_ARGS)

install: attnext.so
	install -d $(DESTDIR)/usr/local/lib
	install -m 0755 attnext.so $(DESTDIR)/usr/local/lib/attnext.so
	@echo "installed /usr/local/lib/attnext.so: .load attnext (or .load /usr/local/lib/attnext)"

clean:
	rm -rf $(BUILD) attnext.so demo.db
