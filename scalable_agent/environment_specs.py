"""What every IMPALA environment backend shares (`environments`, `atari`, `builtin`, `gymnasium_levels`): the
defaults of the flags that shape a frame, the test-mode seed, the output specs of `initial` / `step`, the action check
and area resizing.

A backend's `initial()` returns an observation (frame uint8 [height, width, channels], instruction str), its
`step(action)` returns (reward float32 [], done bool [], observation); `method_specs` gives their `tf.TensorSpec`s.
"""

import numpy as np

# The original flags that shape an environment, with the original defaults (experiment.py).
DEFAULT_WIDTH = 96
DEFAULT_HEIGHT = 72
DEFAULT_NUM_ACTION_REPEATS = 4
# DeepMind Lab's `mixerSeed` in test mode (original create_environment): levels differ from the training ones.
TEST_MIXER_SEED = 0x600D5EED


class MissingDependencyError(ImportError):
  """An optional dependency that a configuration needs is not installed; the message says how to install it."""


def observation_specs(height, width, channels=3):
  """TensorSpecs of an observation: (frame uint8 [height, width, channels], instruction string [])."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only the parent process asks for specs)
  return (tf.TensorSpec([height, width, channels], tf.uint8), tf.TensorSpec([], tf.string))


def method_specs(method_name, height, width, channels=3):
  """The specs of `initial` (an observation) and `step` ((reward, done, observation)); None for other methods."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  observation_spec = observation_specs(height, width, channels)
  if method_name == 'initial':
    return observation_spec
  if method_name == 'step':
    return (tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.bool), observation_spec)
  return None


def check_action(action, num_actions):
  """Returns `action` as a Python int in [0, num_actions); ValueError otherwise."""
  index = int(action)
  if index != action or not 0 <= index < num_actions:
    raise ValueError(f'action must be an integer index in [0, {num_actions}); got {action!r}.')
  return index


def area_resize_matrix(source_size, target_size):
  """float32 [target_size, source_size]: row i averages the source pixels under target pixel i, by overlap.

  Applied on both axes this is area interpolation (OpenCV's INTER_AREA) for any pair of sizes.
  """
  scale = source_size / target_size
  starts = np.arange(target_size)[:, None] * scale
  pixels = np.arange(source_size)[None, :]
  overlap = np.clip(np.minimum(pixels + 1, starts + scale) - np.maximum(pixels, starts), 0, None)
  return (overlap / scale).astype(np.float32)
