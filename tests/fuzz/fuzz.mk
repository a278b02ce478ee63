# Fuzz targets: tests/fuzz/fuzz_*.c, each a libFuzzer program built with clang under ASan+UBSan
# into $(BUILD)/fuzz/fuzzers/. `make fuzz` runs each for FUZZ_TIME seconds over its seed corpus
# (tests/fuzz/corpus/NAME) and keeps what it finds in $(BUILD)/fuzz/corpus/NAME; a crash leaves
# its input in $(BUILD)/fuzz/artifacts/. `make test` runs each for a few seconds over the seeds
# (tests/fuzz/test_fuzz.sh). Included by the Makefile.
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN  := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/fuzzers/%,$(FUZZ_SRC))
FUZZ_TIME ?= 60

ifeq ($(MODE),fuzz)
  # The Makefile's flags (MODE=fuzz gets its release ones) plus libFuzzer's coverage and the
  # sanitizers; clang also warns about unused static functions that gcc lets pass.
  CC       := clang
  FUZZ_OPT := -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  CFLAGS   := $(CFLAGS) $(FUZZ_OPT) -Wno-unknown-warning-option -Wno-unused-function
  LDFLAGS  := $(LDFLAGS) $(FUZZ_OPT)

$(BUILD)/fuzz/fuzzers/%: $(OUT)/obj/tests/fuzz/%.o $(SERVER_OBJ) $(OUT)/libengine.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SERVER_LIBS)

fuzz-bins: $(FUZZ_BIN)
else
fuzz-bins:
	@$(MAKE) --no-print-directory -j$(NPROC) MODE=fuzz fuzz-bins
endif

fuzz: fuzz-bins
	tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_TIME)

.PHONY: fuzz fuzz-bins
