"""Statistics of one score per seed: mean +- standard error, the interquartile mean with its 95% interval (rliable),
and the fraction of seeds that reach a threshold. Scores are success rates, fractions in [0, 1]."""

import functools
import math
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

BOOTSTRAP_REPS = 2_000  # stratified-bootstrap resamples of the seeds for the IQM's 95% interval (rliable's examples'
# number; with 5 seeds there are only 126 distinct resamples)


def mean_standard_error(values: Iterable[float]) -> Tuple[Optional[float], Optional[float], int]:
  """(mean, standard error, n) of `values`: s.e. = s / sqrt(n) with s the sample standard deviation (ddof = 1),
  the paper's "mean +- standard error over seeds"; None for the s.e. when n < 2 and for the mean when n = 0."""
  array = np.asarray(list(values), np.float64)
  n = int(array.size)
  if n == 0:
    return None, None, 0
  mean = float(np.mean(array))
  if n < 2:
    return mean, None, n
  return mean, float(np.std(array, ddof=1) / math.sqrt(n)), n


def iqm_interval(values: Iterable[float], reps: int = BOOTSTRAP_REPS,
                 seed: int = 0) -> Optional[Tuple[float, float, float]]:
  """rliable's interquartile mean (the 25% trimmed mean) of `values`, one score per seed, and its 95% stratified
  bootstrap interval (percentile method, `reps` resamples of the seeds; Agarwal et al. 2021): (iqm, low, high), or
  None without values. Reproducible: NumPy's global generator, which rliable draws from, is seeded with `seed` for
  the call and restored after it."""
  scores = tuple(float(v) for v in values)
  return _iqm_interval(scores, int(reps), int(seed)) if scores else None


@functools.lru_cache(maxsize=256)
def _iqm_interval(values: Tuple[float, ...], reps: int, seed: int) -> Tuple[float, float, float]:
  array = np.asarray(values, np.float64)
  from rliable import library  # pylint: disable=g-import-not-at-top  (pandas, arch: only when needed)
  from rliable import metrics  # pylint: disable=g-import-not-at-top  (pandas, arch: only when needed)
  state = np.random.get_state()
  np.random.seed(seed)
  try:
    point, interval = library.get_interval_estimates({'seeds': array.reshape(-1, 1)},
                                                     lambda scores: np.array([metrics.aggregate_iqm(scores)]),
                                                     reps=reps)
  finally:
    np.random.set_state(state)
  return float(point['seeds'][0]), float(interval['seeds'][0, 0]), float(interval['seeds'][1, 0])


def seed_statistics(values: Sequence[float]) -> Dict[str, Any]:
  """{'seeds', 'mean', 'se', 'iqm', 'iqm_low', 'iqm_high'} of one score per seed (`mean_standard_error`,
  `iqm_interval`; None where undefined)."""
  mean, se, n = mean_standard_error(values)
  iqm = iqm_interval(values) if n else None
  return {
      'seeds': n,
      'mean': mean,
      'se': se,
      'iqm': iqm and iqm[0],
      'iqm_low': iqm and iqm[1],
      'iqm_high': iqm and iqm[2]
  }


def seeds_reaching(values: Iterable[float], threshold: float) -> Dict[str, Any]:
  """{'threshold', 'count', 'seeds', 'fraction'}: how many of `values` (one score per seed) are >= `threshold`, of
  how many; 'fraction' None without values."""
  values = list(values)
  count = sum(value >= threshold for value in values)
  return {
      'threshold': threshold,
      'count': count,
      'seeds': len(values),
      'fraction': count / len(values) if values else None
  }
