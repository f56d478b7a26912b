"""Actor and critic networks: NumPy forward passes from the variables, TF1 names and shapes, initialisers, gin."""

import gin
import gin.tf.external_configurables  # noqa: F401  (registers @tf.nn.relu, as base_uvf.gin imports it)
import numpy as np
import pytest
import tensorflow as tf

from uvf.agents import ddpg_agent
from uvf.agents import ddpg_networks


class Spec:
  """A bounded spec with the attributes the networks read (shape, dtype, minimum, maximum)."""

  def __init__(self, shape, minimum=None, maximum=None, dtype=np.float32):
    self.shape, self.dtype, self.minimum, self.maximum = tuple(shape), dtype, minimum, maximum


@pytest.fixture
def clean_gin():
  """An empty, unlocked gin configuration (another test may have parsed and locked one), emptied again after.

  `gin.clear_config` also unlocks; `gin.unlock_config()` would lock again on exit.
  """
  gin.clear_config()
  yield
  gin.clear_config()


def relu(x):
  return np.maximum(x, 0.0)


def np_actor(weights, states, minimum, maximum, hidden, zero_obs):
  """The actor by definition (efficient-hrl agents/ddpg_networks.py), from a {TF1 name: array} map without the
  network scope."""
  x = states.astype(np.float64)
  if zero_obs:
    x = x * np.r_[0.0, 0.0, np.ones(x.shape[1] - 2)]
  for i in range(1, hidden + 1):
    x = relu(x @ weights[f'states/states_{i}/weights'] + weights[f'states/states_{i}/biases'])
  t = np.tanh(x @ weights['actions/weights'] + weights['actions/biases'])
  return (maximum + minimum) / 2 + (maximum - minimum) / 2 * t


def np_critic(weights, states, actions, zero_obs):
  """The critic by definition: concat(s, a) (masked) -> states_1 -> concat(., a) -> joint_1 -> q_value, [B]."""
  x = np.concatenate([states, actions], 1).astype(np.float64)
  if zero_obs:
    x = x * np.r_[0.0, 0.0, np.ones(x.shape[1] - 2)]
  x = relu(x @ weights['states/states_1/weights'] + weights['states/states_1/biases'])
  x = np.concatenate([x, actions], 1)
  x = relu(x @ weights['joint/joint_1/weights'] + weights['joint/joint_1/biases'])
  return (x @ weights['q_value/weights'] + weights['q_value/biases'])[:, 0]


def np_weights(net):
  """{TF1 name relative to the network scope: float64 array}."""
  prefix = net.scope + '/'
  return {k[len(prefix):]: v.numpy().astype(np.float64) for k, v in net.variables_by_tf1_name().items()}


def randomize(net, rng):
  """Non-trivial weights (biases too), so that every term of the forward pass matters."""
  for v in net.ordered_variables():
    fan_in = v.shape[0] if v.shape.rank == 2 else 1
    v.assign(rng.normal(0, 1 / np.sqrt(fan_in), v.shape).astype(np.float32))


@pytest.mark.parametrize('zero_obs', [False, True])
def test_actor_matches_numpy_and_stays_in_bounds(zero_obs):
  rng = np.random.default_rng(0)
  minimum, maximum = np.array([-30, -1, 0], np.float32), np.array([30, 3, 0.5], np.float32)
  net = ddpg_networks.ActorNetwork(6, Spec([3], minimum, maximum), scope='x/actor_net', hidden_layers=(5, 4),
                                   zero_obs=zero_obs)
  randomize(net, rng)
  states = rng.normal(0, 3, (7, 6)).astype(np.float32)
  ours = net(states).numpy()
  np.testing.assert_allclose(ours, np_actor(np_weights(net), states, minimum, maximum, 2, zero_obs), rtol=1e-5,
                             atol=1e-5)
  big = net(100 * states).numpy()
  assert np.all(big >= minimum) and np.all(big <= maximum)


def test_actor_mask_ignores_xy_only_when_set():
  rng = np.random.default_rng(1)
  states = rng.normal(size=(4, 5)).astype(np.float32)
  moved = states.copy()
  moved[:, :2] += 10.0
  for zero_obs, same in [(True, True), (False, False)]:
    net = ddpg_networks.ActorNetwork(5, Spec([2], -1.0, 1.0), hidden_layers=(8,), zero_obs=zero_obs)
    randomize(net, rng)
    assert np.allclose(net(states), net(moved)) == same


@pytest.mark.parametrize('zero_obs', [False, True])
def test_critic_matches_numpy(zero_obs):
  rng = np.random.default_rng(2)
  net = ddpg_networks.CriticNetwork(6, 3, scope='x/critic_net', states_hidden_layers=(5,), joint_hidden_layers=(4,),
                                    zero_obs=zero_obs)
  randomize(net, rng)
  states, actions = rng.normal(size=(7, 6)).astype(np.float32), rng.normal(size=(7, 3)).astype(np.float32)
  ours = net(states, actions).numpy()
  assert ours.shape == (7,)
  np.testing.assert_allclose(ours, np_critic(np_weights(net), states, actions, zero_obs), rtol=1e-5, atol=1e-5)


def test_critic_actions_hidden_layers_branch():
  net = ddpg_networks.CriticNetwork(4, 2, scope='c', states_hidden_layers=(5,), actions_hidden_layers=(3,),
                                    joint_hidden_layers=(6,))
  shapes = {k: v.shape.as_list() for k, v in net.variables_by_tf1_name().items()}
  assert shapes['c/actions/actions_1/weights'] == [2, 3]
  assert shapes['c/joint/joint_1/weights'] == [5 + 3, 6]
  assert net(tf.zeros([2, 4]), tf.zeros([2, 2])).shape == [2]


