/* glib_types.h - the GLib types that benchmarks/peers/glib.c and benchmarks/http/server_glib.c
 * declare themselves, as both load GLib with dlopen (no -dev package): gboolean, GSourceFunc,
 * and GSourceFuncs (six pointers, GLib 2.x). */
#ifndef BENCH_GLIB_TYPES_H
#define BENCH_GLIB_TYPES_H

typedef int gboolean;
typedef gboolean (*GSourceFunc)(void *data);
typedef struct {
    gboolean (*prepare)(void *source, int *timeout);
    gboolean (*check)(void *source);
    gboolean (*dispatch)(void *source, GSourceFunc cb, void *data);
    void (*finalize)(void *source);
    void *closure_callback, *closure_marshal;
} GSourceFuncs;

#endif /* BENCH_GLIB_TYPES_H */
