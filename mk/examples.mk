# mk/examples.mk - examples/: the patterns people build on a run loop, as programs that check
# their own claims (issue 11). Part of `make test`.
#
#   make examples [EXAMPLE=substring] [EXAMPLE_TIMEOUT=120]
#
# A C example is one file, examples/c/NAME.c, built against the static library into
# $(BUILD)/examples/NAME. One that needs more libraries says so in its own variable, set in the
# makefile of whoever added it: EXAMPLE_LIBS_NAME = ... (compile and link flags both).
# A Swift example is a folder, examples/swift/NAME/ (main.swift), declared in Package.swift as the
# executable target example-NAME. Each example prints what it shows and exits non-zero when one
# of its checks fails; `make examples` runs every one and fails on the first that fails.
# An example that is a server, not a self-checking program, has a driver script beside it:
# examples/c/NAME.sh or examples/swift/NAME.sh, run with the binary's path instead of the binary
# (examples/c/10-http-server.sh starts the HTTP server, checks it with curl, a raw client and
# wrk, and stops it with SIGTERM).

EXAMPLE ?=
EXAMPLE_TIMEOUT ?= 120
EXAMPLES_C := $(sort $(wildcard examples/c/*$(EXAMPLE)*.c))
EXAMPLES_C_BIN := $(patsubst examples/c/%.c,$(BUILD)/examples/%,$(EXAMPLES_C))
EXAMPLES_SWIFT := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard examples/swift/*$(EXAMPLE)*/main.swift)))))

$(BUILD)/examples/%: examples/c/%.c $(STATIC_LIB) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CORE_CPPFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(EXAMPLE_LIBS_$*) $(LDLIBS)

.PHONY: examples examples-c examples-swift
examples: examples-c examples-swift

examples-c: $(EXAMPLES_C_BIN)
	@set -e; for bin in $(EXAMPLES_C_BIN); do \
	    echo "examples: $$bin"; \
	    driver=examples/c/$$(basename $$bin).sh; [ -f $$driver ] || driver=; \
	    timeout $(EXAMPLE_TIMEOUT) $${driver:+bash $$driver} $$bin || { echo "examples: $$bin failed ($$?)"; exit 1; }; \
	done

# Without CC: `make examples CC=gcc` (as make test runs it) exports CC, and SwiftPM would then
# compile the package's C targets with gcc, which knows no -fblocks.
examples-swift:
ifneq ($(EXAMPLES_SWIFT),)
	env -u CC $(SWIFT) build $(SWIFT_WFLAGS)
	@set -e; bin=$$(env -u CC $(SWIFT) build --show-bin-path); for e in $(EXAMPLES_SWIFT); do \
	    echo "examples: example-$$e"; \
	    driver=examples/swift/$$e.sh; [ -f $$driver ] || driver=; \
	    timeout $(EXAMPLE_TIMEOUT) $${driver:+bash $$driver} "$$bin/example-$$e" || { echo "examples: example-$$e failed ($$?)"; exit 1; }; \
	done
endif
