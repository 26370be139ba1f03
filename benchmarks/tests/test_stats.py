#!/usr/bin/env python3
"""Unit tests of benchmarks/pylib: the Mann-Whitney U test against hand-computed values, the
verdict's thresholds, and the metric names. Run: python3 benchmarks/tests/test_stats.py"""

import math
import os
import sys
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
FIX = os.path.join(HERE, "..", "results", "fixtures")

import benchmetrics as bm  # noqa: E402
from comparison import verdict  # noqa: E402
from mannwhitney import mann_whitney, min_p, ranks, u_counts, u_statistic  # noqa: E402


class Ranks(unittest.TestCase):
    def test_midranks(self):
        self.assertEqual(ranks([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
        self.assertEqual(ranks([5, 5, 5]), [2, 2, 2])
        self.assertEqual(ranks([30, 10, 20]), [3, 1, 2])

    def test_u(self):
        self.assertEqual(u_statistic([1, 2, 3], [4, 5, 6]), 0)
        self.assertEqual(u_statistic([4, 5, 6], [1, 2, 3]), 9)
        # a = 1 3 5, b = 2 4 6: pairs with a > b: (3,2) (5,2) (5,4)
        self.assertEqual(u_statistic([1, 3, 5], [2, 4, 6]), 3)
        # a tie counts one half: (2 vs 2)
        self.assertEqual(u_statistic([2], [2]), 0.5)


class ExactDistribution(unittest.TestCase):
    def test_counts_by_hand(self):
        # m = n = 2: the 6 splits of ranks 1..4 give U = 0 1 2 2 3 4
        self.assertEqual(u_counts(2, 2), [1, 1, 2, 1, 1])
        # m = n = 3: the 20 splits (Mann & Whitney 1947, table I)
        self.assertEqual(u_counts(3, 3), [1, 1, 2, 3, 3, 3, 3, 2, 1, 1])
        self.assertEqual(sum(u_counts(6, 6)), math.comb(12, 6))

    def test_p_values(self):
        u, p, method = mann_whitney([1, 3, 5], [2, 4, 6])
        self.assertEqual(method, "exact")
        self.assertAlmostEqual(p, 2 * 7 / 20)           # P(U <= 3) = (1+1+2+3)/20
        _, p, _ = mann_whitney([1.1, 2.2, 3.3, 4.4, 5.5], [6, 7, 8, 9, 10])
        self.assertAlmostEqual(p, 2 / 252)              # the most extreme of C(10,5) splits
        _, p, _ = mann_whitney(range(6), range(10, 16))
        self.assertAlmostEqual(p, 2 / 924)
        self.assertAlmostEqual(min_p(6, 6), 0.0021645, places=6)
        self.assertAlmostEqual(min_p(3, 3), 0.1)
        # a = 1 2 4, b = 3 5 6: U = 1; P(U <= 1) = 2/20
        _, p, _ = mann_whitney([1, 2, 4], [3, 5, 6])
        self.assertAlmostEqual(p, 0.2)

    def test_symmetric(self):
        a, b = [3, 8, 1, 9, 4], [7, 12, 10, 11, 2, 6]
        self.assertAlmostEqual(mann_whitney(a, b)[1], mann_whitney(b, a)[1])


class NormalApproximation(unittest.TestCase):
    def test_ties_by_hand(self):
        # a = 1 2 2 3, b = 2 3 4 4. Ranks: 1 -> 1; the three 2s -> 3; the two 3s -> 5.5; the
        # two 4s -> 7.5. R_a = 1 + 3 + 3 + 5.5 = 12.5, U_a = 12.5 - 10 = 2.5. Ties: 3^3-3 +
        # 2 (2^3-2) = 36; var = 16/12 (9 - 36/56) = 11.142857; z = (|2.5 - 8| - 0.5) / 3.33809
        # = 1.49786; p = 2 (1 - Phi(1.49786)) = 0.13418.
        u, p, method = mann_whitney([1, 2, 2, 3], [2, 3, 4, 4])
        self.assertEqual(method, "normal")
        self.assertEqual(u, 2.5)
        self.assertAlmostEqual(p, 0.13418, delta=5e-4)

    def test_all_tied(self):
        self.assertEqual(mann_whitney([5, 5, 5], [5, 5, 5])[1], 1.0)

    def test_large_separated(self):
        # 30 vs 30 fully separated: z = (450 - 0.5) / sqrt(900 * 61 / 12) = 6.645
        _, p, method = mann_whitney(range(30), range(100, 130))
        self.assertEqual(method, "normal")
        self.assertAlmostEqual(p, math.erfc(449.5 / math.sqrt(900 * 61 / 12) / math.sqrt(2)))
        self.assertLess(p, 1e-9)


def metric(rounds, better="lower", unit="ns"):
    s = sorted(rounds)
    med = (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2
    return bm.Metric(path="x", peer="CRunLoop", name="x", value=med, lo=s[0], hi=s[-1],
                     rounds=list(rounds), unit=unit, better=better, section="t", parts=[],
                     stat="x_ns", kind="bench")


class Verdicts(unittest.TestCase):
    A = [100, 103, 98, 101, 99, 102]

    def test_thresholds(self):
        self.assertEqual(verdict(metric(self.A), metric(self.A)).verdict, "no difference")
        worse = [x * 1.3 for x in self.A]
        r = verdict(metric(self.A), metric(worse))
        self.assertEqual(r.verdict, "slower")
        self.assertAlmostEqual(r.regression, 30, delta=0.5)
        self.assertEqual(verdict(metric(worse), metric(self.A)).verdict, "faster")
        # fully separated but 0.1% apart: significant, under the minimum effect
        tiny = [1000 + x / 10 for x in range(6)]             # 1000.0 .. 1000.5
        r = verdict(metric(tiny), metric([x * 1.001 for x in tiny]))   # 1001.0 .. 1001.5
        self.assertLess(r.p, 0.05)
        self.assertEqual(r.verdict, "no difference")

    def test_rates_and_rounds(self):
        r = verdict(metric(self.A, "higher", "/s"), metric([x * 0.7 for x in self.A], "higher", "/s"))
        self.assertEqual(r.verdict, "slower")
        self.assertAlmostEqual(r.regression, (1 / 0.7 - 1) * 100, delta=1)
        r = verdict(metric(self.A, "lower", "B"), metric([x * 2 for x in self.A], "lower", "B"))
        self.assertEqual(r.verdict, "worse")
        two = verdict(metric([1, 2]), metric([10, 20]))
        self.assertEqual(two.verdict, "no difference")      # 2 vs 2 rounds: p >= 1/3
        none = verdict(metric([1]), metric([2]))
        none.a.rounds = None
        self.assertEqual(verdict(none.a, none.b).verdict, "no rounds")


class Names(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.r = bm.Run([os.path.join(FIX, f) for f in ("quick.json", "http.json", "swift-layer.json")])

    def test_lookup(self):
        m = self.r.find("wakeup one-way p99")
        self.assertEqual(m.path, "latency.peers.CRunLoop.oneway.p99_ns")
        self.assertEqual(self.r.find("  LIBUV:wakeup   one-way p99 ").path,
                         "latency.peers.libuv.oneway.p99_ns")
        self.assertEqual(self.r.find("latency.peers.GLib.pingpong.p999_ns").full,
                         "GLib: wakeup ping-pong p99.9")
        self.assertEqual(self.r.find("timers 1e4 add ns/op").peer, "CRunLoop")
        self.assertEqual(self.r.find("floor: http requests/s at 100 connections").better, "higher")
        self.assertEqual(self.r.find("swift wakeup latency p99").peer, "Swift layer")
        self.assertIsNone(self.r.find("wakeup one-way p98"))

    def test_unique_and_directed(self):
        fulls = [bm.norm(m.full) for m in self.r.metrics]
        self.assertEqual(len(fulls), len(set(fulls)))
        self.assertGreater(len(fulls), 300)
        self.assertEqual(self.r.find("signal 4 producers callbacks/s").better, "higher")
        self.assertEqual(self.r.find("spin 50 us idle cpu ns/s").better, "lower")

    def test_scenarios_are_named(self):
        # a JSON with scenario-tagged latency entries beside today's
        d = {"benchmark": "crunloop-bench", "latency": {"peers": {"CRunLoop": {"oneway": {
            "p99_ns": 5, "p99_ns_spread": {"min": 5, "max": 5, "rounds": 1, "values": [5]},
            "histogram": [[4, 1], [5, 2]]}}},
            "scenarios": {"busy": {"peers": {"CRunLoop": {"oneway": {
                "p99_ns": 7, "p99_ns_spread": {"min": 7, "max": 7, "rounds": 1, "values": [7]},
                "histogram": [[6, 1], [7, 2]]}}}}}}}
        ms = bm._walk_bench(d)
        self.assertEqual(sorted(m.full for m in ms),
                         ["CRunLoop: wakeup one-way p99", "CRunLoop: wakeup one-way p99 (busy)"])
        run = bm.Run.__new__(bm.Run)
        run.docs, run.paths, run.metrics = {"bench": d}, [], ms
        self.assertEqual(sorted(run.latency_cdfs()), [("busy", "oneway"), ("idle", "oneway")])


if __name__ == "__main__":
    unittest.main(verbosity=1)
