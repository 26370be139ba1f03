# mk/stress.mk - the seeded multi-thread stress test of the C core (Tests/stress/stress.c).
#
#   make stress [STRESS_SECONDS=20] [STRESS_SEED=4242|random] [STRESS_THREADS=3]
#               [STRESS_VARIANTS="asan tsan"]
#
# Builds the stress program together with the core's sources (-DRL_DEBUG) twice, into
# build/stress-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer, leak checking on) and
# build/stress-tsan/ (ThreadSanitizer, halt on the first report), with the compilers check-asan and
# check-tsan would use (Tests/runner/sancc.sh, ASAN_CC / TSAN_CC), runs each for STRESS_SECONDS
# with the same seed, prints one summary line per variant and a final line, and fails if either
# run failed. STRESS_SEED=random picks a seed from the clock and prints it. To replay a failure:
#   build/stress-tsan/stress --seed N --seconds S --threads T

STRESS_SECONDS ?= 20
STRESS_SEED ?= 4242
STRESS_THREADS ?= 3
STRESS_VARIANTS ?= asan tsan
# The core's sources compiled in (a copy elsewhere can be stressed the same way).
STRESS_CORE ?= Sources/CRunLoopCore

STRESS_SRCS = Tests/stress/stress.c $(sort $(wildcard $(STRESS_CORE)/*.c))
STRESS_DEPS = $(STRESS_SRCS) $(wildcard $(STRESS_CORE)/*.h $(STRESS_CORE)/include/*.h)
STRESS_CFLAGS = -std=c11 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -D_GNU_SOURCE -DRL_DEBUG -pthread \
                -I$(STRESS_CORE)/include
STRESS_SANFLAGS_asan = -fsanitize=address,undefined -fno-sanitize-recover=all -fuse-ld=bfd
STRESS_SANFLAGS_tsan = -fsanitize=thread
STRESS_SANITIZER_asan = address,undefined
STRESS_SANITIZER_tsan = thread

STRESS_ASAN_OPTIONS = detect_leaks=1:abort_on_error=1:strict_string_checks=1
STRESS_UBSAN_OPTIONS = print_stacktrace=1:halt_on_error=1
STRESS_TSAN_OPTIONS = halt_on_error=1:second_deadlock_stack=1

.PHONY: stress

# STRESS_CC is set by the recipe of `stress` (the compiler sancc.sh found) for the sub-make
# that builds one variant; the stamp rebuilds the binary when the compiler, flags or file list change.
build/stress-%/stress: $(STRESS_DEPS) build/stress-%/.flags
	$(STRESS_CC) $(STRESS_CFLAGS) $(STRESS_SANFLAGS_$*) -o $@ $(STRESS_SRCS) -lm

# Precious: else make deletes the stamp as an intermediate file, and every run rebuilds.
.PRECIOUS: build/stress-%/.flags
build/stress-%/.flags: FORCE
	@mkdir -p $(@D)
	@now='$(STRESS_CC) $(STRESS_CFLAGS) $(STRESS_SANFLAGS_$*) $(STRESS_SRCS)'; \
	if [ "$$(cat $@ 2>/dev/null)" != "$$now" ]; then printf '%s\n' "$$now" > $@; fi

stress:
	@seed='$(STRESS_SEED)'; \
	if [ "$$seed" = random ]; then \
	    seed=$$(( $$(date +%s%N) % 4294967296 )); echo "stress: STRESS_SEED=random: seed $$seed"; fi; \
	status=0; ran=; \
	for v in $(STRESS_VARIANTS); do \
	    case $$v in \
	    asan) ccs='$(ASAN_CC) $(CC) gcc'; san=$(STRESS_SANITIZER_asan) ;; \
	    tsan) ccs='$(TSAN_CC) $(CC) gcc'; san=$(STRESS_SANITIZER_tsan) ;; \
	    *) echo "stress: unknown variant $$v (asan, tsan)"; status=1; continue ;; \
	    esac; \
	    cc=$$(sh Tests/runner/sancc.sh $$san $$ccs 2>/dev/null) \
	        || { sh Tests/runner/sancc.sh $$san $$ccs; echo "stress ($$v): no working compiler"; status=1; continue; }; \
	    $(MAKE) --no-print-directory -s build/stress-$$v/stress STRESS_CC="$$cc" \
	        || { echo "stress ($$v): build with $$cc failed"; status=1; continue; }; \
	    ASAN_OPTIONS="$${ASAN_OPTIONS:-$(STRESS_ASAN_OPTIONS)}" \
	    UBSAN_OPTIONS="$${UBSAN_OPTIONS:-$(STRESS_UBSAN_OPTIONS)}" \
	    TSAN_OPTIONS="$${TSAN_OPTIONS:-$(STRESS_TSAN_OPTIONS)}" \
	    build/stress-$$v/stress --quiet --name $$v --seed $$seed --seconds $(STRESS_SECONDS) \
	        --threads $(STRESS_THREADS); \
	    rc=$$?; ran="$$ran $$v"; \
	    if [ $$rc -ne 0 ]; then \
	        status=1; \
	        echo "stress ($$v): FAILED (exit status $$rc, built with $$cc), seed $$seed; replay:" \
	             "build/stress-$$v/stress --seed $$seed --seconds $(STRESS_SECONDS) --threads $(STRESS_THREADS)"; \
	    fi; \
	done; \
	if [ $$status -eq 0 ]; then \
	    echo "stress: passed ($$(echo $$ran | sed 's/ /, /g')), seed $$seed, $(STRESS_SECONDS) s each"; \
	else \
	    echo "stress: FAILED, seed $$seed (make stress STRESS_SEED=$$seed STRESS_SECONDS=$(STRESS_SECONDS))"; \
	    exit 1; \
	fi
