# mk/bench-report.mk - the tests of benchmarks/compare and benchmarks/report (issue 22). Part of
# `make test`; python3 (standard library) and, for the report, chromium.
#
#   make bench-compare-check   the U test's unit tests (benchmarks/tests/test_stats.py), then
#                              benchmarks/tests/compare-check.sh: a run against itself, a 50 us
#                              spin against none (two short real latency runs, ~5 s), a copy made
#                              30% worse failing --fail-on
#   make bench-report-check    report.html and compare.html from the committed fixtures, checked
#                              in headless Chromium (benchmarks/tests/report-check.sh, ~20 s)

.PHONY: bench-compare-check bench-report-check
bench-compare-check:
	python3 benchmarks/tests/test_stats.py
	CC='$(CC)' benchmarks/tests/compare-check.sh

bench-report-check:
	benchmarks/tests/report-check.sh
