/* json.c - see json.h. */
#include "json.h"
#include <math.h>

void json_init(json_t *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = 1;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void member(json_t *j, const char *key)
{
    if (!j->first[j->depth]) fputc(',', j->f);
    j->first[j->depth] = 0;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
    if (key) {
        put_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void open_(json_t *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth < 63) j->depth++;
    j->first[j->depth] = 1;
}

void json_obj(json_t *j, const char *key) { open_(j, key, '{'); }
void json_arr(json_t *j, const char *key) { open_(j, key, '['); }

void json_end(json_t *j, char close)
{
    int empty = j->first[j->depth];
    if (j->depth > 0) j->depth--;
    if (!empty) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
    }
    fputc(close, j->f);
    if (j->depth == 0) fputc('\n', j->f);
}

void json_str(json_t *j, const char *key, const char *v)
{
    member(j, key);
    if (v) put_string(j->f, v);
    else fputs("null", j->f);
}

void json_num(json_t *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v)) fprintf(j->f, "%.9g", v);
    else fputs("null", j->f);
}

void json_int(json_t *j, const char *key, long long v)
{
    member(j, key);
    fprintf(j->f, "%lld", v);
}

void json_bool(json_t *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}
