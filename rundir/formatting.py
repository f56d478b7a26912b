"""Sizes and durations as people read them, the same in every message of both systems."""

import math
from typing import Optional


def format_bytes(n: Optional[float]) -> str:
  """'459.2 MB' (decimal units), '812 bytes'; '?' when unknown (None)."""
  if n is None:
    return '?'
  n = float(n)
  for unit in ('bytes', 'KB', 'MB', 'GB'):
    if n < 1000:
      return f'{n:.0f} {unit}' if unit == 'bytes' else f'{n:.1f} {unit}'
    n /= 1000
  return f'{n:.1f} TB'


def format_duration(seconds: Optional[float], show_seconds: bool = True) -> str:
  """'45s', '12m05s', '3h07m05s', '2d03h07m05s'; without `show_seconds` ('12m', '3h07m') past the first minute.

  Args:
    seconds: a duration in seconds; negative counts as 0; None, NaN or infinite gives '?'.
    show_seconds: whether durations of a minute or more show their seconds.
  """
  if seconds is None or not math.isfinite(seconds):
    return '?'
  seconds = int(max(seconds, 0))
  days, rest = divmod(seconds, 86400)
  hours, rest = divmod(rest, 3600)
  minutes, secs = divmod(rest, 60)
  if not days and not hours and not minutes:
    return f'{secs}s'
  if days:
    text = f'{days}d{hours:02d}h{minutes:02d}m'
  elif hours:
    text = f'{hours}h{minutes:02d}m'
  else:
    text = f'{minutes}m'
  return f'{text}{secs:02d}s' if show_seconds else text
