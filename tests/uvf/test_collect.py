"""uvf.collect: the transitions of one collection step, re-derived in NumPy from the original's collect_experience
(tensorflow/models research/efficient-hrl train.py): the low-level element layout, and the meta transitions over an
episode boundary."""

import numpy as np
import pytest
import tensorflow as tf

import launcher
from tests.uvf import hiro_fixtures
from uvf import agent as agent_lib
from uvf import collect
from uvf import representation
from uvf.agents import circular_buffer
from uvf.environments import create_maze_env

L, C, STEPS = 30, 10, 75  # episode length (a multiple of c, as HIRO's 500), c, steps collected
TARGET = np.array([16.0, 0.0], np.float32)


@pytest.fixture(scope='module', name='collected')
def _collect():
  launcher.parse_gin([hiro_fixtures.CONFIG], [
      f'every_n_steps.n = {L}', f'every_n_episodes.steps_per_episode = {L}',
      'meta/Context.samplers = {"explore": [@eval1/ConstantSampler], "train": [@eval1/ConstantSampler]}'
  ])
  env = create_maze_env.create_maze_env()
  env.seed(0)
  env.reset()
  tf_env = create_maze_env.TFPyEnvironment(env)
  specs = ([tf_env.observation_spec()], [tf_env.action_spec()], tf_env)
  tf.random.set_seed(0)
  with tf.name_scope('meta_agent'):
    meta = agent_lib.MetaAgent(*specs)
  with tf.name_scope('uvf_agent'):
    low = agent_lib.UvfAgent(*specs)
  counters = [tf.Variable(0, dtype=tf.int64) for _ in range(3)]
  low_buffer = circular_buffer.CircularBuffer(1000, 'agent')
  meta_buffer = circular_buffer.CircularBuffer(100, 'meta')
  global_step, num_episodes, num_resets = counters
  collector = collect.Collector(env, uvf_agent=low, meta_agent=meta,
                                state_preprocess=representation.StatePreprocess(ndims=15), replay_buffer=low_buffer,
                                meta_replay_buffer=meta_buffer, global_step=global_step, num_episodes=num_episodes,
                                num_resets=num_resets, seed=0)
  step = tf.function(collector.step)
  ends = [bool(step()['episode_end']) for _ in range(STEPS)]
  return collector, low_buffer, meta_buffer, counters, ends


def test_transitions_against_numpy(collected):
  collector, low_buffer, meta_buffer, (global_step, num_episodes, num_resets), ends = collected
  del collector
  assert int(global_step.numpy()) == STEPS and int(num_episodes.numpy()) == STEPS // L == int(num_resets.numpy())
  assert step_trace_ok(ends)
  s, a, r, d, s2, g, g2 = [x.numpy() for x in low_buffer.gather(tf.range(STEPS))]
  n = np.arange(1, STEPS + 1)  # 1-based global step of each row
  in_ep = (n - 1) % L + 1  # step within the episode
  ep = (n - 1) // L  # episode index
  # Low-level element: [s, a, r, discount, s', g, g'], consecutive within an episode.
  np.testing.assert_array_equal(d, 1.0)
  cont = in_ep[1:] > 1
  np.testing.assert_array_equal(s[1:][cont], s2[:-1][cont])
  np.testing.assert_array_equal(g[1:], g2[:-1])
  np.testing.assert_array_equal(g[in_ep == 1], 0.0)  # the first action of an episode sees g = 0
  np.testing.assert_array_equal(g2[in_ep == L], 0.0)  # reset at the episode end
  relative = (in_ep % C != 1) & (in_ep < L)
  np.testing.assert_allclose(g2[relative], (g + s[:, :15] - s2[:, :15])[relative], rtol=1e-5, atol=1e-5)
  goal_max = np.array([10, 10, .5, 1, 1, 1, 1, .5, .3, .5, .3, .5, .3, .5, .3], np.float32)
  assert np.all(np.abs(g2[in_ep % C == 1]) <= goal_max + 1e-6)
  assert np.all(np.abs(a) <= 30)
  # Targets per episode: the contexts start at zero; each reset samples the constant target.
  targets = np.where((ep == 0)[:, None], 0.0, TARGET[None]).astype(np.float32)
  r_meta = -np.linalg.norm(s2[:, :2] - targets, axis=1)

  def row(episode, k):  # 0-based row of step k (1-based) of an episode
    return episode * L + k - 1

  expected = []
  for e in range(STEPS // L + 1):
    for n0 in range(1, L, C):
      end = n0 + C
      if row(e, end) >= STEPS:
        break
      if end <= L - 1:  # a full window, stored at step n0 + c
        states = [s2[row(e, n0 + i)] for i in range(C)]
        actions = [a[row(e, n0 + i + 1)] for i in range(C)]
        reward = 0.1 * sum(r_meta[row(e, k)] for k in range(n0 + 1, end + 1))
        expected.append((s2[row(e, n0)], g2[row(e, n0)], reward, 1.0, s2[row(e, end)], states, actions,
                         targets[row(e, n0)], targets[row(e, n0)]))
      else:  # the episode's last window, stored at step L: 9 pairs and one stale pair, last reward dropped
        states = [s2[row(e, n0 + i)] for i in range(C - 1)] + [s2[row(e, n0 - 1)]]
        actions = [a[row(e, n0 + i + 1)] for i in range(C - 1)] + [a[row(e, n0)]]
        reward = 0.1 * sum(r_meta[row(e, k)] for k in range(n0 + 1, L))
        expected.append(
            (s2[row(e, n0)], g2[row(e, n0)], reward, 0.0, s2[row(e, L)], states, actions, targets[row(e, n0)], TARGET))
  got = [x.numpy() for x in meta_buffer.gather(tf.range(int(meta_buffer.num_adds.numpy())))]
  assert len(got[0]) == len(expected) == 7  # 3 per 30-step episode, 1 of the third
  for i, want in enumerate(expected):
    for k, value in enumerate(want):
      np.testing.assert_allclose(got[k][i], np.asarray(value, np.float32), rtol=1e-5, atol=1e-5,
                                 err_msg=f'meta transition {i}, entry {k}')


def step_trace_ok(ends):
  """Episode ends exactly at steps L, 2L, ..."""
  return [i + 1 for i, end in enumerate(ends) if end] == list(range(L, STEPS + 1, L))


def test_env_state_roundtrip(collected):
  collector = collected[0]
  stepper = collector.stepper
  collector.save_env_state()
  action = np.full([8], 3.0, np.float32)
  first = [stepper.step(action)[0] for _ in range(5)]
  assert collector.restore_env_state()
  again = [stepper.step(action)[0] for _ in range(5)]
  np.testing.assert_allclose(np.stack(first), np.stack(again), atol=1e-6)
  collector.save_env_state()
  reset_a = stepper.reset()
  collector.restore_env_state()
  np.testing.assert_array_equal(reset_a, stepper.reset())  # the reset-noise generator is restored too
