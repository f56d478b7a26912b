"""The optimised paths of the HIRO training loop against straightforward references.

* `ActorNetwork.shared_input_actions` (the off-policy correction's actor: the states' part of the first layer
  computed once for K goals) against a NumPy forward pass of the actor on the K x N concatenated rows, the
  formulation of the original (`tf.tile` of the states, one actor call on [K * N, O + G]).
* `HiroTrainer.meta_level_inputs` (the loop's own path) at the shipped sizes (batch 100, 10 candidates, c = 10):
  its relabelled goals against the original's `sample_best_meta_actions` recomputed in NumPy (float64 scores) from
  the same weights, batch and Gaussian draws.
* The bfloat16 switches: off by default, close to float32 when on, and a bad value is a clear error (a bound one
  stops `run_train.py` with exit status 2 before it writes anything).

The TD3 updates of both levels, from the same state and batch through the same path, are compared with an
independent `tf.compat.v1` graph of the original's to 1e-5 in every variable and slot they write by
tests/uvf/test_train_tf1.py.
"""

from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.uvf import hiro_fixtures
from uvf import off_policy_correction
from uvf.agents import ddpg_networks

B, K, C, O, G, A = 100, 10, 10, 30, 15, 8  # the shipped AntMaze sizes: batch, candidates, c, obs, goal, action
GOAL_MAX = np.array([10, 10, 0.5, 1, 1, 1, 1, 0.5, 0.3, 0.5, 0.3, 0.5, 0.3, 0.5, 0.3], np.float32)  # hiro_orig
ACTION_MAX = 30.0


class _Spec(object):
  shape, minimum, maximum = (A,), -ACTION_MAX, ACTION_MAX


def _numpy_actor(network, rows, zero_obs):
  """mu(rows) in float64 NumPy from the network's variables: ReLU layers, tanh output scaled to +-30."""
  variables = [v.numpy().astype(np.float64) for v in network.ordered_variables()]
  x = rows.astype(np.float64)
  if zero_obs:
    x = x * np.r_[0.0, 0.0, np.ones(x.shape[-1] - 2)]
  pairs = list(zip(variables[::2], variables[1::2]))
  for weights, biases in pairs[:-1]:
    x = np.maximum(x @ weights + biases, 0.0)
  weights, biases = pairs[-1]
  return ACTION_MAX * np.tanh(x @ weights + biases)


def _random_actor(rng, zero_obs, scope):
  network = ddpg_networks.ActorNetwork(O + G, _Spec(), scope=scope, hidden_layers=(300, 300), zero_obs=zero_obs)
  for variable in network.ordered_variables():
    fan_in = variable.shape[0] if variable.shape.rank == 2 else 10.0
    variable.assign(rng.normal(0, 1 / np.sqrt(fan_in), variable.shape).astype(np.float32))
  return network


@pytest.mark.parametrize('zero_obs', [True, False])
def test_shared_input_actions_equal_the_actor_on_the_concatenated_rows(zero_obs):
  rng = np.random.default_rng(0)
  network = _random_actor(rng, zero_obs, f'equivalence_{zero_obs}/actor_net')
  n = 64
  states = rng.normal(0, 3, (n, O)).astype(np.float32)
  goals = rng.normal(0, 3, (K, n, G)).astype(np.float32)
  rows = np.concatenate([np.tile(states[None], [K, 1, 1]), goals], -1)  # [K, n, O + G], the original's tiling
  reference = _numpy_actor(network, rows.reshape(-1, O + G), zero_obs).reshape(K, n, A)
  assert np.abs(reference).max() > 10 and np.abs(reference).min() < 25  # tanh neither saturated nor flat
  got = network.shared_input_actions(tf.constant(states), tf.constant(goals)).numpy()
  np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5 * ACTION_MAX)
  np.testing.assert_allclose(
      network(tf.constant(rows.reshape(-1, O + G))).numpy().reshape(K, n, A), reference, rtol=1e-5,
      atol=1e-5 * ACTION_MAX)
  # bfloat16 products (the switch): close to float32, but not equal to it.
  fast = network.shared_input_actions(tf.constant(states), tf.constant(goals), compute_dtype=tf.bfloat16).numpy()
  assert fast.dtype == np.float32
  error = np.abs(fast - reference)
  assert 1e-3 < error.max() and error.mean() < 0.02 * ACTION_MAX, (error.max(), error.mean())


def test_network_compute_dtype_switch():
  network = ddpg_networks.critic_net(O + G, A, scope='equivalence_switch/critic_net', states_hidden_layers=(300,),
                                     joint_hidden_layers=(300,))
  assert network.compute_dtype == tf.float32  # the default: the original's float32 products
  rng = np.random.default_rng(1)
  states, actions = rng.normal(size=(B, O + G)).astype(np.float32), rng.normal(size=(B, A)).astype(np.float32)
  exact = network(states, actions).numpy()
  network.compute_dtype = 'bfloat16'
  fast = network(states, actions).numpy()
  assert fast.dtype == np.float32 and not np.array_equal(fast, exact)
  np.testing.assert_allclose(fast, exact, atol=0.02 * np.abs(exact).max())
  with pytest.raises(ValueError, match='compute_dtype'):
    network.compute_dtype = 'float16'
  with pytest.raises(ValueError, match='GoalRelabeler.compute_dtype'):
    off_policy_correction.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -30, 30, compute_dtype='half')


