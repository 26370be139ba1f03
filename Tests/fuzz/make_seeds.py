#!/usr/bin/env python3
"""make_seeds.py - the seed inputs of Tests/fuzz/fuzz_loop.c, written from a readable form.

    python3 Tests/fuzz/make_seeds.py [OUTDIR]     write every seed (default Tests/fuzz/corpus/)
    python3 Tests/fuzz/make_seeds.py --regressions [OUTDIR]   the kept inputs (Tests/fuzz/regressions/)
    python3 Tests/fuzz/make_seeds.py --decode FILE...   print inputs in the readable form

INPUT FORMAT (fuzz_loop.c's header is the reference)
  Byte 0: flags. 1 FLAG_RELEASE_BEFORE_EXIT (drop the input's references before the thread
  exits), 2 FLAG_KEEP_LOOP (retain the crunloop loop and use it, dead, after the thread exit).
  Then 4-byte records [code, a, b, c]; code % 32 picks the op through OP_OF_CODE (a mirror of
  op_of_code[] in fuzz_loop.c). A create op (timer, source, observer, block) takes the next
  c & 3 records as its script, run each time the item is called out (at most 4 times).

OPERANDS
  item  (a of most ops): slot (a & 15) % 12, the slots filled in creation order from 0; an empty
        slot makes the op a no-op. a | 0x10 inside a script means the item being called out.
  mode  0 "D" default, 1-3 "A"-"C" (FuzzModeA-C), 4 "*" common modes (add, remove, contains
        and block targets only; runs, queries and common use mode % 4).
  timer     a: bits 0-1 date (0/3 past, 1 far future, 2 huge on crunloop / far on CF),
                bits 2-3 interval (0/3 one-shot, 1 1e5 s, 2 huge: 1e300, DBL_MAX, 1e9, INFINITY
                by variant), bit 4 crunloop context has retain, bits 5-7 variant;
            b: order base (b % 5: LONG_MIN, -100000, 0, 100000, LONG_MAX-64; + item serial);
            c: script length (c & 3).
  source    a: bit 4 crunloop context has retain; b: order base; c: script length.
  observer  a: activities (a & 0xE7; 0 = all of them: 1 entry, 2 before-timers,
                4 before-sources, 0x20 before-waiting, 0x40 after-waiting, 0x80 exit);
            b: order base; c: bits 0-1 script length, bit 2 repeats, bit 4 has retain.
  block     b: mode (% 5); c: bits 0-1 script length, bit 0 also picks the copy of the mode name.
  add, remove, contains   a: item; b: mode (% 5); c bit 0: crunloop gets a copy of the name.
  invalidate, signal (sources), retain, release   a: item.
  run       b: mode (% 4); c bit 0: return after a handled source, bit 1: name copy. Poll only.
  setdate   a: item (timer); b: bits 0-1 date kind as for timer, bits 2-7 variant.
  common    b: mode (% 4) made common; c bit 0: name copy.
  stop, wakeup    no operand.
  query     a: item; b: mode (% 4) whose next timer date is traced; c bit 0: name copy.
  describe  a bit 0: skip the stats check. (crunloop only)
  tolerance a: item (timer); b % 8: 0, 1, 1e300, INFINITY, DBL_MAX, NaN, -1, -INFINITY. (crunloop)
  bad       a % 20: 0 bad times, 1 huge never-due timer kept for rlwait, 2 bad observers/sources,
            3 NULL handles and bad mode names (b: item), 4 runs that cannot run, 5 common modes
            and blocks with bad arguments, 6 queries on NULL, 7 loop queries, 8 fd sources with
            bad arguments, 9 -EBUSY through the main loop, 10+ remove from an unused mode and add
            of an invalidated item (b: item); b: item and mode (% 4); c: variant. (crunloop)
  rlwait    a: timeout a % 8 (0, -1, 100, 1e300, INFINITY, DBL_MAX, 504911233, -INFINITY),
               a & 8: NaN; b: bit 0 return after source, bit 1 writable fd (else readable),
               bit 2 with a due one-shot timer; c: bit 0 fd context retain, bit 1 ask for
               RL_FD_ERROR, bit 2 narrow with set_fd_events after adding, bit 3 timer context
               retain, bits 2-7 order. (crunloop only, modelled)
"""
import os
import sys

