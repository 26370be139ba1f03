# mk/fuzz.mk - the libFuzzer fuzzer of the C core, differential against CoreFoundation's CFRunLoop
# (Tests/fuzz/fuzz_loop.c; its header comment says what is compared, modelled and left out).
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_ARGS='-seed=1'] [FUZZ_KEEP_CORPUS=1]
#
# Builds the fuzzer with the core's sources (-DRL_DEBUG) under libFuzzer + ASan + UBSan, with the
# Swift toolchain's clang and its libFoundation (FUZZ_SWIFT_LIB, found from `swift` on PATH),
# into build/fuzz/. Then replays every input kept in Tests/fuzz/regressions/ (see its README), and
# fuzzes for FUZZ_SECONDS on one process (-workers=1) over the seeds of Tests/fuzz/corpus/ (written
# by Tests/fuzz/make_seeds.py): new inputs go to the scratch corpus build/fuzz/corpus/ (emptied
# first unless FUZZ_KEEP_CORPUS=1), never into the repository; crash, mismatch and leak inputs go
# to build/fuzz/crashes/, the fuzzer's output to build/fuzz/fuzz.log. Leaks are checked (LSan),
# CoreFoundation's own silenced by Tests/fuzz/lsan.supp. The last line starts with `fuzz: `:
# runs, seconds, coverage (cov/ft), corpus size, and passed/FAIL; the exit status is non-zero on
# any crash, difference with CF, invariant violation or leak, and the recipe then says how to
# replay the input. Takes FUZZ_SECONDS plus about 15 s (build, replays).

FUZZ_SECONDS ?= 60
FUZZ_KEEP_CORPUS ?= 0
FUZZ_ARGS ?=
FUZZ_DIR := build/fuzz
FUZZ_BIN := $(FUZZ_DIR)/fuzz_loop
FUZZ_SEEDS := Tests/fuzz/corpus
FUZZ_REGRESSIONS := Tests/fuzz/regressions

# The toolchain's lib/swift (CoreFoundation headers, libFoundation.so) and its clang.
# Found once per make (simply expanded); set either on the command line to override.
ifeq ($(origin FUZZ_SWIFT_LIB),undefined)
FUZZ_SWIFT_LIB := $(shell s=$$(command -v $(SWIFT) 2>/dev/null) && \
    echo "$$(dirname "$$(dirname "$$(readlink -f "$$s")")")/lib/swift")
endif
ifeq ($(origin FUZZ_CC),undefined)
FUZZ_CC := $(shell c='$(FUZZ_SWIFT_LIB)/../../bin/clang'; if [ -x "$$c" ]; then readlink -f "$$c"; else echo clang; fi)
endif

