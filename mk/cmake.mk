# mk/cmake.mk - the CMake package config, installed next to pkg-config's crunloop.pc:
# $(LIBDIR)/cmake/crunloop/crunloop-config.cmake (imported targets crunloop::crunloop, shared,
# and crunloop::crunloop_static) and crunloop-config-version.cmake. `make install` installs them
# (the Makefile's install recipe), `make install-check` builds an outside CMake project,
# Tests/install-check/cmake, against a staged install (needs cmake).

CMAKE ?= cmake
CMAKEDIR = $(LIBDIR)/cmake/crunloop
CMAKE_FILES := $(BUILD)/crunloop-config.cmake $(BUILD)/crunloop-config-version.cmake

# The config finds the headers from its own folder, so that a staged or moved install works.
CMAKE_SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(MAJOR)|g' -e 's|@MINOR@|$(MINOR)|g' \
    -e "s|@INCLUDEDIR_FROM_HERE@|$$(realpath -m --relative-to='$(CMAKEDIR)' '$(INCLUDEDIR)')|g" \
    -e "s|@SIZEOF_VOID_P@|$$($(CC) -dM -E - </dev/null | sed -n 's/^\#define __SIZEOF_POINTER__ //p')|g"

$(BUILD)/crunloop-config.cmake: crunloop-config.cmake.in $(HEADER) FORCE
	@mkdir -p $(@D)
	$(CMAKE_SUBST) $< > $@

$(BUILD)/crunloop-config-version.cmake: crunloop-config-version.cmake.in $(HEADER) FORCE
	@mkdir -p $(@D)
	$(CMAKE_SUBST) $< > $@

install: $(CMAKE_FILES)

# For each of shared and static: configure Tests/install-check/cmake against the staged install
# (found through CMAKE_PREFIX_PATH, as a user's project finds it), build, check what prog needs,
# and run it.
.PHONY: install-check-cmake
install-check: install-check-cmake
install-check-cmake: all
	@command -v $(CMAKE) >/dev/null 2>&1 || { echo "install-check: $(CMAKE) not found (apt-get install cmake)"; exit 1; }
	@set -e; \
	stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	$(MAKE) --no-print-directory install DESTDIR="$$stage" >/dev/null; \
	for link in shared static; do \
	    echo "install-check: cmake, find_package(crunloop $(VERSION) EXACT), linked $$link"; \
	    $(CMAKE) -S Tests/install-check/cmake -B "$$stage/cmake-$$link" -DCMAKE_C_COMPILER='$(CC)' \
	        -DCMAKE_PREFIX_PATH="$$stage$(PREFIX)" -DCRUNLOOP_LINK=$$link \
	        -DCRUNLOOP_EXPECTED_VERSION=$(VERSION) > "$$stage/cmake-$$link.log" 2>&1 \
	        || { cat "$$stage/cmake-$$link.log"; exit 1; }; \
	    $(CMAKE) --build "$$stage/cmake-$$link" > "$$stage/build-$$link.log" 2>&1 \
	        || { cat "$$stage/build-$$link.log"; exit 1; }; \
	    prog="$$stage/cmake-$$link/prog"; \
	    if [ $$link = shared ]; then \
	        readelf -d "$$prog" | grep -q 'NEEDED.*\[libcrunloop\.so\.$(MAJOR)\]' \
	            || { echo "install-check: cmake's shared prog does not need libcrunloop.so.$(MAJOR)"; exit 1; }; \
	    elif readelf -d "$$prog" | grep -q 'NEEDED.*libcrunloop'; then \
	        echo "install-check: cmake's static prog needs libcrunloop.so"; exit 1; \
	    fi; \
	    "$$prog"; \
	done
