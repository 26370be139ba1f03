/* progress.c - the estimate of the time left, printed as the run goes: at the end of every round
 * ("~N min left") and after every benchmark. Each phase (a benchmark, or one scenario of the
 * latency benchmark) has an expected duration (main.c, latency.c: measured on the 2-vCPU VM);
 * the time left is the current phase's rest, extrapolated from its rounds done so far, plus the
 * expected durations of the phases not yet begun, scaled by how the finished phases compared
 * with their expectations, plus what the caller said follows the program (--eta-after). */
#include "bench.h"

static double pool;            /* expected seconds of the phases not yet begun */
static double after;           /* what follows this program (benchmarks/run's own rows) */
static double done_actual, done_expected;
static double phase_expected;
static uint64_t phase_t0;
static int round_no, round_count;

void progress_init(double expected_s, double after_s)
{
    pool = expected_s;
    after = after_s;
}

void progress_phase_begin(double expected_s)
{
    pool -= expected_s;
    if (pool < 0) pool = 0;
    phase_expected = expected_s;
    phase_t0 = now_ns();
    round_no = round_count = 0;
}

void progress_phase_end(void)
{
    done_actual += (double)(now_ns() - phase_t0) / 1e9;
    done_expected += phase_expected;
    phase_expected = 0;
    round_no = round_count = 0;
}

void progress_round(int done, int rounds)
{
    round_no = done;
    round_count = rounds;
}

double progress_left_s(void)
{
    double calib = 1, el = (double)(now_ns() - phase_t0) / 1e9, cur = 0;
    if (done_expected > 2) {
        calib = done_actual / done_expected;
        calib = calib < 0.5 ? 0.5 : calib > 3 ? 3 : calib;
    }
    if (phase_expected > 0) {
        if (round_count > 0 && round_no > 0) cur = el / round_no * (round_count - round_no);
        else cur = phase_expected * calib - el;
        if (cur < 0) cur = 0;
    }
    return cur + pool * calib + after;
}

const char *progress_left_str(char *buf, size_t n)
{
    double s = progress_left_s();
    if (s >= 90) snprintf(buf, n, "~%.0f min left", s / 60);
    else snprintf(buf, n, "~%.0f s left", s < 1 ? 1 : s);
    return buf;
}