OPS = ["timer", "source", "observer", "add", "remove", "invalidate", "signal", "block",
       "run", "setdate", "common", "retain", "release", "stop", "wakeup", "contains",
       "query", "bad", "rlwait", "describe", "tolerance"]
# Mirror of op_of_code[] in fuzz_loop.c: code % 32 -> op.
OP_OF_CODE = OPS + ["run", "run", "add", "add", "signal", "timer", "source", "observer",
                    "run", "invalidate", "block"]
assert len(OP_OF_CODE) == 32
CREATES = {"timer", "source", "observer", "block"}
MODES = {"D": 0, "A": 1, "B": 2, "C": 3, "*": 4}
SELF = 0x10
RELEASE_BEFORE_EXIT, KEEP_LOOP = 1, 2


def op(name, a=0, b=0, c=0, script=()):
    """One record (and, for a create op, its script records)."""
    code = OP_OF_CODE.index(name)
    script = list(script)
    if name in CREATES:
        assert len(script) <= 3, "a script holds at most 3 ops"
        c = (c & ~3) | len(script)
    else:
        assert not script, name + " takes no script"
    recs = [bytes([code, a & 255, b & 255, c & 255])]
    for s in script:
        assert len(s) == 1, "a script op cannot have a script of its own"
        recs += s
    return recs


def m(mode):
    return MODES[mode] if isinstance(mode, str) else mode


DATES = {"past": 0, "far": 1, "huge": 2}
IVALS = {"once": 0, "1e5": 1, "huge": 2}


def timer(date="past", ival="once", order=2, retain=False, variant=0, script=()):
    a = DATES[date] | IVALS[ival] << 2 | (0x10 if retain else 0) | (variant & 7) << 5
    return op("timer", a, order, 0, script)


def source(order=2, retain=False, script=()):
    return op("source", 0x10 if retain else 0, order, 0, script)


def observer(acts=0, repeats=True, order=2, retain=False, script=()):
    return op("observer", acts, order, (4 if repeats else 0) | (0x10 if retain else 0), script)


def block(mode="D", script=()):
    return op("block", 0, m(mode), 0, script)


def add(item, mode="D", copy=False): return op("add", item, m(mode), int(copy))
def remove(item, mode="D", copy=False): return op("remove", item, m(mode), int(copy))
def contains(item, mode="D"): return op("contains", item, m(mode))
def invalidate(item): return op("invalidate", item)
def signal(item): return op("signal", item)
def retain(item): return op("retain", item)
def release(item): return op("release", item)
def run(mode="D", ret_after=False, copy=False): return op("run", 0, m(mode), int(ret_after) | 2 * int(copy))
def setdate(item, date="past", variant=0): return op("setdate", item, DATES[date] | variant << 2)
def common(mode): return op("common", 0, m(mode))
def stop(): return op("stop")
def wakeup(): return op("wakeup")
def query(item=0, mode="D"): return op("query", item, m(mode))
def describe(skip_stats=False): return op("describe", int(skip_stats))
def tolerance(item, which): return op("tolerance", item, which)
def bad(case, b=0, c=0): return op("bad", case, b, c)


def rlwait(timeout=0, nan=False, ret_after=False, writable=False, with_timer=False, c=0):
    return op("rlwait", timeout | (8 if nan else 0),
              int(ret_after) | 2 * int(writable) | 4 * int(with_timer), c)


def seed(flags, *ops):
    out = bytearray([flags])
    for o in ops:
        for r in o:
            out += r
    return bytes(out)


