/* table.c - the summary table printed last: one row per metric and peer, with the ratio of each
 * figure to the raw floor's (the "epoll" peer) and to CFRunLoop's for the same metric. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char metric[64], peer[32], unit[16], note[96];
    double value;
    int sense, has_value;
} row_t;

static row_t *rows;
static int nrows, cap;

static row_t *new_row(const char *metric, const char *peer)
{
    row_t *r;
    if (nrows == cap) {
        cap = cap ? cap * 2 : 64;
        rows = realloc(rows, (size_t)cap * sizeof *rows);
    }
    r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    copy_str(r->metric, sizeof r->metric, metric);
    copy_str(r->peer, sizeof r->peer, peer);
    return r;
}

void table_add(const char *metric, const char *peer, double value, const char *unit, int sense)
{
    row_t *r = new_row(metric, peer);
    r->value = value;
    r->has_value = 1;
    r->sense = sense;
    copy_str(r->unit, sizeof r->unit, unit);
}

void table_note(const char *metric, const char *peer, const char *note)
{
    snprintf(new_row(metric, peer)->note, sizeof rows[0].note, "%s", note);
}

static const row_t *find(const char *metric, const char *peer)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].has_value && !strcmp(rows[i].metric, metric) && !strcmp(rows[i].peer, peer))
            return &rows[i];
    return NULL;
}

static void fmt_value(char *out, size_t n, double v)
{
    double a = fabs(v);
    if (a >= 1e7) snprintf(out, n, "%.3gM", v / 1e6);
    else if (a >= 1e4) snprintf(out, n, "%.1fk", v / 1e3);
    else if (a >= 100 || v == floor(v)) snprintf(out, n, "%.0f", v);
    else snprintf(out, n, "%.3g", v);
}

static void fmt_ratio(char *out, size_t n, const row_t *r, const row_t *ref)
{
    if (!ref || ref == r) copy_str(out, n, ref == r ? "1" : "-");
    else if (ref->value == 0) snprintf(out, n, "-");
    else snprintf(out, n, "%.2f", r->value / ref->value);
}

void table_print(FILE *out, const char *floor_peer, const char *cf_peer)
{
    const char *last = "";
    fprintf(out, "\n%-34s %-10s %12s %-6s %9s %9s\n", "metric", "peer", "value", "unit",
            "x floor", "x CF");
    fprintf(out, "%.*s\n", 86, "--------------------------------------------------------------"
                                 "----------------------------------------");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        char v[32], rf[16], rc[16];
        const char *metric = strcmp(r->metric, last) ? r->metric : "";
        last = r->metric;
        if (!r->has_value) {
            fprintf(out, "%-34s %-10s %12s  (%s)\n", metric, r->peer, "n/a", r->note);
            continue;
        }
        fmt_value(v, sizeof v, r->value);
        fmt_ratio(rf, sizeof rf, r, find(r->metric, floor_peer));
        fmt_ratio(rc, sizeof rc, r, find(r->metric, cf_peer));
        fprintf(out, "%-34s %-10s %12s %-6s %9s %9s%s%s\n", metric, r->peer, v, r->unit, rf, rc,
                r->note[0] ? "  " : "", r->note);
    }
    fprintf(out, "(x floor / x CF: value divided by the %s / %s figure of the same metric; "
                 "%s)\n", floor_peer, cf_peer, "lower is better for times, higher for rates");
}
