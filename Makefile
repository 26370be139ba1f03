# CRunLoop - GNU make build of the C core, its tests and its install.
#
#   make                 build/libcrunloop.a and build/libcrunloop.so.X.Y.Z (+ symlinks)
#   make check [T=sub]   build and run the C tests (only those whose name contains sub)
#   make test            every test: gcc and clang, conformance, install, SwiftPM, sanitizers
#   make install         into $(DESTDIR)$(PREFIX); make uninstall; make clean
#   make check-asan | check-tsan | check-valgrind | install-check | conformance | swift-test
#   make swift-experimental   the experimental executors product, in Tests/experimental-executors
#   make examples [EXAMPLE=sub]   build and run examples/ (mk/examples.mk)
#   make embed           a loop driven by a real GMainLoop through its backend fd (mk/embed.mk)
#   make readme-check    README.md's SwiftPM example, built and run as a user would (mk/readme.mk)
#
# Needs only a C compiler, ar and the usual tools; `test` also needs clang, swift, pkg-config.

CC ?= cc
AR ?= ar
SWIFT ?= swift
PKG_CONFIG ?= pkg-config
VALGRIND ?= valgrind

CFLAGS = -std=c11 -O2 -g -Wall -Wextra -Werror -fvisibility=hidden -fPIC -D_GNU_SOURCE -pthread
# Appended to CFLAGS and to link lines: EXTRA_CFLAGS for you, SANFLAGS for the sanitizer builds,
# DEBUGFLAGS=-DRL_DEBUG for a debug build of the core (it checks its invariants after every change
# of membership, and the C tests check them after every step; `make test` uses it for the clang,
# ASan and TSan runs, and keeps the gcc run a release build).
EXTRA_CFLAGS =
SANFLAGS =
DEBUGFLAGS =
LDFLAGS =
LDLIBS = -pthread -lm

PREFIX = /usr/local
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
DESTDIR =

# Build variant folder: build (default), build/clang, build/asan, build/tsan.
BUILD = build

# The compilers tried, in order, for check-asan and check-tsan: the first whose sanitizer runtime
# works here is used (Tests/runner/sancc.sh). The Swift toolchain's clang has a working ASan but
# a TSan runtime that needs libdispatch; then gcc's (libtsan) is used, or say TSAN_CC=clang-14.
SAN_CC ?= clang
ASAN_CC ?= $(SAN_CC)
TSAN_CC ?= $(SAN_CC)

HEADER := Sources/CRunLoopCore/include/crunloop.h
version_of = $(shell sed -n 's/^\#define[[:space:]]*RL_VERSION_$(1)[[:space:]][[:space:]]*\([0-9][0-9]*\).*/\1/p' $(HEADER))
MAJOR := $(call version_of,MAJOR)
MINOR := $(call version_of,MINOR)
PATCH := $(call version_of,PATCH)
VERSION := $(MAJOR).$(MINOR).$(PATCH)
ifeq ($(strip $(MAJOR)),)
$(error cannot read RL_VERSION_MAJOR from $(HEADER))
endif

