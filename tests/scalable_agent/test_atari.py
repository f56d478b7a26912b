"""The paper's Atari expert setup end to end through the real ALE: configs/impala_atari.gin's settings reach the
environment processes, the shallow expert trains (gradient clipping on), and test mode plays whole games and writes
its mean to JSON and TensorBoard."""

import glob
import os

import gin
import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import networks
from scalable_agent import settings as settings_lib

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'configs')


@pytest.fixture
def atari_config():
  """configs/impala_atari.gin parsed (its experiment flags are replaced by each test's Settings); cleared after."""
  gin.clear_config()
  gin.add_config_file_search_path(CONFIGS)
  gin.parse_config_files_and_bindings([os.path.join(CONFIGS, 'impala_atari.gin')], [])
  yield
  gin.clear_config()


def _scalars(directory):
  values = {}
  for path in glob.glob(os.path.join(directory, 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        values.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
  return values


def test_the_config_reaches_the_environment_and_the_agent(atari_config):  # pylint: disable=unused-argument,redefined-outer-name
  constructor = environments.environment_constructor('atari/pong', 1, width=84, height=84)
  assert constructor.frame_shape == (84, 84, 4)
  assert {
      k: constructor.kwargs[k] for k in ('grayscale', 'frame_stack', 'noop_max', 'terminal_on_life_loss')
  } == {
      'grayscale': True,
      'frame_stack': 4,
      'noop_max': 30,
      'terminal_on_life_loss': True
  }
  # Test mode plays whole games whatever the training setting says.
  assert environments.environment_constructor('atari/pong', 1, True).kwargs['terminal_on_life_loss'] is False
  agent = networks.make_agent(constructor.num_actions, constructor.frame_shape)
  assert isinstance(agent, networks.FeedForwardAgent) and agent.num_actions == 6


@pytest.mark.slow
def test_short_atari_training_then_test_mode(tmp_path, atari_config):  # pylint: disable=unused-argument,redefined-outer-name
  logdir = str(tmp_path)
  settings = settings_lib.Settings(level_name='atari/breakout', num_actors=2, batch_size=2, unroll_length=10, width=84,
                                   height=84, total_environment_frames=240, entropy_cost=0.01, learning_rate=0.0006,
                                   epsilon=0.01, test_num_episodes=1)
  steps = []
  assert experiment.train(logdir, settings, step_hook=lambda _, m: steps.append(m)) == 240
  assert len(steps) == 3  # 2 unrolls x 10 agent steps x 4 frames = 80 frames per learner step.
  assert all(np.isfinite(m['gradient_norm']) and m['gradient_norm'] > 0 for m in steps)  # Clipping (40) is on.
  assert os.path.exists(os.path.join(logdir, 'model.ckpt-240.index'))
  scalars = _scalars(logdir)
  assert {'gradient_norm', 'total_loss', 'learning_rate'} <= set(scalars)

  results = experiment.test(logdir, settings)  # One whole game of Breakout (5 lives), sampled actions.
  returns = results['levels']['atari/breakout']['returns']
  assert len(returns) == 1 and results['num_environment_frames'] == 240
  test_scalars = _scalars(os.path.join(logdir, 'test'))
  assert test_scalars['atari/breakout/test_mean_return'] == [(240, pytest.approx(returns[0]))]
  assert test_scalars['test_mean_return'] == [(240, pytest.approx(results['mean_return']))]