def test_initialisers():
  net = ddpg_networks.CriticNetwork(200, 100, states_hidden_layers=(300,), joint_hidden_layers=(300,))
  actor = ddpg_networks.ActorNetwork(400, Spec([300], -1.0, 1.0), hidden_layers=(300,))
  for layers in [np_weights(net), np_weights(actor)]:
    for name, value in layers.items():
      if name.endswith('biases'):  # slim's zeros, the output layers' too (the original overrode weights only)
        assert np.all(value == 0.0), name
      elif name.startswith(('q_value', 'actions/')):
        assert np.all(np.abs(value) <= 0.003) and np.any(value != 0.0), name
        if value.size > 100:
          assert np.abs(value).max() > 0.0029, name
      else:
        limit = 1 / np.sqrt(value.shape[0])
        assert np.all(np.abs(value) <= limit * (1 + 1e-6)), name
        assert np.abs(value).max() > 0.99 * limit, name  # uniform over the whole range
        assert abs(value.std() - limit / np.sqrt(3)) < 0.02 * limit, name  # std of U(+-limit)


@pytest.mark.usefixtures('clean_gin')
def test_hiro_orig_ant_maze_names_and_shapes():
  """The original's TF1 names and shapes, hiro_orig AntMaze: O = 30, A = 8, G = 15, M = 2."""
  gin.parse_config("""
      ddpg_actor_net.hidden_layers = (300, 300)
      ddpg_critic_net.states_hidden_layers = (300,)
      ddpg_critic_net.joint_hidden_layers = (300,)
  """)
  expected = {'uvf_agent': (45, 8), 'meta_agent': (32, 15)}
  for scope, (in_dim, out_dim) in expected.items():
    agent = ddpg_agent.TD3Agent([Spec([in_dim])], [Spec([out_dim], -1.0, 1.0)], scope=scope)
    got = {k: v.shape.as_list() for k, v in agent.variables_by_tf1_name().items()}
    want = {}
    for net in ['actor_net', 'target_actor_net']:
      want.update({
          f'{scope}/{net}/states/states_1/weights': [in_dim, 300],
          f'{scope}/{net}/states/states_1/biases': [300],
          f'{scope}/{net}/states/states_2/weights': [300, 300],
          f'{scope}/{net}/states/states_2/biases': [300],
          f'{scope}/{net}/actions/weights': [300, out_dim],
          f'{scope}/{net}/actions/biases': [out_dim]
      })
    for net in ['critic_net', 'critic_net2', 'target_critic_net', 'target_critic_net2']:
      want.update({
          f'{scope}/{net}/states/states_1/weights': [in_dim + out_dim, 300],
          f'{scope}/{net}/states/states_1/biases': [300],
          f'{scope}/{net}/joint/joint_1/weights': [300 + out_dim, 300],
          f'{scope}/{net}/joint/joint_1/biases': [300],
          f'{scope}/{net}/q_value/weights': [300, 1],
          f'{scope}/{net}/q_value/biases': [1]
      })
    assert got == want
    for name, variable in agent.variables_by_tf1_name().items():
      assert variable.name == name + ':0'
  assert got['meta_agent/critic_net/joint/joint_1/weights'] == [315, 300]  # the reference's number


@pytest.mark.usefixtures('clean_gin')
def test_gin_scoped_hyper_parameters_reach_the_factories():
  gin.parse_config("""
      agent/ddpg_actor_net.hidden_layers = (7, 5)
      agent/ddpg_actor_net.activation_fn = @tf.nn.relu
      agent/ddpg_actor_net.zero_obs = True
      agent/ddpg_actor_net.images = False
      agent/ddpg_critic_net.states_hidden_layers = (6,)
      agent/ddpg_critic_net.actions_hidden_layers = None
      agent/ddpg_critic_net.joint_hidden_layers = (4,)
      agent/ddpg_critic_net.weight_decay = 0.0
      agent/ddpg_critic_net.zero_obs = True
  """)
  with gin.config_scope('agent'):
    actor = ddpg_networks.actor_net(9, Spec([2], -1.0, 1.0), scope='a')
    critic = ddpg_networks.critic_net(9, 2, scope='c')
  assert [v.shape.as_list() for v in actor.ordered_variables()] == [[9, 7], [7], [7, 5], [5], [5, 2], [2]]
  assert [v.shape.as_list() for v in critic.ordered_variables()] == [[11, 6], [6], [8, 4], [4], [4, 1], [1]]


def test_bad_arguments_raise_value_error():
  with pytest.raises(ValueError, match='normalizer_fn'):
    ddpg_networks.actor_net(4, Spec([2], -1.0, 1.0), normalizer_fn=tf.identity)
  with pytest.raises(ValueError, match='num_reward_dims'):
    ddpg_networks.critic_net(4, 2, num_reward_dims=2)
  with pytest.raises(ValueError, match='hidden_layers'):
    ddpg_networks.actor_net(4, Spec([2], -1.0, 1.0), hidden_layers=(0,))
  with pytest.raises(ValueError, match='maximum > minimum'):
    ddpg_networks.actor_net(4, Spec([2], 1.0, 1.0))
  with pytest.raises(ValueError, match='x, y'):
    ddpg_networks.actor_net(1, Spec([2], -1.0, 1.0), zero_obs=True)
