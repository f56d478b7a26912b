"""uvf.cond_fn truth tables."""

import gin
import numpy as np
import pytest
import tensorflow as tf

from uvf import cond_fn


@pytest.fixture(autouse=True)
def _no_gin_bindings():
  """Other tests leave gin bindings (e.g. every_n_episodes.steps_per_episode); run with the functions' defaults."""
  with gin.unlock_config():
    gin.clear_config()
  yield


def _state(height):
  state = np.zeros(30, np.float32)
  state[2] = height
  return tf.constant(state)


def _call(fn, steps, episodes=0, height=0.55, last=False, **kwargs):
  return bool(
      fn(None, _state(height), None, tf.constant(last), tf.constant(steps, tf.int64), tf.constant(episodes, tf.int64),
         **kwargs))


def test_every_n_steps():
  table = {0: True, 1: False, 499: False, 500: True, 501: False, 1000: True}
  assert {s: _call(cond_fn.every_n_steps, s, n=500) for s in table} == table


def test_every_n_episodes_with_the_fall_check():
  # HIRO's setting: n = 1, steps_per_episode = 500: the last step of every episode.
  kwargs = dict(n=1, steps_per_episode=500)
  assert [_call(cond_fn.every_n_episodes, s, **kwargs) for s in (499, 500, 501, 1000)] == [False, True, False, True]
  # n = 2: episodes 1, 3, ... ((num_episodes + 1) mod 2 == 0) end with a reset, others only if the ant fell.
  kwargs = dict(n=2, steps_per_episode=500)
  table = [  # (steps, episodes, torso height) -> reset
      ((500, 0, 0.55), False),
      ((500, 1, 0.55), True),
      ((1000, 2, 0.55), False),
      ((1500, 3, 0.55), True),
      ((500, 0, 0.1), True),
      ((500, 0, 1.2), True),
      ((500, 0, 0.2), False),
      ((500, 0, 1.0), False),
      ((499, 0, 0.1), False),
      ((499, 1, 0.55), False),
  ]
  for (steps, episodes, height), expected in table:
    assert _call(cond_fn.every_n_episodes, steps, episodes, height, **kwargs) == expected, (steps, episodes, height)
  with pytest.raises(ValueError, match='steps_per_episode'):
    _call(cond_fn.every_n_episodes, 500, n=1)


def test_transition_conditions_and_constants():
  assert _call(cond_fn.env_transition, 1, last=False) and not _call(cond_fn.env_transition, 1, last=True)
  assert _call(cond_fn.env_restart, 1, last=True) and not _call(cond_fn.env_restart, 1, last=False)
  assert _call(cond_fn.true_fn, 3) and not _call(cond_fn.false_fn, 3)


def test_failed_reset_after_n_episodes():
  kwargs = dict(steps_per_episode=500, reset_state=np.zeros(30), max_dist=1.0)
  assert _call(cond_fn.failed_reset_after_n_episodes, 500, height=2.0, **kwargs)
  assert not _call(cond_fn.failed_reset_after_n_episodes, 500, height=0.5, **kwargs)
  assert not _call(cond_fn.failed_reset_after_n_episodes, 499, height=2.0, **kwargs)
