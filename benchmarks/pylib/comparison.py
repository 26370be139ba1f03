"""Two runs' metrics side by side, each with a verdict from a Mann-Whitney U test over the rounds.

verdict(a, b, alpha, min_effect_pct):
  - "no rounds" when either metric has no per-round values (the HTTP and Swift rows, the
    instruction counts): the figures are shown, nothing is decided.
  - otherwise the two-sided Mann-Whitney U test of a's rounds against b's (mannwhitney.py:
    exact without ties and up to 40 rounds in all, else the normal approximation with tie
    correction). The verdict is a change only when p < alpha AND the medians differ by at least
    min_effect_pct percent (|B/A - 1|); the change is "faster"/"slower" for times and rates,
    "better"/"worse" for other figures with a known direction (bytes, allocations, counts of
    waits), and "higher"/"lower" for figures with no direction known. Else "no difference".
  - regression: how much worse B is than A, in percent: (B/A - 1) x 100 when lower is better,
    (A/B - 1) x 100 when higher is better (the rate's time per item), |B/A - 1| x 100 with no
    direction; negative for an improvement.
"""

import math

from mannwhitney import mann_whitney, min_p

TIME_UNITS = {"ns", "us", "s", "/s", "instr", "ns/s"}


def ratio_of(a, b):
    if a == 0:
        return 1.0 if b == 0 else math.inf
    return b / a


def regression_pct(ma, mb):
    r = ratio_of(ma.value, mb.value)
    if ma.better == "higher":
        if mb.value == 0:
            return math.inf if ma.value != 0 else 0.0
        return (ma.value / mb.value - 1) * 100
    if ma.better == "lower":
        return (r - 1) * 100
    return abs(r - 1) * 100


class Row:
    __slots__ = ("a", "b", "ratio", "p", "method", "verdict", "regression", "note")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


def verdict(ma, mb, alpha=0.05, min_effect=2.0):
    r = ratio_of(ma.value, mb.value)
    row = Row(a=ma, b=mb, ratio=r, regression=regression_pct(ma, mb), note="")
    if not ma.rounds or not mb.rounds:
        row.verdict = "no rounds"
        return row
    _, p, method = mann_whitney(ma.rounds, mb.rounds)
    row.p, row.method = p, method
    effect = abs(r - 1) * 100 if math.isfinite(r) else math.inf
    if p >= alpha:
        row.verdict = "no difference"
        if min_p(len(ma.rounds), len(mb.rounds)) >= alpha:
            row.note = f"{len(ma.rounds)} vs {len(mb.rounds)} rounds cannot reach p < {alpha:g}"
        return row
    if effect < min_effect:
        row.verdict = "no difference"
        row.note = f"significant but under {min_effect:g}%"
        return row
    up = mb.value > ma.value
    if ma.better is None:
        row.verdict = "higher" if up else "lower"
        return row
    good = (ma.better == "lower") != up
    if ma.unit in TIME_UNITS:
        row.verdict = "faster" if good else "slower"
    else:
        row.verdict = "better" if good else "worse"
    return row


def compare_runs(run_a, run_b, alpha=0.05, min_effect=2.0):
    """Rows for the metrics present in both runs (in A's order), and the names only in one."""
    rows = []
    b_index = {m.path: m for m in run_b.metrics}
    a_paths = set()
    for ma in run_a.metrics:
        a_paths.add(ma.path)
        mb = b_index.get(ma.path)
        if mb is not None:
            rows.append(verdict(ma, mb, alpha, min_effect))
    only_a = [m.full for m in run_a.metrics if m.path not in b_index]
    only_b = [m.full for m in run_b.metrics if m.path not in a_paths]
    return rows, only_a, only_b
