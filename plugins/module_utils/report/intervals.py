# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How sure a speed-up is: 95% intervals on ratios of throughputs, the order that cancels a host's drift, and the
verdict a gate draws from an interval.

The method, one for every speed-up the collection reports: a Student t interval on the logarithms of the ratios.
Throughput is positive and its noise multiplicative (a host 30% slower for a minute is slower by a factor), so the
logarithm makes a ratio a difference and its noise close to symmetric; the interval on the mean log ratio, taken back
with exp, is an interval on the geometric mean ratio. A bootstrap was the other candidate; with the 3 to 8 blocks a
compare run affords it under-covers (it cannot reach past the most extreme block), where t widens with few blocks
as it should.

Paired, when both configurations were measured in the same round (the same prompts, minutes apart): each round's
log ratio is one observation, and what the host does to both within a round cancels. The rounds run the
configurations in counterbalanced order (A B, then B A, ...: ``schedule``), so a drift linear in time adds to one
round's ratio what it takes from the next. Unpaired (Welch), when the two were measured at different times, as a
deploy's gate against a baseline the compare run kept.

Pure standard library: the t quantiles come from the regularized incomplete beta function, not a table.
"""

from __future__ import annotations

import math

LEVEL = 0.95
# The width a recommendation needs by default: each speed-up it rests on known within +-5%.
TARGET_HALF_WIDTH = 0.05

METHOD = "Student t interval on the log of the ratios (95%)"

PASSED, TOO_SLOW, INCONCLUSIVE = "passed", "too_slow", "inconclusive"


def _beta_fraction(a, b, x):
    """The continued fraction of the incomplete beta function, evaluated by the modified Lentz method."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _incomplete_beta(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df may be fractional, as Welch's is)."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p, df):
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, by bisection on t_cdf."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("t_quantile needs 0 < p < 1 and df > 0, got p=%r df=%r" % (p, df))
    low, high = -1e6, 1e6
    for _step in range(200):
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def _mean_sd(values):
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def _positive(values, what):
    values = [float(v) for v in values]
    if not values or any(not v > 0 or math.isinf(v) for v in values):
        raise ValueError("%s must be positive throughputs, got %r" % (what, values))
    return values


def _interval(log_mean, half, n, df):
    ratio = math.exp(log_mean)
    if half is None:
        return {"ratio": round(ratio, 4), "low": None, "high": None, "n": n, "df": df, "half_width": None,
                "method": METHOD}
    low, high = math.exp(log_mean - half), math.exp(log_mean + half)
    return {"ratio": round(ratio, 4), "low": round(low, 4), "high": round(high, 4), "n": n, "df": round(df, 2),
            # Relative half width, on the ratio's own scale: (high - low) / 2 / ratio.
            "half_width": round((high - low) / 2.0 / ratio, 4), "method": METHOD}


def paired(baseline, candidate, level=LEVEL):
    """The interval on candidate/baseline from blocks measured in pairs (round i of each: ``baseline[i]``,
    ``candidate[i]``). One pair gives the ratio and no interval."""
    baseline, candidate = _positive(baseline, "baseline blocks"), _positive(candidate, "candidate blocks")
    if len(baseline) != len(candidate):
        raise ValueError("paired blocks need as many baseline blocks as candidate blocks (%d, %d)"
                         % (len(baseline), len(candidate)))
    logs = [math.log(c) - math.log(b) for b, c in zip(baseline, candidate)]
    mean, sd = _mean_sd(logs)
    n = len(logs)
    if n < 2:
        return _interval(mean, None, n, 0)
    return _interval(mean, t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n), n, n - 1)


def unpaired(baseline, candidate, level=LEVEL):
    """The interval on candidate/baseline from blocks measured apart (Welch's t on the logs, with the
    Welch-Satterthwaite degrees of freedom). Fewer than two blocks on either side gives no interval."""
    baseline, candidate = _positive(baseline, "baseline blocks"), _positive(candidate, "candidate blocks")
    (mb, sb), (mc, sc) = _mean_sd([math.log(v) for v in baseline]), _mean_sd([math.log(v) for v in candidate])
    nb, nc = len(baseline), len(candidate)
    if nb < 2 or nc < 2:
        return _interval(mc - mb, None, min(nb, nc), 0)
    vb, vc = sb * sb / nb, sc * sc / nc
    if vb + vc == 0.0:
        return _interval(mc - mb, 0.0, min(nb, nc), nb + nc - 2)
    df = (vb + vc) ** 2 / ((vb * vb / (nb - 1)) + (vc * vc / (nc - 1)))
    return _interval(mc - mb, t_quantile(0.5 + level / 2.0, df) * math.sqrt(vb + vc), min(nb, nc), df)


def schedule(names, rounds):
    """The order of the blocks: each round measures every configuration once, the odd rounds in reverse (A B C, C B
    A, A B C, ...), so a drift linear in time over two rounds adds as much to each configuration as to any other."""
    names = list(names)
    return [(r, name) for r in range(rounds) for name in (names if r % 2 == 0 else names[::-1])]


def verdict(interval, minimum):
    """A gate's verdict on a speed-up interval against ``minimum``: passed only when the whole interval lies at or
    above it, too_slow only when it lies below, inconclusive in between; without an interval (one block) the point
    estimate decides and the verdict says so."""
    if interval["low"] is None:
        return {"verdict": PASSED if interval["ratio"] >= minimum else TOO_SLOW, "by": "point"}
    if interval["low"] >= minimum:
        return {"verdict": PASSED, "by": "interval"}
    if interval["high"] < minimum:
        return {"verdict": TOO_SLOW, "by": "interval"}
    return {"verdict": INCONCLUSIVE, "by": "interval"}


def narrow_enough(interval, target=TARGET_HALF_WIDTH):
    """Whether the interval is known within +-``target`` (relative): what a recommendation needs."""
    return interval["half_width"] is not None and interval["half_width"] <= target


def tells_apart(interval):
    """Whether the interval excludes 1.00: the two configurations differ beyond this host's noise."""
    return interval["low"] is not None and (interval["low"] > 1.0 or interval["high"] < 1.0)


def blocks_for(interval, target=TARGET_HALF_WIDTH):
    """About how many blocks of each configuration would bring the interval within +-``target``: the half width
    shrinks with the square root of the blocks (the t quantile's own shrinking is left out, so this is an upper
    figure once past a few blocks). None without an interval."""
    if interval["half_width"] is None or interval["n"] < 2:
        return None
    if interval["half_width"] <= target:
        return interval["n"]
    return int(math.ceil(interval["n"] * (interval["half_width"] / target) ** 2))


def blocks_to_tell(interval, against):
    """About how many blocks would put ``against`` (1.00, or a gate's minimum) outside the interval (blocks_for, the
    target being the distance from the ratio to it, at least 0.5%)."""
    return blocks_for(interval, max(abs(interval["ratio"] - against) / interval["ratio"], 0.005))


def geometric_mean(values):
    """The geometric mean of positive values: the mean a ratio of throughputs is taken on."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def describe(interval, unit="block"):
    """``1.31x [1.22, 1.41], 6 blocks`` or ``1.31x (one block: no interval)``; ``unit`` names what was counted."""
    if interval["low"] is None:
        return "%.2fx (one %s: no interval)" % (interval["ratio"], unit)
    return "%.2fx [%.2f, %.2f], %d %ss" % (interval["ratio"], interval["low"], interval["high"], interval["n"], unit)
