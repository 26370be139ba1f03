"""Mann-Whitney U test (Wilcoxon rank-sum), two-sided, standard library only.

mann_whitney(a, b) -> (u_a, p, method)
  u_a    U of sample a: the number of pairs (x in a, y in b) with x > y, plus half the ties.
         u_a + u_b = len(a) * len(b).
  p      two-sided p-value for "a and b come from the same distribution".
  method "exact" or "normal".

Exact: when there are no ties and len(a) + len(b) <= EXACT_MAX_N. The null distribution of U
(every split of the pooled ranks into the two samples equally likely) is counted with the
recurrence c(m, n, u) = c(m - 1, n, u - n) + c(m, n - 1, u): the largest of the m + n values
either belongs to the first sample (it beats all n of the second) or to the second. The
two-sided p is 2 * min(P(U <= u), P(U >= u)), at most 1.

Normal approximation otherwise (ties, or larger samples): mean m n / 2, variance
m n / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))) with t the size of each group of tied values
(the tie correction), and a continuity correction of 1/2. All values tied: variance 0, p = 1.
"""

import math

EXACT_MAX_N = 40


def ranks(values):
    """Ranks 1..N of values, ties given the mean of the ranks they span (midranks)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mid = (i + j) / 2 + 1
        for k in range(i, j + 1):
            r[order[k]] = mid
        i = j + 1
    return r


def u_statistic(a, b):
    """U of a: pairs with a's value greater, ties counted one half."""
    m = len(a)
    r = ranks(list(a) + list(b))
    return sum(r[:m]) - m * (m + 1) / 2


_counts_cache = {}


def u_counts(m, n):
    """c[u] = number of the C(m+n, m) splits with U = u, u = 0 .. m n."""
    key = (m, n)
    if key in _counts_cache:
        return _counts_cache[key]
    if m == 0 or n == 0:
        c = [1]
    else:
        left = u_counts(m - 1, n)     # largest value in the first sample: U grows by n
        right = u_counts(m, n - 1)    # in the second: U unchanged
        c = [0] * (m * n + 1)
        for u, k in enumerate(left):
            c[u + n] += k
        for u, k in enumerate(right):
            c[u] += k
    _counts_cache[key] = c
    return c


def exact_p(u, m, n):
    c = u_counts(m, n)
    total = math.comb(m + n, m)
    lo = math.floor(u + 1e-9)           # P(U <= u)
    hi = math.ceil(u - 1e-9)            # P(U >= u)
    p_le = sum(c[: lo + 1]) / total
    p_ge = sum(c[hi:]) / total
    return min(1.0, 2 * min(p_le, p_ge))


def normal_p(u, a, b):
    m, n = len(a), len(b)
    N = m + n
    pooled = sorted(list(a) + list(b))
    ties = 0
    i = 0
    while i < N:
        j = i
        while j + 1 < N and pooled[j + 1] == pooled[i]:
            j += 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    var = m * n / 12 * ((N + 1) - ties / (N * (N - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - m * n / 2) - 0.5) / math.sqrt(var)
    if z <= 0:
        return 1.0
    return min(1.0, math.erfc(z / math.sqrt(2)))


def has_ties(values):
    return len(set(values)) != len(values)


def mann_whitney(a, b):
    a, b = [float(x) for x in a], [float(x) for x in b]
    if not a or not b:
        raise ValueError("both samples need at least one value")
    u = u_statistic(a, b)
    if not has_ties(a + b) and len(a) + len(b) <= EXACT_MAX_N:
        return u, exact_p(u, len(a), len(b)), "exact"
    return u, normal_p(u, a, b), "normal"


def min_p(m, n):
    """The smallest two-sided p any samples of these sizes can give (no ties): 2 / C(m+n, m)."""
    return min(1.0, 2 / math.comb(m + n, m))
