#!/usr/bin/env python3
"""The coverage of the intervals a campaign's cell could use, on the shapes of
analysis/src/interval.rs's coverage test: 5 and 10 runs, 0.3 to 40 lost rows a
run, Poisson counts and negative binomial ones with an index of dispersion
(variance over mean) of 2 and 3.5 (1/k at most 2).

The Rust test checks the interval the campaigns use (quasi-Poisson with exact
bounds); this one-off shows why the others were not chosen: the percentile
bootstrap over runs and Student's t on the runs' rates. Not run by CI (it
needs numpy and scipy: `pip install numpy scipy`).

    python3 tests/stats/interval_alternatives.py   # about a minute
"""
import numpy as np
from scipy import stats

rng = np.random.default_rng(54)
SIMS, RESAMPLES = 1000, 2000


def counts(mu, a, n):
    if a == 0:
        return rng.poisson(mu, size=(SIMS, n)).astype(float)
    k = 1 / a
    return rng.negative_binomial(k, k / (k + mu), size=(SIMS, n)).astype(float)


def covered(lo, hi, mu):
    return float(np.mean((lo <= mu) & (mu <= hi)))


worst = {}
for n in (5, 10):
    for mu in (0.3, 1, 2, 5, 15, 40):
        for index in (1, 2, 3.5):
            a = min(2, (index - 1) / mu)
            c = counts(mu, a, n)
            picks = rng.integers(0, n, size=(SIMS, RESAMPLES, n))
            means = np.take_along_axis(np.repeat(c[:, None, :], RESAMPLES, 1), picks, 2).mean(2)
            boot = covered(np.percentile(means, 2.5, 1), np.percentile(means, 97.5, 1), mu)
            m, s, t = c.mean(1), c.std(1, ddof=1), stats.t.ppf(0.975, n - 1)
            student = covered(m - t * s / np.sqrt(n), m + t * s / np.sqrt(n), mu)
            print(f"{n:2} runs, {mu:4} a run, index {index}: bootstrap {boot:.3f}, t {student:.3f}")
            for name, v in (("bootstrap", boot), ("t", student)):
                lo, hi = worst.get((n, name), (1, 0))
                worst[(n, name)] = (min(lo, v), max(hi, v))
for (n, name), (lo, hi) in sorted(worst.items()):
    print(f"{name} over {n} runs: {lo:.1%} to {hi:.1%}")
