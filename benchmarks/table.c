/* table.c - the summary table printed last: one row per metric and peer, the median over the
 * rounds with the worst and best round as [min-max], and the ratio of the median to the raw
 * floor's (the "epoll" peer) and to CFRunLoop's for the same metric. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char metric[64], peer[32], unit[16], note[96];
    double value, min, max;     /* value: the median when rounds > 1 */
    int sense, has_value, rounds;
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

void table_add_spread(const char *metric, const char *peer, double median, double min, double max,
                      int rounds, const char *unit, int sense)
{
    row_t *r = new_row(metric, peer);
    r->value = median;
    r->min = min;
    r->max = max;
    r->rounds = rounds;
    r->has_value = 1;
    r->sense = sense;
    copy_str(r->unit, sizeof r->unit, unit);
}

void table_add(const char *metric, const char *peer, double value, const char *unit, int sense)
{
    table_add_spread(metric, peer, value, value, value, 1, unit, sense);
}

void table_note(const char *metric, const char *peer, const char *note)
{
    snprintf(new_row(metric, peer)->note, sizeof rows[0].note, "%s", note);
}

/* A note for a row already added (capped runs); the first row of metric and peer. */
void table_annotate(const char *metric, const char *peer, const char *note)
{
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].metric, metric) && !strcmp(rows[i].peer, peer)) {
            copy_str(rows[i].note, sizeof rows[i].note, note);
            return;
        }
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
    if (isnan(v)) snprintf(out, n, "-");
    else if (a >= 1e7) snprintf(out, n, "%.3gM", v / 1e6);
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

/* "[min-max]" of the rounds, empty for a figure measured once. */
static void fmt_spread(char *out, size_t n, const row_t *r)
{
    char lo[24], hi[24];
    if (r->rounds < 2) { copy_str(out, n, ""); return; }
    fmt_value(lo, sizeof lo, r->min);
    fmt_value(hi, sizeof hi, r->max);
    snprintf(out, n, "[%s-%s]", lo, hi);
}

static void print_row(FILE *out, const row_t *r, const char *metric, const char *floor_peer,
                      const char *cf_peer)
{
    char v[32], sp[64], rf[16], rc[16];
    if (!r->has_value) {
        fprintf(out, "%-44s %-10s %10s  (%s)\n", metric, r->peer, "n/a", r->note);
        return;
    }
    fmt_value(v, sizeof v, r->value);
    fmt_spread(sp, sizeof sp, r);
    fmt_ratio(rf, sizeof rf, r, find(r->metric, floor_peer));
    fmt_ratio(rc, sizeof rc, r, find(r->metric, cf_peer));
    fprintf(out, "%-44s %-10s %10s %-21s %-7s %8s %8s%s%s\n", metric, r->peer, v, sp, r->unit, rf,
            rc, r->note[0] ? "  " : "", r->note);
}

/* Rows are printed grouped by metric, metrics in the order they were first added. */
void table_print(FILE *out, const char *floor_peer, const char *cf_peer)
{
    char *done = calloc((size_t)nrows + 1, 1);
    fprintf(out, "\n%-44s %-10s %10s %-21s %-7s %8s %8s\n", "metric", "peer", "median",
            "[worst-best round]", "unit", "x floor", "x CF");
    fprintf(out, "%.*s\n", 114, "----------------------------------------------------------"
                                  "--------------------------------------------------------");
    for (int m = 0; m < nrows; m++) {
        if (done[m]) continue;
        for (int i = m; i < nrows; i++) {
            const row_t *r = &rows[i];
            if (done[i] || strcmp(r->metric, rows[m].metric)) continue;
            done[i] = 1;
            print_row(out, r, i == m ? r->metric : "", floor_peer, cf_peer);
        }
    }
    fprintf(out, "(median over the rounds; [worst-best round] is [min-max] over them; x floor / x CF: "
                 "median divided by the %s / %s median of the same metric; lower is better for times "
                 "and bytes, higher for rates)\n", floor_peer, cf_peer);
    free(done);
}
