# mk/faults.mk - the fault-injection job (Tests/faults/): `make faults`.
#
#   make faults [FAULTS_ARGS='-v sweep:timers fork']
#
# Compiles the core (Sources/CRunLoopCore/*.c) with -DRL_FAULT_INJECTION -DRL_DEBUG, and the job's
# program (Tests/faults/*.c) linked statically with it, under ASan+UBSan with the compiler that
# check-asan uses (Tests/runner/sancc.sh), into build/faults/; then runs it: the allocation-failure
# sweep of scripted scenarios, RLIMIT_NOFILE exhaustion, EINTR storms, fd close-and-reuse and
# fork (Tests/faults/faults.h says what each checks). Logs of the parts' stderr (sanitizer
# reports) go to build/faults/logs/. The last lines are the summary and `N passed, N failed`;
# the exit status is non-zero when a case failed. The run takes about 15 s on 2 vCPUs.
#
# Use clang's ASan (the default, ASAN_CC=clang): with gcc 12's libasan, whose allocator does not
# hold its locks across fork(), a child of the fork part can hang in malloc on a lock another
# thread held when it forked (llvm/llvm-project#63224).

FAULTS_DIR := build/faults
FAULTS_SRCS := $(wildcard Tests/faults/*.c)
FAULTS_CORE_SRCS := $(wildcard Sources/CRunLoopCore/*.c)
FAULTS_CORE_OBJS := $(patsubst Sources/CRunLoopCore/%.c,$(FAULTS_DIR)/core/%.o,$(FAULTS_CORE_SRCS))
FAULTS_OBJS := $(patsubst Tests/faults/%.c,$(FAULTS_DIR)/tests/%.o,$(FAULTS_SRCS))
FAULTS_BIN := $(FAULTS_DIR)/faults

# Set by the faults target to the compiler sancc.sh picks.
FAULTS_CC = cc
FAULTS_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FAULTS_COMMON_FLAGS = -std=c11 -O1 -g -D_GNU_SOURCE -pthread -fvisibility=hidden \
    -DRL_FAULT_INJECTION -DRL_DEBUG $(FAULTS_SAN)
FAULTS_CORE_FLAGS = $(FAULTS_COMMON_FLAGS) -Wall -Wextra -Werror -ISources/CRunLoopCore/include
FAULTS_TEST_FLAGS = $(FAULTS_COMMON_FLAGS) -Wall -Wextra -Werror -ISources/CRunLoopCore/include
FAULTS_LDFLAGS = -fuse-ld=bfd
FAULTS_ASAN_OPTIONS = detect_leaks=1:abort_on_error=1:strict_string_checks=1
FAULTS_UBSAN_OPTIONS = print_stacktrace=1:halt_on_error=1
FAULTS_ARGS =

.PHONY: faults faults-build

faults:
	@cc=$$(sh Tests/runner/sancc.sh address,undefined $(ASAN_CC) $(CC) gcc) && \
	echo "faults: with $$cc" && \
	$(MAKE) --no-print-directory faults-build FAULTS_CC="$$cc" && \
	ASAN_OPTIONS="$${ASAN_OPTIONS:-$(FAULTS_ASAN_OPTIONS)}" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-$(FAULTS_UBSAN_OPTIONS)}" \
	FAULTS_LOGDIR=$(FAULTS_DIR)/logs $(FAULTS_BIN) $(FAULTS_ARGS)

faults-build: $(FAULTS_BIN)

# Rebuild everything when the compiler or the flags change.
FAULTS_STAMP := $(FAULTS_DIR)/.flags
FAULTS_FLAGS_NOW = $(FAULTS_CC) $(FAULTS_CORE_FLAGS) $(FAULTS_TEST_FLAGS) $(FAULTS_LDFLAGS)
$(FAULTS_STAMP): FORCE
	@mkdir -p $(@D)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(FAULTS_FLAGS_NOW)' ]; then printf '%s\n' '$(FAULTS_FLAGS_NOW)' > $@; fi

$(FAULTS_DIR)/core/%.o: Sources/CRunLoopCore/%.c $(FAULTS_STAMP)
	@mkdir -p $(@D)
	$(FAULTS_CC) $(FAULTS_CORE_FLAGS) -MMD -MP -c -o $@ $<

$(FAULTS_DIR)/tests/%.o: Tests/faults/%.c $(FAULTS_STAMP)
	@mkdir -p $(@D)
	$(FAULTS_CC) $(FAULTS_TEST_FLAGS) -MMD -MP -c -o $@ $<

$(FAULTS_BIN): $(FAULTS_OBJS) $(FAULTS_CORE_OBJS)
	$(FAULTS_CC) $(FAULTS_SAN) $(FAULTS_LDFLAGS) -pthread -o $@ $(FAULTS_OBJS) $(FAULTS_CORE_OBJS) -lm

-include $(FAULTS_CORE_OBJS:.o=.d) $(FAULTS_OBJS:.o=.d)
