"""Replay buffer of HIRO (issue #5)."""

import gin

from uvf.placeholders import not_built


@gin.configurable
class CircularBuffer(object):
  """Fixed-size circular replay buffer of transition tensors, sampled uniformly (issue #5)."""

  def __init__(self, buffer_size=1000, scope='replay_buffer'):
    del buffer_size, scope
    raise NotImplementedError(not_built('the replay buffer CircularBuffer', 5))
