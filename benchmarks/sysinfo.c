/* sysinfo.c - the machine and toolchain recorded with every result. */

#include "bench.h"
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void first_line_of(const char *cmd, char *out, size_t n)
{
    FILE *p = popen(cmd, "r");
    out[0] = 0;
    if (!p) return;
    if (fgets(out, (int)n, p)) out[strcspn(out, "\n")] = 0;
    pclose(p);
}

static void cpuinfo(char *model, size_t n, int *hypervisor)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    model[0] = 0;
    *hypervisor = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!model[0] && !strncmp(line, "model name", 10) && strchr(line, ':')) {
            copy_str(model, n, strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
        }
        if (!strncmp(line, "flags", 5) && strstr(line, " hypervisor")) *hypervisor = 1;
    }
    fclose(f);
}

static void read_file_line(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\n")] = 0;
    fclose(f);
}

typedef struct {
    char model[256], virt[64], clocksource[64], date[64], compiler[128];
    int hypervisor, online, allowed;
    long slack_ns;
    struct utsname u;
} info_t;

static void gather(info_t *i)
{
    time_t now = time(NULL);
    memset(i, 0, sizeof *i);
    cpuinfo(i->model, sizeof i->model, &i->hypervisor);
    first_line_of("systemd-detect-virt 2>/dev/null", i->virt, sizeof i->virt);
    if (!i->virt[0]) copy_str(i->virt, sizeof i->virt, i->hypervisor ? "yes (cpuinfo hypervisor flag)" : "unknown");
    read_file_line("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                   i->clocksource, sizeof i->clocksource);
    strftime(i->date, sizeof i->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    uname(&i->u);
    i->online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    i->allowed = ncpus();
    i->slack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
#ifdef __clang__
    snprintf(i->compiler, sizeof i->compiler, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(i->compiler, sizeof i->compiler, "gcc %s", __VERSION__);
#endif
}

void sysinfo_write(json_t *j, const bench_opts_t *o)
{
    info_t i;
    gather(&i);
    json_str(j, "date", i.date);
    json_obj(j, "machine");
    json_str(j, "cpu_model", i.model);
    json_int(j, "cpus_online", i.online);
    json_int(j, "cpus_allowed", i.allowed);
    json_str(j, "kernel", i.u.release);
    json_str(j, "arch", i.u.machine);
    json_bool(j, "hypervisor_flag", i.hypervisor);
    json_str(j, "virtualization", i.virt);
    json_str(j, "clocksource", i.clocksource);
    json_int(j, "timer_slack_ns", i.slack_ns);
    json_end(j, '}');
    json_obj(j, "placement");
    json_bool(j, "pinned", o->pin);
    json_int(j, "cpu_signalling_thread", o->cpu_a);
    json_int(j, "cpu_loop_thread", o->cpu_b);
    json_end(j, '}');
    json_obj(j, "toolchain");
    json_str(j, "compiler", i.compiler);
    json_str(j, "benchmark_build", "-O2");
    json_str(j, "crunloop_timer_method", "timerfd (CLOCK_MONOTONIC) in epoll; not subject to timer slack");
    json_end(j, '}');
}

void sysinfo_print(FILE *out, const bench_opts_t *o)
{
    info_t i;
    gather(&i);
    fprintf(out, "machine: %s, %d CPUs online (%d allowed), Linux %s %s, virtualised: %s, "
                 "clocksource %s, timer slack %ld ns\n",
            i.model, i.online, i.allowed, i.u.release, i.u.machine, i.virt, i.clocksource, i.slack_ns);
    fprintf(out, "threads: %s (signalling thread on cpu %d, loop thread on cpu %d); built by %s\n",
            o->pin ? "pinned" : "not pinned (one CPU)", o->cpu_a, o->cpu_b, i.compiler);
}