@pytest.fixture(scope='module', name='trainer')
def _trainer(tmp_path_factory):
  return hiro_fixtures.build_trainer(tmp_path_factory.mktemp('equivalence'),
                                     hiro_fixtures.small_bindings(extra=[f'train_uvf.batch_size = {B}']))


def _original_relabelling(low_actor, states, next_states, goals, low_states, low_actions, normals):
  """sample_best_meta_actions of the original, in NumPy: 8 Gaussian candidates around loc = s'[:G] - s[:G] (std
  0.5 x half range), loc, the stored goal, clipped; each scored by -sum (a_i - mu(s_i ⊕ g_i))^2 / 30^2 over the c
  steps in float64, with g_i = g + s_0[:G] - s_i[:G]; the best per element (first maximum)."""
  loc = (next_states - states)[:, :G]
  samples = np.concatenate([loc[None] + 0.5 * GOAL_MAX * normals, loc[None], goals[None]], 0)
  candidates = np.clip(samples, -GOAL_MAX, GOAL_MAX)  # [K, B, G] float32
  step_goals = candidates[:, :, None] + low_states[None, :, :1, :G] - low_states[None, :, :, :G]  # [K, B, c, G]
  rows = np.concatenate([np.broadcast_to(low_states[None], (K, B, C, O)), step_goals], -1)
  predicted = _numpy_actor(low_actor, rows.reshape(-1, O + G), zero_obs=True).reshape(K, B, C, A)
  scores = -np.sum((low_actions[None].astype(np.float64) - predicted)**2 / ACTION_MAX**2, (2, 3))
  best = np.argmax(scores, 0)
  return candidates[best, np.arange(B)], best, np.sort(scores, 0)


def test_meta_level_inputs_relabel_as_the_original_at_the_shipped_sizes(trainer):
  t = trainer
  rng = np.random.default_rng(2)
  low_actor = t.uvf_agent.networks['actor_net']
  for variable in low_actor.ordered_variables():
    fan_in = variable.shape[0] if variable.shape.rank == 2 else 10.0
    variable.assign(rng.normal(0, 1 / np.sqrt(fan_in), variable.shape).astype(np.float32))
  low_states = rng.normal(0, 1, (B, C, O)).astype(np.float32)
  low_states[..., :2] = rng.uniform(-4, 20, (B, C, 2))
  states, next_states = low_states[:, 0], rng.normal(0, 1, (B, O)).astype(np.float32)
  goals = rng.uniform(-GOAL_MAX, GOAL_MAX, (B, G)).astype(np.float32)
  # Stored actions near the actor's own for a goal close to loc: the candidates' scores are then close (the hard case).
  loc_rows = np.concatenate([low_states, np.broadcast_to((next_states - states)[:, None, :G], (B, C, G))], -1)
  low_actions = (_numpy_actor(low_actor, loc_rows.reshape(-1, O + G), zero_obs=True).reshape(B, C, A) +
                 rng.normal(0, 3, (B, C, A))).clip(-30, 30).astype(np.float32)
  targets = rng.uniform(-4, 20, (2, B, 2)).astype(np.float32)
  batch = [
      states, goals, -rng.uniform(0, 20, B).astype(np.float32),
      np.ones(B, np.float32), next_states, low_states, low_actions, targets[0], targets[1]
  ]
  generator = t.relabeler.rng
  normals = tf.random.Generator.from_state(generator.state.numpy(), generator.algorithm).normal([K - 2, B, G]).numpy()
  expected, best, sorted_scores = _original_relabelling(low_actor, states, next_states, goals, low_states, low_actions,
                                                        normals)
  assert len(set(best.tolist())) >= 3  # the winners vary: a wrong score order would show
  margins = sorted_scores[-1] - sorted_scores[-2]
  assert np.all(margins > 1e-6), margins.min()  # no near-tie that float32 rounding could flip
  relabelled = t.meta_level_inputs([tf.constant(x) for x in batch])[1].numpy()
  np.testing.assert_array_equal(relabelled, expected)


def test_a_bad_bound_compute_dtype_stops_the_run_before_it_writes(tmp_path):
  root = Path(__file__).resolve().parents[2]
  run_dir = tmp_path / 'run'
  result = subprocess.run([
      sys.executable,
      str(root / 'run_train.py'),
      str(root / 'configs' / 'ant_maze.gin'), '--train_dir',
      str(run_dir), '--gin_param', "meta/ddpg_actor_net.compute_dtype = 'fp8'"
  ], capture_output=True, text=True, timeout=300, cwd=root, check=False)
  assert result.returncode == 2, result.stderr[-2000:]
  assert "meta/ddpg_actor_net.compute_dtype = 'fp8' is not a valid compute dtype" in result.stderr
  assert 'Traceback' not in result.stderr and not run_dir.exists()