CORE_SRCS := $(wildcard Sources/CRunLoopCore/*.c)
SUITE_SRCS := $(wildcard Tests/CRunLoopCoreSuite/*.c)
RUNNER_SRCS := Tests/runner/main.c

OBJ := $(BUILD)/obj
CORE_OBJS := $(patsubst Sources/CRunLoopCore/%.c,$(OBJ)/core/%.o,$(CORE_SRCS))
TEST_OBJS := $(patsubst Tests/%.c,$(OBJ)/tests/%.o,$(SUITE_SRCS) $(RUNNER_SRCS))

STATIC_LIB := $(BUILD)/libcrunloop.a
SHARED_LIB := $(BUILD)/libcrunloop.so.$(VERSION)
SHARED_LINKS := $(BUILD)/libcrunloop.so.$(MAJOR) $(BUILD)/libcrunloop.so
RUNNER := $(BUILD)/runner
PC_FILE := $(BUILD)/crunloop.pc

ALL_CFLAGS = $(CFLAGS) $(DEBUGFLAGS) $(EXTRA_CFLAGS) $(SANFLAGS)
CORE_CPPFLAGS = -ISources/CRunLoopCore/include
TEST_CPPFLAGS = -ISources/CRunLoopCore/include -ITests/CRunLoopCoreSuite/include

.PHONY: all check conformance install uninstall clean test install-check \
        check-asan check-tsan check-valgrind swift-build swift-test swift-sanitize \
        swift-experimental FORCE

all: $(STATIC_LIB) $(SHARED_LIB) $(SHARED_LINKS)

# ---- Objects, rebuilt when the compiler or the flags change (a stamp per build folder) --------

FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW = $(CC) $(ALL_CFLAGS) $(LDFLAGS) $(LDLIBS)
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(FLAGS_NOW)' ]; then printf '%s\n' '$(FLAGS_NOW)' > $@; fi

$(OBJ)/core/%.o: Sources/CRunLoopCore/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CORE_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(OBJ)/tests/%.o: Tests/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(TEST_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

-include $(CORE_OBJS:.o=.d) $(TEST_OBJS:.o=.d)

# ---- Libraries ---------------------------------------------------------------------------------

$(STATIC_LIB): $(CORE_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $(CORE_OBJS)

$(SHARED_LIB): $(CORE_OBJS) Sources/CRunLoopCore/exports.map
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libcrunloop.so.$(MAJOR) -Wl,-z,defs \
	    -Wl,--version-script=Sources/CRunLoopCore/exports.map -o $@ $(CORE_OBJS) $(LDLIBS)

$(BUILD)/libcrunloop.so.$(MAJOR): $(SHARED_LIB)
	ln -sf libcrunloop.so.$(VERSION) $@

$(BUILD)/libcrunloop.so: $(BUILD)/libcrunloop.so.$(MAJOR)
	ln -sf libcrunloop.so.$(MAJOR) $@

# ---- Tests -------------------------------------------------------------------------------------

# The runner links the tests against the static library.
$(RUNNER): $(TEST_OBJS) $(STATIC_LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJS) $(STATIC_LIB) $(LDLIBS)

# T=substring runs only the tests whose name contains it.
check: $(RUNNER)
	$(RUNNER) $(T)

conformance: all
	CC='$(CC)' CRUNLOOP_BUILD='$(abspath $(BUILD))' sh Tests/conformance/run.sh

# GNU ld: the Swift toolchain's clang links with gold, which warns about every ASan helper.
ASAN_LDFLAGS = -fuse-ld=bfd

check-asan:
	@cc=$$(sh Tests/runner/sancc.sh address,undefined $(ASAN_CC) $(CC) gcc) && \
	echo "check-asan: with $$cc" && \
	ASAN_OPTIONS="$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
	$(MAKE) --no-print-directory check BUILD=build/asan CC="$$cc" LDFLAGS='$(ASAN_LDFLAGS)' \
	    SANFLAGS='-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer'

check-tsan:
	@cc=$$(sh Tests/runner/sancc.sh thread $(TSAN_CC) $(CC) gcc) && \
	echo "check-tsan: with $$cc" && \
	TSAN_OPTIONS="$${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}" \
	$(MAKE) --no-print-directory check BUILD=build/tsan CC="$$cc" SANFLAGS='-fsanitize=thread'

# Optional (not part of `make test`): the runner under valgrind's memcheck.
check-valgrind: $(RUNNER)
	@command -v $(VALGRIND) >/dev/null 2>&1 || { echo "check-valgrind: $(VALGRIND) not found" >&2; exit 1; }
	RLT_TIMEOUT=$${RLT_TIMEOUT:-1200} $(VALGRIND) --leak-check=full --error-exitcode=1 \
	    --errors-for-leak-kinds=definite,indirect $(RUNNER) $(T)

# ---- SwiftPM -----------------------------------------------------------------------------------

SWIFT_WFLAGS = -Xcc -Wall -Xcc -Wextra -Xcc -Werror
# Runs a swift test command and repeats what failed at the end of its output (CI keeps the tail).
SWIFTTEST = sh $(CURDIR)/Tests/runner/swifttest.sh

swift-build:
	$(SWIFT) build --build-tests $(SWIFT_WFLAGS)

# The C suite (CRunLoopCoreTests) runs apart from the Swift layer's tests: some C tests count the
# process's open descriptors or children, which the Swift tests, running meanwhile in the same
# process, would change.
#
# The suites that fork (their names end in ForkTests) run alone too, one at a time: a child of
# fork holds copies of every descriptor the process has and, under a sanitizer, may stop in a
# lock that another test's thread held at the fork. Run beside other tests, such a child kept
# another test's socket open past its close, or hung itself.
SWIFT_APART = --skip CRunLoopCoreTests --skip ForkTests

swift-test: swift-build
	$(SWIFTTEST) $(SWIFT) test --skip-build $(SWIFT_WFLAGS) --filter CRunLoopCoreTests
	$(SWIFTTEST) $(SWIFT) test --skip-build $(SWIFT_WFLAGS) --filter ForkTests --no-parallel
	$(SWIFTTEST) $(SWIFT) test --skip-build $(SWIFT_WFLAGS) $(SWIFT_APART)

# The experimental product (Sources/RunLoopExperimentalExecutors, Swift 6.3 SPI), tested the way
# an app uses it: Tests/experimental-executors is a package of its own, built with the flag an
# app needs (its Package.swift), with its own .build folder.
swift-experimental:
	cd Tests/experimental-executors && $(SWIFT) build --build-tests $(SWIFT_WFLAGS) && \
	    $(SWIFTTEST) $(SWIFT) test --skip-build

# Separate scratch folders, so that the three configurations don't rebuild one another. XCTest
# is left out of these runs: the toolchain's XCTest leaks a few objects at exit, which LeakSanitizer
# reports; the tests are Swift Testing ones.
SWIFT_SANFLAGS = --disable-xctest

swift-sanitize:
	$(SWIFTTEST) $(SWIFT) test --sanitize=address --scratch-path .build-asan $(SWIFT_SANFLAGS) --filter CRunLoopCoreTests
	$(SWIFTTEST) $(SWIFT) test --sanitize=address --scratch-path .build-asan $(SWIFT_SANFLAGS) --filter ForkTests --no-parallel
	$(SWIFTTEST) $(SWIFT) test --sanitize=address --scratch-path .build-asan $(SWIFT_SANFLAGS) $(SWIFT_APART)
	$(SWIFTTEST) $(SWIFT) test --sanitize=thread --scratch-path .build-tsan $(SWIFT_SANFLAGS) --filter CRunLoopCoreTests
	$(SWIFTTEST) $(SWIFT) test --sanitize=thread --scratch-path .build-tsan $(SWIFT_SANFLAGS) $(SWIFT_APART)

# ---- Everything --------------------------------------------------------------------------------

test:
	$(MAKE) --no-print-directory check CC=gcc
	$(MAKE) --no-print-directory check CC=clang BUILD=build/clang DEBUGFLAGS=-DRL_DEBUG
	$(MAKE) --no-print-directory install-check CC=gcc
	$(MAKE) --no-print-directory conformance CC=gcc
	$(MAKE) --no-print-directory swift-test
	$(MAKE) --no-print-directory readme-check
	$(MAKE) --no-print-directory swift-experimental
	$(MAKE) --no-print-directory examples CC=gcc
	$(MAKE) --no-print-directory embed CC=gcc
	$(MAKE) --no-print-directory swift-sanitize
	$(MAKE) --no-print-directory check-asan DEBUGFLAGS=-DRL_DEBUG
	$(MAKE) --no-print-directory check-tsan DEBUGFLAGS=-DRL_DEBUG
	$(MAKE) --no-print-directory faults
	$(MAKE) --no-print-directory stress
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory docs
	$(MAKE) --no-print-directory bench-smoke
	$(MAKE) --no-print-directory bench-compare-check CC=gcc
	$(MAKE) --no-print-directory bench-report-check

# ---- Install -----------------------------------------------------------------------------------

$(PC_FILE): crunloop.pc.in $(HEADER) FORCE
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' crunloop.pc.in > $@

install: all $(PC_FILE)
	install -d '$(DESTDIR)$(LIBDIR)/pkgconfig' '$(DESTDIR)$(INCLUDEDIR)'
	install -m 644 $(STATIC_LIB) '$(DESTDIR)$(LIBDIR)/libcrunloop.a'
	install -m 755 $(SHARED_LIB) '$(DESTDIR)$(LIBDIR)/libcrunloop.so.$(VERSION)'
	ln -sf libcrunloop.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/libcrunloop.so.$(MAJOR)'
	ln -sf libcrunloop.so.$(MAJOR) '$(DESTDIR)$(LIBDIR)/libcrunloop.so'
	install -m 644 $(HEADER) '$(DESTDIR)$(INCLUDEDIR)/crunloop.h'
	install -m 644 $(PC_FILE) '$(DESTDIR)$(LIBDIR)/pkgconfig/crunloop.pc'
	install -d '$(DESTDIR)$(CMAKEDIR)'
	install -m 644 $(CMAKE_FILES) '$(DESTDIR)$(CMAKEDIR)/'

uninstall:
	rm -f '$(DESTDIR)$(LIBDIR)/libcrunloop.a' '$(DESTDIR)$(LIBDIR)/libcrunloop.so.$(VERSION)' \
	    '$(DESTDIR)$(LIBDIR)/libcrunloop.so.$(MAJOR)' '$(DESTDIR)$(LIBDIR)/libcrunloop.so' \
	    '$(DESTDIR)$(INCLUDEDIR)/crunloop.h' '$(DESTDIR)$(LIBDIR)/pkgconfig/crunloop.pc' \
	    '$(DESTDIR)$(CMAKEDIR)/crunloop-config.cmake' '$(DESTDIR)$(CMAKEDIR)/crunloop-config-version.cmake'
	-rmdir '$(DESTDIR)$(CMAKEDIR)' 2>/dev/null

# Stage an install in a temporary DESTDIR, build Tests/install-check/prog.c against it through
# pkg-config, dynamically and statically, run both, and check that the shared library exports
# rl_* / RL_* symbols only and carries the right SONAME.
install-check: all
	@set -e; \
	stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	$(MAKE) --no-print-directory install DESTDIR="$$stage" >/dev/null; \
	libdir="$$stage$(LIBDIR)"; \
	export PKG_CONFIG_PATH="$$libdir/pkgconfig" PKG_CONFIG_LIBDIR="$$libdir/pkgconfig" \
	       PKG_CONFIG_SYSROOT_DIR="$$stage"; \
	v=$$($(PKG_CONFIG) --modversion crunloop); \
	[ "$$v" = "$(VERSION)" ] || { echo "install-check: pkg-config says version $$v, not $(VERSION)"; exit 1; }; \
	cflags=$$($(PKG_CONFIG) --cflags crunloop); \
	libs=$$($(PKG_CONFIG) --libs crunloop); \
	static_libs=$$($(PKG_CONFIG) --static --libs crunloop | sed 's/-lcrunloop\b/-l:libcrunloop.a/'); \
	echo "install-check: cc prog.c $$cflags $$libs"; \
	$(CC) -std=c11 -Wall -Wextra -Werror -o "$$stage/prog-dynamic" Tests/install-check/prog.c $$cflags $$libs; \
	echo "install-check: cc prog.c $$cflags $$static_libs"; \
	$(CC) -std=c11 -Wall -Wextra -Werror -o "$$stage/prog-static" Tests/install-check/prog.c $$cflags $$static_libs; \
	readelf -d "$$stage/prog-dynamic" | grep -q 'NEEDED.*\[libcrunloop\.so\.$(MAJOR)\]' \
	    || { echo "install-check: prog-dynamic does not need libcrunloop.so.$(MAJOR)"; exit 1; }; \
	if readelf -d "$$stage/prog-static" | grep -q 'NEEDED.*libcrunloop'; then \
	    echo "install-check: prog-static needs libcrunloop.so"; exit 1; fi; \
	LD_LIBRARY_PATH="$$libdir" "$$stage/prog-dynamic"; \
	"$$stage/prog-static"; \
	readelf -d "$$libdir/libcrunloop.so.$(VERSION)" | grep -q 'SONAME.*\[libcrunloop\.so\.$(MAJOR)\]' \
	    || { echo "install-check: wrong SONAME"; exit 1; }; \
	nm -D --defined-only "$$libdir/libcrunloop.so.$(VERSION)" | awk '{ print $$NF }' > "$$stage/exports"; \
	[ -s "$$stage/exports" ] || { echo "install-check: the shared library exports nothing"; exit 1; }; \
	if grep -Ev '^(rl_|RL_)' "$$stage/exports"; then \
	    echo "install-check: the shared library exports the symbols above (only rl_* and RL_* may be)"; \
	    exit 1; fi; \
	echo "install-check: ok ($$(wc -l < "$$stage/exports") symbols exported, all rl_*/RL_*)"

