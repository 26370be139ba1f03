# mk/embed.mk - driving the loop from another event loop (rl_loop_get_backend_fd/_timeout): a real
# GMainLoop hosts a loop in Tests/embed/glib_host.c, which checks timer precision, cross-thread
# signals, fd sources and idle CPU, and prints the figures. Part of `make test`.
#
#   make embed
#
# Needs GLib's headers (Debian: libglib2.0-dev; .ci/run installs it). Also gives the libraries
# of the GLib example, examples/c/09-glib-host.c (mk/examples.mk).

GLIB_FLAGS = $(shell $(PKG_CONFIG) --cflags --libs glib-2.0 2>/dev/null)
EXAMPLE_LIBS_09-glib-host = $(GLIB_FLAGS)

$(BUILD)/embed/glib_host: Tests/embed/glib_host.c $(STATIC_LIB) $(HEADER)
	@$(PKG_CONFIG) --exists glib-2.0 || { echo "embed: GLib's headers are missing (Debian: apt-get install libglib2.0-dev)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CORE_CPPFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(GLIB_FLAGS) $(LDLIBS)

# The example's own rule (it wins over mk/examples.mk's pattern rule), for a clear message.
$(BUILD)/examples/09-glib-host: examples/c/09-glib-host.c $(STATIC_LIB) $(HEADER)
	@$(PKG_CONFIG) --exists glib-2.0 || { echo "examples: 09-glib-host needs GLib's headers (Debian: apt-get install libglib2.0-dev)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CORE_CPPFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(GLIB_FLAGS) $(LDLIBS)

.PHONY: embed
embed: $(BUILD)/embed/glib_host
	$(BUILD)/embed/glib_host