FUZZ_CORE_SRCS := $(sort $(wildcard Sources/CRunLoopCore/*.c))
FUZZ_CORE_OBJS := $(patsubst Sources/CRunLoopCore/%.c,$(FUZZ_DIR)/core/%.o,$(FUZZ_CORE_SRCS))
FUZZ_OBJ := $(FUZZ_DIR)/fuzz_loop.o

FUZZ_SAN = address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_COMMON_FLAGS = -std=c11 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE -DRL_DEBUG -pthread \
    -ISources/CRunLoopCore/include
FUZZ_CORE_FLAGS = $(FUZZ_COMMON_FLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN)
FUZZ_TEST_FLAGS = $(FUZZ_COMMON_FLAGS) -fblocks -fsanitize=fuzzer,$(FUZZ_SAN) \
    -isystem $(FUZZ_SWIFT_LIB) -isystem $(FUZZ_SWIFT_LIB)/CoreFoundation
FUZZ_LDFLAGS = -fsanitize=fuzzer,$(FUZZ_SAN) -fuse-ld=bfd -pthread -L$(FUZZ_SWIFT_LIB)/linux \
    -Wl,-rpath,$(FUZZ_SWIFT_LIB)/linux
FUZZ_LDLIBS = -lFoundation -lBlocksRuntime -lm
# How to replay one input by hand (printed on failure).
FUZZ_REPLAY = SWIFT_BACKTRACE=enable=no LSAN_OPTIONS=suppressions=Tests/fuzz/lsan.supp $(FUZZ_BIN)

# The environment of every run of the fuzzer. SWIFT_BACKTRACE: libFoundation loads the Swift
# runtime, whose crash backtracer would otherwise take libFuzzer's and ASan's signals.
FUZZ_ENV = SWIFT_BACKTRACE=enable=no \
    ASAN_OPTIONS="$${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}" \
    LSAN_OPTIONS="$${LSAN_OPTIONS:-suppressions=$(CURDIR)/Tests/fuzz/lsan.supp:print_suppressions=0}" \
    UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

.PHONY: fuzz fuzz-build

fuzz-build: $(FUZZ_BIN)

fuzz:
	@[ -f '$(FUZZ_SWIFT_LIB)/CoreFoundation/CoreFoundation.h' ] || \
	    { echo "fuzz: FAIL: no CoreFoundation under '$(FUZZ_SWIFT_LIB)' (swift on PATH, or FUZZ_SWIFT_LIB)"; exit 1; }
	@$(MAKE) --no-print-directory -s fuzz-build || { echo "fuzz: FAIL: the build failed"; exit 1; }
	@set -u; dir=$(FUZZ_DIR); log=$$dir/fuzz.log; status=0; replayed=0; \
	rm -rf $$dir/crashes; mkdir -p $$dir/crashes $$dir/corpus; \
	if [ '$(FUZZ_KEEP_CORPUS)' != 1 ]; then rm -rf $$dir/corpus; mkdir -p $$dir/corpus; fi; \
	for f in $(FUZZ_REGRESSIONS)/*; do \
	    case $${f##*/} in README*|.gitkeep|'*') continue ;; esac; \
	    replayed=$$((replayed + 1)); \
	    if ! $(FUZZ_ENV) $(FUZZ_BIN) "$$f" > $$dir/replay.log 2>&1; then \
	        grep -v '^INFO:' $$dir/replay.log | head -60; \
	        echo "  the kept input $$f fails; replay: $(FUZZ_REPLAY) $$f"; \
	        status=1; \
	    fi; \
	done; \
	echo "  $$replayed kept input(s) replayed; fuzzing for $(FUZZ_SECONDS) s (log: $$log)"; \
	start=$$(date +%s); \
	$(FUZZ_ENV) $(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -workers=1 -print_final_stats=1 \
	    -artifact_prefix=$$dir/crashes/ $(FUZZ_ARGS) $$dir/corpus $(FUZZ_SEEDS) > $$log 2>&1; \
	rc=$$?; secs=$$(( $$(date +%s) - start )); \
	runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log | tail -1); \
	last=$$(grep -E '^#[0-9]+.*cov: ' $$log | tail -1); \
	cov=$$(echo "$$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p'); \
	ft=$$(echo "$$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p'); \
	corp=$$(echo "$$last" | sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p'); \
	crashes=$$(ls $$dir/crashes | wc -l); \
	if [ $$rc -ne 0 ] || [ $$crashes -ne 0 ] || grep -q 'ERROR: LeakSanitizer' $$log; then \
	    status=1; \
	    grep -E -A40 '^fuzz_loop: FAIL|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' $$log \
	        | grep -v '^INFO:' | head -80; \
	    echo "  the fuzzer exited with status $$rc; full output in $$log"; \
	    for a in $$dir/crashes/*; do \
	        [ -f "$$a" ] || continue; \
	        echo "  input that fails: $$a"; \
	        echo "      replay: $(FUZZ_REPLAY) $$a"; \
	        echo "      read:   python3 Tests/fuzz/make_seeds.py --decode $$a"; \
	        echo "      keep:   minimize ($(FUZZ_BIN) -minimize_crash=1 -runs=10000 $$a), then copy it to $(FUZZ_REGRESSIONS)/"; \
	    done; \
	fi; \
	rate=$$( [ "$${runs:-0}" -gt 0 ] && [ $$secs -gt 0 ] && echo $$(( runs / secs )) || echo 0 ); \
	echo "fuzz: $$( [ $$status -eq 0 ] && echo passed || echo FAIL ): $${runs:-0} runs in $$secs s ($$rate/s)," \
	     "cov $${cov:-?} ft $${ft:-?}, corpus $${corp:-?} (inputs/bytes), $$replayed kept input(s) replayed"; \
	exit $$status

# Rebuild everything when the compiler, the toolchain or the flags change.
FUZZ_STAMP := $(FUZZ_DIR)/.flags
FUZZ_FLAGS_NOW = $(FUZZ_CC) $(FUZZ_CORE_FLAGS) $(FUZZ_TEST_FLAGS) $(FUZZ_LDFLAGS) $(FUZZ_LDLIBS)
$(FUZZ_STAMP): FORCE
	@mkdir -p $(@D)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(FUZZ_FLAGS_NOW)' ]; then printf '%s\n' '$(FUZZ_FLAGS_NOW)' > $@; fi

$(FUZZ_DIR)/core/%.o: Sources/CRunLoopCore/%.c $(FUZZ_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CORE_FLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_OBJ): Tests/fuzz/fuzz_loop.c $(FUZZ_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_TEST_FLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_BIN): $(FUZZ_OBJ) $(FUZZ_CORE_OBJS)
	$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $(FUZZ_OBJ) $(FUZZ_CORE_OBJS) $(FUZZ_LDLIBS)

-include $(FUZZ_CORE_OBJS:.o=.d) $(FUZZ_OBJ:.o=.d)
