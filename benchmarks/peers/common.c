/* common.c - dlopen helpers shared by the adapters. */
#include "peer.h"
#include <dlfcn.h>
#include <stdio.h>

void *peer_dlopen(peer_t *self, const char *const *names)
{
    const char *err = "no candidate";
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        err = dlerror();
    }
    copy_str(self->why, sizeof self->why, err ? err : "dlopen failed");
    return NULL;
}

void *peer_sym(peer_t *self, void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) snprintf(self->why, sizeof self->why, "symbol %s missing", name);
    return p;
}