clean:
	rm -rf build

FORCE:

# Jobs with a makefile of their own (mk/*.mk): the fuzzer, fault injection, stress, the README.
include $(wildcard mk/*.mk)

# ---- Benchmarks (benchmarks/README.md): builds the core -O2 into build/bench and runs them all --

.PHONY: bench bench-smoke docs
bench:
	benchmarks/run $(BENCH_ARGS)

# The benchmarks in their quick mode, so that they never rot: the C suite against every peer
# found, then the Swift wrapper's cost next to the C API's (benchmarks/run runs both).
bench-smoke:
	benchmarks/run --quick
	@# the CPU clock of the idle and throughput rows counts the CPU used just before a reading
	build/bench/crunloop-bench --clock-check
	@# --scenario selects the latency scenarios, and an unknown name exits 2
	build/bench/crunloop-bench --quick --bench latency --scenario samecpu --only epoll \
	    --json build/bench/scenario-smoke/latest.json > build/bench/scenario-smoke.log
	@grep -q "scenario samecpu" build/bench/scenario-smoke.log && \
	    ! grep -Eq "scenario (idle|busy|load|unpinned)" build/bench/scenario-smoke.log || \
	    { echo "bench-smoke: --scenario samecpu ran other scenarios"; exit 1; }
	@st=0; build/bench/crunloop-bench --scenario samecpu,nosuch --check 2>/dev/null || st=$$?; \
	    [ $$st = 2 ] || { echo "bench-smoke: --scenario nosuch exited $$st, not 2"; exit 1; }
	@st=0; benchmarks/run --quick --scenario nosuch >/dev/null 2>&1 || st=$$?; \
	    [ $$st = 2 ] || { echo "bench-smoke: benchmarks/run --scenario nosuch exited $$st, not 2"; exit 1; }
	@echo "bench-smoke: --scenario selects, and rejects an unknown name with exit 2"

# DocC documentation of the Swift module RunLoop (warnings are errors), as a static website in
# build/docs: python3 -m http.server -b 127.0.0.1 -d build/docs 8000, then http://127.0.0.1:8000/.
docs:
	Scripts/build-docs.sh
