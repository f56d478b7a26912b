"""uvf.rollout and the one goal schedule: the evaluation rollout and collection's `Context.step` produce the same goals
on the same trajectory (real AntMaze configuration, freshly initialised agents, seeded resets), and `Context.next_goal`
on hand-worked values."""

import numpy as np
import pytest
import tensorflow as tf

import launcher
from uvf import agent as agent_lib
from uvf import build as build_lib
from uvf import representation
from uvf import rollout
import uvf.configurables  # noqa: F401  pylint: disable=unused-import
from uvf.environments import create_maze_env

CONFIG = launcher.CONFIG_DIR / 'ant_maze.gin'
STEPS = 23  # three meta periods (c = 10): goals chosen by the meta actor after steps 0, 10 and 20
MODE = 'eval2'
TARGET = [16.0, 16.0]


@pytest.fixture(scope='module', name='agents')
def _agents():
  launcher.parse_gin([CONFIG], [f'evaluate.max_steps_per_episode = {STEPS}'])
  meta, low, preprocess, _ = build_lib.build_agents(create_maze_env.create_maze_env(), agent_lib.UvfAgent,
                                                    agent_lib.MetaAgent, representation.StatePreprocess,
                                                    representation.InverseDynamics)
  return meta, low, preprocess


def collection_goals(meta, low, preprocess, seed):
  """One episode driven by `Context.step` on the agents' own context variables, as collection drives it (without the
  exploration noise): the goal each action was chosen for, float32 [T, G]."""
  low_context, meta_context = low.tf_context, meta.tf_context
  env = create_maze_env.create_maze_env()
  env.seed(seed)
  state = env.reset().observation
  low_context.reset(MODE, meta_context=meta_context)
  np.testing.assert_array_equal(meta_context.vars[0].numpy(), TARGET)
  spec = env.action_spec()
  goals = []
  for _ in range(STEPS):
    goal = low_context.vars[0].numpy()
    goals.append(goal)
    action = np.clip(
        low.actions(tf.constant(state[None]), [tf.constant(goal[None])]).numpy()[0], spec.minimum, spec.maximum)
    next_state = env.step(action).observation
    state_repr, next_state_repr = preprocess(tf.constant(state)), preprocess(tf.constant(next_state))

    def meta_action(next_state=next_state):
      return meta.actions(tf.constant(next_state[None]), [meta_context.vars[0][None]])[0]

    low_context.step(MODE, meta_context=meta_context, meta_action=meta_action, state=tf.constant(state),
                     next_state=tf.constant(next_state), state_repr=state_repr, next_state_repr=next_state_repr)
    state = next_state
  return np.stack(goals)


def test_rollout_and_collection_share_the_goal_schedule(agents):
  meta, low, preprocess = agents
  seeds = [rollout.episode_seed(0, i) for i in range(2)]
  environments = rollout.ParallelEnvironments([create_maze_env.create_maze_env() for _ in range(2)])
  evaluator = rollout.Evaluator(environments, low, meta, preprocess)
  targets = evaluator.targets(MODE, 2).numpy()
  out = evaluator.run(targets, STEPS, seeds)
  environments.close()
  assert out['goals'].shape == (2, STEPS, 15)
  for i, seed in enumerate(seeds):
    expected = collection_goals(meta, low, preprocess, seed)
    np.testing.assert_allclose(out['goals'][i], expected, rtol=1e-5, atol=1e-5)
    # The schedule is not trivial here: g_0 = 0, and the meta actor's goals (after steps 0, 10, 20) break the
    # relative transition, which carries g + s[:15] - s'[:15] between them.
    assert not expected[0].any()
    jumps = [t for t in range(1, STEPS) if not np.allclose(expected[t], expected[t - 1], atol=1e-3)]
    assert {1, 11, 21} <= set(jumps)


class _Spec(object):
  """The one thing a Context reads from its environment: the observation spec."""

  def observation_spec(self):
    return tf.TensorSpec([3], tf.float32)


def relative_transition(contexts, timer, sampler_fn, state=None, next_state=None):
  del timer, sampler_fn
  return [contexts[0] + state[..., :2] - next_state[..., :2]]


@pytest.mark.parametrize('compiled', [False, True])
def test_next_goal_by_hand(compiled):
  from uvf.context import context as context_lib  # pylint: disable=import-outside-toplevel
  low = context_lib.Context(_Spec(), context_shapes=[2], context_transition_fn=relative_transition,
                            meta_action_every_n=3)
  goal = tf.constant([[1.0, 2.0], [0.0, -1.0]])
  state = tf.constant([[0.5, 0.5], [1.0, 1.0]])
  next_state = tf.constant([[1.0, 0.0], [3.0, 1.0]])
  new = tf.constant([[9.0, 9.0], [8.0, 8.0]])
  calls = []

  def meta_action():
    calls.append(1)
    return new

  fn = tf.function(low.next_goal) if compiled else low.next_goal
  for t, expected in ((0, new), (1, [[0.5, 2.5], [-2.0, -1.0]]), (3, new), (5, [[0.5, 2.5], [-2.0, -1.0]])):
    np.testing.assert_allclose(fn(goal, tf.constant(t), state, next_state, meta_action).numpy(), expected)
  if not compiled:
    assert len(calls) == 2  # the meta actor runs only on the steps that switch goals
  no_schedule = context_lib.Context(_Spec(), context_shapes=[2])
  with pytest.raises(ValueError, match='meta_action_every_n'):
    no_schedule.next_goal(goal, tf.constant(0), state, next_state, new)
