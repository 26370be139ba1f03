/* plot.c - latency CDFs: always an SVG of our own; a PNG as well when gnuplot is installed.
 * x: latency in microseconds, log scale; y: fraction of samples at or below. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

char g_out_dir[1024] = "benchmarks/results";

static const char *const colours[] = { "#000000", "#7f7f7f", "#d62728", "#1f77b4", "#2ca02c",
                                       "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf" };

static void write_svg(const char *path, const char *title, const plot_series_t *s, int n)
{
    FILE *f = fopen(path, "w");
    const double W = 900, H = 560, L = 70, R = 170, T = 40, B = 60;
    double lo = 1e300, hi = 0;
    if (!f) return;
    for (int k = 0; k < n; k++) {
        if (!s[k].h->n) continue;
        if ((double)s[k].h->min < lo) lo = (double)s[k].h->min;
        if ((double)s[k].h->max > hi) hi = (double)s[k].h->max;
    }
    if (hi <= 0) { fclose(f); return; }
    lo = pow(10, floor(log10(lo > 100 ? lo / 1e3 : 0.1)));    /* microseconds, decades */
    hi = pow(10, ceil(log10(hi / 1e3)));
    if (hi <= lo) hi = lo * 10;
#define X(us) (L + (log10(us) - log10(lo)) / (log10(hi) - log10(lo)) * (W - L - R))
#define Y(q) (T + (1 - (q)) * (H - T - B))
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
               "font-family='sans-serif' font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n", W, H);
    fprintf(f, "<text x='%.0f' y='22' font-size='15'>%s</text>\n", L, title);
    for (double d = lo; d <= hi * 1.0001; d *= 10) {
        fprintf(f, "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#ddd'/>\n", X(d), T, X(d), H - B);
        fprintf(f, "<text x='%.1f' y='%.0f' text-anchor='middle'>%g</text>\n", X(d), H - B + 16, d);
    }
    for (int q = 0; q <= 10; q++) {
        fprintf(f, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/>\n", L, Y(q / 10.0), W - R, Y(q / 10.0));
        fprintf(f, "<text x='%.0f' y='%.1f' text-anchor='end'>%.1f</text>\n", L - 6, Y(q / 10.0) + 4, q / 10.0);
    }
    fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle'>latency (us, log scale)</text>\n", (L + W - R) / 2, H - 20);
    fprintf(f, "<text x='18' y='%.0f' transform='rotate(-90 18 %.0f)' text-anchor='middle'>fraction of samples</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
    for (int k = 0; k < n; k++) {
        unsigned i = 0;
        uint64_t v, c, seen = 0;
        const char *col = colours[k % 10];
        if (!s[k].h->n) continue;
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", col);
        while (hist_next(s[k].h, &i, &v, &c)) {
            double us = (double)v / 1e3;
            seen += c;
            if (us < lo) us = lo;
            fprintf(f, "%.1f,%.1f ", X(us), Y((double)seen / (double)s[k].h->n));
        }
        fprintf(f, "'/>\n<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='3'/>"
                   "<text x='%.0f' y='%.0f'>%s (p50 %.1f)</text>\n",
                W - R + 10, T + 10 + 18.0 * k, W - R + 30, T + 10 + 18.0 * k, col, W - R + 35,
                T + 14 + 18.0 * k, s[k].name, hist_quantile(s[k].h, .5) / 1e3);
    }
    fprintf(f, "</svg>\n");
    fclose(f);
#undef X
#undef Y
}

static void write_png(const char *path, const char *dat, const char *title, const plot_series_t *s, int n)
{
    FILE *d = fopen(dat, "w"), *g;
    char cmd[2300];
    if (!d) return;
    for (int k = 0; k < n; k++) {
        unsigned i = 0;
        uint64_t v, c, seen = 0;
        fprintf(d, "# %s\n", s[k].name);
        while (hist_next(s[k].h, &i, &v, &c)) {
            seen += c;
            fprintf(d, "%.3f %.6f\n", (double)v / 1e3, (double)seen / (double)s[k].h->n);
        }
        fprintf(d, "\n\n");
    }
    fclose(d);
    snprintf(cmd, sizeof cmd, "gnuplot 2>/dev/null");
    if (!(g = popen(cmd, "w"))) return;
    fprintf(g, "set terminal pngcairo size 900,560\nset output '%s'\nset title '%s'\n"
               "set logscale x\nset xlabel 'latency (us)'\nset ylabel 'fraction of samples'\n"
               "set key right bottom\nset grid\nplot ", path, title);
    for (int k = 0; k < n; k++)
        fprintf(g, "%s'%s' index %d with lines lw 2 title '%s'", k ? ", " : "", dat, k, s[k].name);
    fprintf(g, "\n");
    pclose(g);
}

void plot_cdf(const char *svg, const char *png, const char *title, const plot_series_t *s, int n)
{
    char a[1400], b[1400], dat[1400];
    if (n == 0) return;
    snprintf(a, sizeof a, "%s/%s", g_out_dir, svg);
    write_svg(a, title, s, n);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        snprintf(b, sizeof b, "%s/%s", g_out_dir, png);
        snprintf(dat, sizeof dat, "%s/%.*s.dat", g_out_dir, (int)(strlen(png) - 4), png);
        write_png(b, dat, title, s, n);
        printf("  plots: %s, %s\n", a, b);
    } else printf("  plot: %s (install gnuplot for a PNG too)\n", a);
}