SEEDS = {
    # timers
    "timer_oneshot": seed(0, timer(), add(0), run(), query(0), run()),
    "timer_repeating": seed(0, timer(ival="1e5"), add(0), run(), query(0), run(), invalidate(0), query(0)),
    "timer_far_and_huge": seed(0, timer(date="far"), timer(date="huge", ival="huge", variant=3),
                               add(0), add(1), query(0), run(), setdate(0, "past"), run(), query(1)),
    "timer_common_modes": seed(0, timer(ival="1e5"), common("A"), add(0, "*"), contains(0, "A"),
                               run("A"), common("B"), contains(0, "B"), setdate(0), run("B", copy=True)),
    "timer_self_invalidate": seed(0, timer(ival="1e5", script=[invalidate(SELF)]), add(0), run(), query(0)),
    "timer_self_setdate": seed(0, timer(ival="1e5", script=[setdate(SELF, "past")]), add(0), run(), run(), run()),
    "timer_order": seed(0, timer(order=3), timer(order=1), timer(order=0), add(0), add(1), add(2), run()),
    "timer_retain_release": seed(RELEASE_BEFORE_EXIT, timer(retain=True), retain(0), add(0), release(0),
                                 run(), release(0)),
    "timer_tolerance": seed(0, timer(ival="1e5"), tolerance(0, 1), tolerance(0, 3), tolerance(0, 5),
                            tolerance(0, 6), add(0), run()),
    # sources
    "source_signal": seed(0, source(), add(0), signal(0), query(0), run(), query(0)),
    "source_order": seed(0, source(order=3), source(order=0), source(order=1), add(0), add(1), add(2),
                         signal(0), signal(1), signal(2), run(), run()),
    "source_return_after": seed(0, source(), source(), add(0), add(1), signal(0), signal(1),
                                run(ret_after=True), run(ret_after=True)),
    "source_schedule_cancel": seed(0, source(), common("A"), add(0, "*"), add(0, "*"), add(0, "B"),
                                   remove(0, "A"), remove(0, "A"), invalidate(0), add(0)),
    "source_signal_other": seed(0, source(script=[signal(1)]), source(), add(0), add(1), signal(0), run(), run()),
    "source_invalidate_in_perform": seed(0, source(script=[invalidate(SELF), release(SELF)]), add(0),
                                         signal(0), run(), query(0)),
    "source_teardown": seed(0, source(), source(retain=True), add(0, "A"), add(1, "*"), common("C")),
    # observers
    "observer_all": seed(0, observer(), timer(), add(0), add(1), run()),
    "observer_oneshot": seed(0, observer(acts=0x01, repeats=False), source(), add(0), add(1), signal(1),
                             run(), run(), query(0)),
    "observer_orders": seed(0, observer(order=3), observer(order=0), observer(acts=0x82, order=1), timer(),
                            add(0), add(1), add(2), add(3), run()),
    "observer_removes_timer": seed(0, observer(acts=0x02, script=[remove(1)]), timer(), add(0), add(1), run(),
                                   contains(1)),
    # blocks
    "blocks": seed(0, block("D"), block("A"), block("*"), source(), add(0, "A"), run(), run("A")),
    "block_runs_block": seed(0, block("D", script=[block("D")]), timer(), add(1), run(), run()),
    "block_in_common": seed(0, common("B"), block("*"), source(), add(0, "B"), run("B")),
    # nested runs
    "nested_run_from_timer": seed(0, timer(script=[run("A")]), timer(), add(0), add(1, "A"), run()),
    "nested_run_same_mode": seed(0, source(script=[signal(1), run()]), source(), add(0), add(1), signal(0), run()),
    "nested_stop": seed(0, timer(script=[stop()]), observer(acts=0x81), add(0), add(1), run(), run()),
    "wakeup_in_timer": seed(0, timer(ival="1e5", script=[wakeup()]), add(0), run(), setdate(0), run()),
    "stop_outside": seed(0, stop(), wakeup(), source(), add(0), signal(0), run()),
    # bad values, crunloop alone
    "bad_times": seed(0, timer(), bad(0, 0, 0), bad(0, 0, 1), bad(0, 0, 2), bad(0, 0, 3), bad(1, 0, 5),
                      bad(1, 0, 0x0e)),
    "bad_handles": seed(0, source(), timer(), bad(2), bad(3, 0, 0), bad(3, 1, 1), bad(4), bad(5, 0, 1),
                        bad(6), bad(7), bad(8)),
    "bad_ebusy_invalid": seed(0, observer(), bad(9, 0, 0), bad(9, 0, 7), invalidate(0), bad(10, 0, 0)),
    # waits with fd sources, crunloop alone
    "rlwait": seed(0, rlwait(0), rlwait(2), rlwait(4, ret_after=True), rlwait(5, writable=True, with_timer=True),
                   rlwait(0, nan=True), rlwait(3, with_timer=True, c=0x0f)),
    "rlwait_with_huge": seed(0, bad(1, 0, 1), bad(1, 0, 6), rlwait(3), rlwait(6, ret_after=True)),
    "rlwait_from_callout": seed(0, timer(script=[rlwait(4, with_timer=True, c=1)]),
                                add(0), run()),
    # loop lifetime
    "keep_loop": seed(KEEP_LOOP, timer(date="far"), observer(), source(), add(0), add(1), add(2, "*")),
    "release_before_exit": seed(RELEASE_BEFORE_EXIT | KEEP_LOOP, timer(ival="1e5"), source(), add(0), add(1),
                                signal(1), describe()),
    "describe_stats": seed(0, timer(), source(), add(0), add(1), signal(1), run(), describe(), query(0, "A")),
}

