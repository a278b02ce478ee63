# attnlab build. Sources are found by folder, so adding a module needs no edit here:
#   server/engine/*.c, server/engine/probes/*.c  -> libengine (no HTTP, no SQLite)
#   server/<layer>/*.c, server/store/<backend>/*.c -> the service, linked into attnlabd; its includes
#                                                   name the layer ("store/store.h", "engine/model.h")
#   client/*.c (less main.c)                      -> the attnlab client
#   tests/<area>/test_*.c                         -> one test program each
#   tests/engine/f64_*.c                          -> tests linked against the engine built in double
# MODE=release (-O2 -march=native) or MODE=asan (address + undefined sanitizers).

MODE    ?= release
BUILD   ?= build
OUT     := $(BUILD)/$(MODE)
CC      ?= gcc
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)

WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-format-truncation
DEFS    := -D_GNU_SOURCE -DATTNLAB_VERSION='"$(VERSION)"'
ifeq ($(MODE),asan)
  OPT   := -O1 -g -march=native -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(MODE),tsan)
  OPT   := -O1 -g -march=native -fsanitize=thread
else
  OPT   := -O2 -g -march=native
endif
BLAS_CFLAGS := -I/usr/include/x86_64-linux-gnu/openblas-pthread
PQ_CFLAGS   := -I/usr/include/postgresql
CFLAGS  := $(WARN) $(DEFS) $(OPT) -pthread -MMD -MP -Iserver -Iserver/engine $(BLAS_CFLAGS) $(PQ_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := $(OPT) -pthread $(EXTRA_LDFLAGS)

ENGINE_LIBS := -lopenblas -lutf8proc -ljansson -lm
SERVER_LIBS := -lmicrohttpd -ljansson -lsqlite3 -lpq $(ENGINE_LIBS)
CLIENT_LIBS := -lcurl -ljansson -lm
TEST_LIBS   := $(SERVER_LIBS) -lcurl -lutil

ENGINE_SRC := $(sort $(wildcard server/engine/*.c server/engine/probes/*.c))
SERVER_SRC := $(sort $(filter-out server/engine/%,$(wildcard server/*/*.c server/*/*/*.c)))
CLIENT_SRC := $(sort $(filter-out client/main.c,$(wildcard client/*.c)))
TEST_SRC   := $(sort $(wildcard tests/*/test_*.c))
F64_SRC    := $(sort $(wildcard tests/engine/f64_*.c))
TEST_SUPPORT_SRC := tests/support/test.c
HARNESS_SRC := $(sort $(filter-out tests/support/test.c,$(wildcard tests/support/*.c)))
MIGRATIONS := $(sort $(wildcard db/migrations/*.sql))
PG_MIGRATIONS := $(sort $(wildcard db/migrations/pg/*.sql))
BENCH_SRC  := $(sort $(wildcard bench/*.c))

obj = $(patsubst %.c,$(OUT)/obj/%.o,$(1))
ENGINE_OBJ := $(call obj,$(ENGINE_SRC))
ENGINE_F64_OBJ := $(patsubst %.c,$(OUT)/obj64/%.o,$(ENGINE_SRC))
SERVER_OBJ := $(call obj,$(SERVER_SRC))
# The client compiles in the same OpenAPI document: RunConfig flags and types come from its schema.
CLIENT_OBJ := $(call obj,$(CLIENT_SRC)) $(OUT)/obj/gen/openapi.o
SUPPORT_OBJ := $(call obj,$(TEST_SUPPORT_SRC))
HARNESS_OBJ := $(call obj,$(HARNESS_SRC))
# The SQL migrations are compiled into the server so a binary always carries its own schema.
SERVER_OBJ += $(OUT)/obj/gen/migrations.o $(OUT)/obj/gen/pg_migrations.o $(OUT)/obj/gen/openapi.o \
              $(OUT)/obj/gen/build_info.o $(OUT)/obj/gen/presets.o
TEST_BIN   := $(patsubst tests/%.c,$(OUT)/tests/%,$(TEST_SRC))
F64_BIN    := $(patsubst tests/%.c,$(OUT)/tests/%,$(F64_SRC))
BENCH_BIN  := $(patsubst bench/%.c,$(OUT)/bench/%,$(BENCH_SRC))

ATTNLABD := $(OUT)/attnlabd
ATTNLAB  := $(OUT)/attnlab

.PHONY: all deps build run test test-run bench corpus clean static
all: build
build: $(ATTNLABD) $(if $(wildcard client/main.c),$(ATTNLAB)) static

$(OUT)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/obj64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DENGINE_F64 -c $< -o $@

$(OUT)/gen/migrations.c: $(MIGRATIONS) scripts/embed_migrations.sh
	@mkdir -p $(dir $@)
	scripts/embed_migrations.sh $(MIGRATIONS) > $@.tmp && mv $@.tmp $@

# The PostgreSQL backend's schema (db/migrations/pg), the same versions as SQLite's.
$(OUT)/gen/pg_migrations.c: $(PG_MIGRATIONS) scripts/embed_migrations.sh
	@mkdir -p $(dir $@)
	MIGRATIONS_SYMBOL=store_pg_migrations scripts/embed_migrations.sh $(PG_MIGRATIONS) > $@.tmp && mv $@.tmp $@

# The commit the binary is built from (runs record it): rewritten only when it changes.
$(OUT)/gen/build_info.c: FORCE
	@scripts/build_info.sh $@
.PHONY: FORCE
FORCE:

$(OUT)/gen/openapi.c: server/api/openapi.json scripts/embed_text.sh
	@mkdir -p $(dir $@)
	scripts/embed_text.sh openapi_json server/api/openapi.json > $@.tmp && mv $@.tmp $@

# The experiment presets, data next to the API's description (server/api/presets.json).
$(OUT)/gen/presets.c: server/api/presets.json scripts/embed_text.sh
	@mkdir -p $(dir $@)
	scripts/embed_text.sh presets_json server/api/presets.json > $@.tmp && mv $@.tmp $@

$(OUT)/obj/gen/%.o: $(OUT)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/libengine.a: $(ENGINE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(OUT)/libengine64.a: $(ENGINE_F64_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(ATTNLABD): $(OUT)/obj/server/main.o $(SERVER_OBJ) $(OUT)/libengine.a
	$(CC) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

$(ATTNLAB): $(OUT)/obj/client/main.o $(CLIENT_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS)

$(OUT)/tests/engine/test_%: $(OUT)/obj/tests/engine/test_%.o $(SUPPORT_OBJ) $(OUT)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)

$(OUT)/tests/engine/f64_%: tests/engine/f64_%.c $(SUPPORT_OBJ) $(OUT)/libengine64.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DENGINE_F64 $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)

# HACKING.md's recipe for a new attention variant, proven on a test-only row: attention.c and the
# gradient check built with -DATTNLAB_TEST_VARIANT, linked ahead of the engine as it is (no other
# file knows the row); the check then runs over every row of the table, the test one included.
F64_TEST_VARIANT := $(OUT)/tests/engine/f64_gradcheck_test_variant
$(OUT)/obj64tv/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DENGINE_F64 -DATTNLAB_TEST_VARIANT -c $< -o $@

$(F64_TEST_VARIANT): tests/engine/f64_gradcheck.c $(OUT)/obj64tv/server/engine/attention.o $(SUPPORT_OBJ) $(OUT)/libengine64.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DENGINE_F64 -DATTNLAB_TEST_VARIANT $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)

$(OUT)/tests/server/test_%: $(OUT)/obj/tests/server/test_%.o $(SUPPORT_OBJ) $(HARNESS_OBJ) $(SERVER_OBJ) $(OUT)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(TEST_LIBS)

$(OUT)/tests/client/test_%: $(OUT)/obj/tests/client/test_%.o $(SUPPORT_OBJ) $(HARNESS_OBJ) $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lutil

# Benchmark programs (bench/*.c) link the engine only; scripts/bench.sh runs them.
$(OUT)/bench/%: $(OUT)/obj/bench/%.o $(OUT)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)

# Front-end files from npm are copied into the served tree; nothing is fetched at run time.
static: static/vendor/chart.umd.min.js
static/vendor/chart.umd.min.js: node_modules/chart.js/dist/chart.umd.min.js
	@mkdir -p static/vendor
	cp node_modules/chart.js/dist/chart.umd.min.js static/vendor/
node_modules/chart.js/dist/chart.umd.min.js:
	scripts/deps.sh

deps:
	scripts/deps.sh

NPROC    := $(shell nproc 2>/dev/null || echo 2)
DATA_DIR ?= var
PORT     ?= 8080
# The seed-blog preset trains on the default corpus: build it on the first run (about half a minute).
run: deps
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build
	@[ -f $(DATA_DIR)/corpora/default/tokens.u16 ] || $(MAKE) --no-print-directory corpus DATA_DIR=$(DATA_DIR)
	$(ATTNLABD) --data-dir $(DATA_DIR) --port $(PORT)

# The whole suite, once normally and once under the sanitizers; one closing line of counts.
test: 
	scripts/deps.sh --test
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build test-bins
	$(MAKE) --no-print-directory -j$(NPROC) MODE=asan build test-bins
	$(MAKE) --no-print-directory -j$(NPROC) MODE=tsan $(TSAN_TESTS)
	$(MAKE) --no-print-directory -j$(NPROC) MODE=fuzz fuzz-bins
	tests/run.sh $(BUILD)

test-bins: $(TEST_BIN) $(F64_BIN) $(F64_TEST_VARIANT)

# The job system's concurrency tests also run under ThreadSanitizer.
TSAN_TESTS := $(BUILD)/tsan/tests/server/test_jobs $(BUILD)/tsan/tests/server/test_events

bench:
	scripts/deps.sh --bench
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build $(BENCH_BIN)
	scripts/bench.sh $(OUT)

corpus:
	scripts/deps.sh --corpus
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build
	DATA_DIR=$(DATA_DIR) scripts/build_corpus.sh $(OUT)

# `make format`: the tree rewritten in the house style of .clang-format (make test checks it).
format:
	git ls-files '*.c' '*.h' | xargs clang-format-14 -i
.PHONY: format

clean:
	rm -rf $(BUILD) static/vendor

# `make fuzz` (FUZZ_TIME=seconds per target): the libFuzzer targets of tests/fuzz/.
include tests/fuzz/fuzz.mk

# `make loadtest`: load figures (wrk's closed loop, bench/loadgen's open loop, the heavy-request
# drills) during a training run, next to their targets, then the fault
# drills (SIGKILL mid-training and mid-tokenization, disk full, database unwritable), one row each.
loadtest:
	scripts/deps.sh --test
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build $(BUILD)/release/bench/loadgen
	scripts/loadtest.sh $(BUILD)/release
	scripts/faultdrill.sh $(BUILD)/release

# `make faultdrill`: the fault drills alone (the tmpfs ones need root; without it they say skipped).
faultdrill:
	scripts/deps.sh --test
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build
	scripts/faultdrill.sh $(BUILD)/release
.PHONY: loadtest faultdrill

# `make bench-cluster`: a throw-away PostgreSQL and two nodes: claims/s, API p99 against SQLite, resume time.
bench-cluster:
	scripts/deps.sh --test
	$(MAKE) --no-print-directory -j$(NPROC) MODE=release build
	scripts/cluster_bench.sh $(BUILD)
.PHONY: bench-cluster

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