# The inputs kept in Tests/fuzz/regressions/ (python3 make_seeds.py --regressions): the smallest
# forms of the differences with CF the fuzzer found. Each passes (the fuzzer excludes the
# difference) and fails with FUZZ_LOOP_STRICT=1 until crunloop changes.
REGRESSIONS = {
    # crunloop bug: the second add to RL_COMMON_MODES returns -EEXIST and does not rejoin D.
    "common_readd_after_remove_by_name": seed(0, source(), add(0, "*"), remove(0, "D"), add(0, "*"),
                                              contains(0, "D")),
    # crunloop bug: the run nested in S0's perform does not perform S1 (taken by the outer pass).
    "nested_run_in_perform_misses_signalled": seed(0, source(order=0, script=[run()]), source(order=1), add(0),
                                                   add(1), signal(0), signal(1), run()),
    "nested_run_in_perform_misses_signalled_return_after": seed(0, source(order=0, script=[run()]), source(order=1),
                                                                add(0), add(1), signal(0), signal(1),
                                                                run(ret_after=True), run()),
    # undocumented: crunloop's run nested in a block runs an older block of its own mode; CF's not.
    "nested_run_in_block_sees_older_blocks": seed(0, block("D", script=[run("A")]), block("A"), source(),
                                                  add(0, "A"), run("D"), run("A")),
    # documented at rl_timer_set_next_fire_date only: a due timer re-dated to the past inside a
    # run fires at the next pass in crunloop, in the pass under way in CF.
    "setdate_past_of_due_timer_in_pass": seed(0, timer(ival="1e5", order=1, script=[setdate(1, "past")]),
                                              timer(order=2), add(0), add(1), run(), run()),
    # undocumented: an INFINITY interval is a one-shot timer in crunloop, a repeating one in CF.
    "infinite_interval_is_one_shot": seed(0, timer(ival="huge", variant=3), query(0), add(0), run(), query(0)),
    # undocumented: the next fire date of an invalidated timer (CF 0) and "signalled" of an
    # invalidated source (CF false).
    "invalidated_timer_date_and_source_signalled": seed(0, timer(date="far"), invalidate(0), query(0), source(),
                                                        signal(1), invalidate(1), query(1), source(),
                                                        invalidate(2), signal(2), query(2)),
}


def decode(data):
    lines = ["flags %#x" % data[0]]
    recs = [data[i:i + 4] for i in range(1, len(data) - 3, 4)]
    i = 0
    while i < len(recs):
        code, a, b, c = recs[i]
        name = OP_OF_CODE[code % 32]
        lines.append("%-10s a=%#04x b=%3d c=%#04x" % (name, a, b, c))
        if name in CREATES:
            for s in recs[i + 1:i + 1 + (c & 3)]:
                lines.append("    %-10s a=%#04x b=%3d c=%#04x" % (OP_OF_CODE[s[0] % 32], s[1], s[2], s[3]))
            i += c & 3
        i += 1
    return "\n".join(lines)


def main(argv):
    if argv[1:2] == ["--decode"]:
        for path in argv[2:]:
            with open(path, "rb") as f:
                print("# " + path)
                print(decode(f.read()))
        return 0
    here = os.path.dirname(os.path.abspath(__file__))
    inputs, out = SEEDS, os.path.join(here, "corpus")
    if argv[1:2] == ["--regressions"]:
        inputs, out, argv = REGRESSIONS, os.path.join(here, "regressions"), argv[1:]
    if len(argv) > 1:
        out = argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(inputs.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("make_seeds: %d inputs in %s" % (len(inputs), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
