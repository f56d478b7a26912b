"""uvf.train: short end-to-end runs of train_uvf on the real AntMaze configuration (50-step episodes, batch 16):
counters and schedule, summaries, checkpoints and the progress file, the settings handed to the step and the loop,
stop requests, one trace per run, exact restarts, the reward recomputed at train time, distribution strategies, and
run_train.py end to end."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rundir import progress
from tests.uvf import hiro_fixtures
from tests.uvf.test_checkpoints import HIRO_ORIG_GOAL_MAX
from tests.uvf.test_ddpg_networks import np_actor
from tests.uvf.test_ddpg_networks import np_weights
from uvf import run_loop
from uvf import train
from uvf import train_settings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state(loop):
  """Counters, replay contents and weights of a run, as NumPy."""
  t = loop.trainer
  counters = [
      int(v.numpy()) for v in (t.global_step, t.num_episodes, t.num_resets, t.num_updates, t.num_meta_updates,
                               t.replay_buffer.num_adds, t.meta_replay_buffer.num_adds)
  ]
  replay = [
      v.numpy() for buffer in (t.replay_buffer, t.meta_replay_buffer) for v in buffer.variables_by_tf1_name().values()
  ]
  weights = [v.numpy() for agent in (t.uvf_agent, t.meta_agent) for v in agent.variables_by_tf1_name().values()]
  return counters, replay, weights


@pytest.fixture(scope='module', name='run_a')
def _run_a(tmp_path_factory):
  """200 steps: 50 initial, then 150 iterations (4 episodes)."""
  train_dir = tmp_path_factory.mktemp('run_a')
  loop = hiro_fixtures.run_training(train_dir, hiro_fixtures.small_bindings(episodes=2))
  return train_dir, loop, _state(loop)


def test_counters_schedule_and_trace_counts(run_a):
  _, loop, (counters, _, _) = run_a
  # global_step, num_episodes, num_resets, num_updates (one per iteration), num_meta_updates (the first iteration,
  # then every 10 steps: 51, 60, ..., 200), replay adds (every step; meta: 3 per 50-step episode... see below).
  assert counters[:5] == [200, 4, 4, 150, 16]
  assert counters[5] == 200
  assert counters[6] == 4 * 5  # per episode: at steps 11, 21, 31, 41 and the episode end
  t = loop.trainer
  assert t.run_steps.experimental_get_tracing_count() == 1
  assert t.collect_steps.experimental_get_tracing_count() == 1


def test_summaries_and_checkpoints(run_a):
  train_dir, loop, (counters, _, _) = run_a
  tags, last = set(), {}
  for path in tf.io.gfile.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.add(value.tag)
        if value.metadata.plugin_data.plugin_name == 'scalars':
          last[value.tag] = (event.step, float(tf.make_ndarray(value.tensor)))
  for tag in ('Counters/environment_steps', 'Counters/num_meta_updates', 'Counters/replay_buffer_adds',
              'avg_episode_rewards', 'avg_episode_meta_rewards', 'episode_rewards', 'nometa/Reward/average_step_reward',
              'meta/Reward/average_step_reward', 'global_step/sec', 'avg_episode_final_distance'):
    assert tag in tags, tag
  # The final summaries (written at the end, at step 200) hold the final counters.
  for i, name in enumerate(('environment_steps', 'num_episodes', 'num_resets', 'num_updates', 'num_meta_updates',
                            'replay_buffer_adds', 'meta_replay_buffer_adds')):
    assert last[f'Counters/{name}'] == (200, counters[i]), name
  assert tf.train.latest_checkpoint(str(train_dir)).endswith('model.ckpt-200')
  policy = tf.train.latest_checkpoint(os.path.join(train_dir, 'policy'))
  assert policy.endswith('model.ckpt-200') and os.path.exists(os.path.join(train_dir, 'policy', 'model.ckpt-100.index'))
  keys = set(tf.train.load_checkpoint(policy).get_variable_to_shape_map())
  names = loop.trainer.policy_variables_by_tf1_name()
  assert 'uvf_agent/actor_net/states/states_1/weights' in names and 'meta_agent/action_context_0' in names
  assert not any('target_' in name for name in names)
  for name in names:
    assert 'variables/' + name.replace('/', '.S') + '/.ATTRIBUTES/VARIABLE_VALUE' in keys, name
  assert os.path.exists(os.path.join(train_dir, 'operative_config.gin'))


def test_progress_file_holds_the_final_step_and_state(run_a):
  """The loop keeps `<train_dir>/progress.json` (rundir.progress): after the run, its end ('finished', the step
  budget of 2 x 50 + 100 steps reached) with the rate over the run."""
  train_dir, _, _ = run_a
  record = progress.read_progress(train_dir)
  assert record is not None
  assert record['step'] == 200 and record['total_steps'] == 200 and record['state'] == 'finished'
  assert record['rate'] > 0 and record['pid'] == os.getpid()


def test_loop_settings_carry_train_uvf_arguments_by_name(run_a):
  _, loop, _ = run_a
  assert loop.settings == train_settings.LoopSettings(total_steps=200, initial_steps=50, max_steps_per_episode=50,
                                                      steps_per_call=50, log_every_n_steps=100, save_summaries_secs=0,
                                                      save_interval_secs=300, policy_save_dir='policy',
                                                      save_policy_every_n_steps=100, save_policy_interval_secs=0,
                                                      max_policies_to_save=None, load_path=None)
  with pytest.raises(dataclasses.FrozenInstanceError):
    loop.settings.total_steps = 300


def test_a_stop_request_ends_the_run_stopped_at_an_episode_end(tmp_path):
  """A stop requested before the run: the initial collection (one 50-step episode) ends at an episode end, so the
  loop stops there at once, writes its full checkpoint and leaves progress.json in state 'stopped'."""
  run_loop.request_stop('SIGTERM')
  try:
    loop = hiro_fixtures.run_training(tmp_path, hiro_fixtures.small_bindings(episodes=1))
  finally:
    run_loop.request_stop(None)  # no request left for the next test, had the run failed before honouring it
  assert int(loop.trainer.global_step.numpy()) == 50
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-50')
  record = progress.read_progress(tmp_path)
  assert (record['step'], record['total_steps'], record['state']) == (50, 150, 'stopped')


# Run B: reward_scale_factor, gamma and meta_gamma all different (the configs' are 1, 0.99, 0.99), 20-step episodes.
SCALE, GAMMA, META_GAMMA = 2.5, 0.95, 0.9
ANT_ACTION_BOUND = 30.0


@pytest.fixture(scope='module', name='trainer_a')
def _trainer_a(run_a):
  return run_a[1].trainer


@pytest.fixture(scope='module', name='trainer_b')
def _trainer_b(tmp_path_factory):
  """100 steps: 20 initial, then 80 iterations (5 episodes of 20 steps, 10 meta transitions)."""
  bindings = hiro_fixtures.small_bindings(
      episodes=0, episode=20, extra=[
          f'train_uvf.reward_scale_factor = {SCALE}', f'train_uvf.gamma = {GAMMA}',
          f'train_uvf.meta_gamma = {META_GAMMA}'
      ])
  return hiro_fixtures.run_training(tmp_path_factory.mktemp('run_b'), bindings).trainer


def _numpy_batch(batch):
  return [np.asarray(x) for x in batch]


def test_update_settings_carry_train_uvf_arguments_by_name(trainer_b):
  """The three same-typed numbers reach their own fields (a swapped pair would show here)."""
  settings = trainer_b.settings
  assert (settings.reward_scale_factor, settings.gamma, settings.meta_gamma) == (SCALE, GAMMA, META_GAMMA)
  assert (settings.batch_size, settings.num_collect_per_meta_update, settings.target_update_period) == (16, 10, 2)
  assert settings.goal_sample_strategy == 'sample' and settings.seed == 0


@pytest.mark.parametrize('trainer, gamma', [('trainer_a', 0.99), ('trainer_b', GAMMA)])
def test_low_level_reward_recomputed_at_train_time(trainer, gamma, request):
  """What the low-level update trains on, from a batch of the real buffer: r = -sqrt(||s[:15] + g - s'[:15]||^2 +
  1e-10) recomputed (the stored reward and reward_scale_factor play no part), discounts gamma."""
  t = request.getfixturevalue(trainer)
  batch = t.replay_buffer.get_random_batch(16)
  states, actions, rewards, discounts, next_states, noise = (x.numpy() for x in t.low_level_inputs(batch))
  s, a, _, _, s2, g, g2 = _numpy_batch(batch)
  expected = -np.sqrt(np.sum((s[:, :15] + g - s2[:, :15]).astype(np.float64)**2, 1) + 1e-10)
  np.testing.assert_allclose(rewards, expected, rtol=1e-5)
  np.testing.assert_allclose(discounts, gamma, rtol=1e-6)
  np.testing.assert_array_equal(states, np.concatenate([s, g], 1))
  np.testing.assert_array_equal(next_states, np.concatenate([s2, g2], 1))
  np.testing.assert_array_equal(actions, a)
  assert noise.shape == (16, 8) and np.all(np.abs(noise) <= 0.5) and np.any(noise != 0)


def _numpy_best_goals(actor_weights, states, next_states, goals, low_states, low_actions, noise):
  """HIRO's 'sample' relabelling by definition (Nachum et al. 2018, Section 3.3), in float64: the 10 candidates (8 of
  N(loc, (0.5 half_range)^2) from the standard normals `noise` [8, B, G], loc = s'[:15] - s[:15], the stored goal),
  clipped to the goal range, scored by -sum_i ||a_i - mu(s_i, g + s_0[:15] - s_i[:15])||^2 / 30^2 with the low actor,
  the argmax. Returns (candidates [10, B, G], scores [10, B])."""
  loc = (next_states[:, :15] - states[:, :15]).astype(np.float64)
  samples = loc[None] + 0.5 * HIRO_ORIG_GOAL_MAX * noise
  candidates = np.clip(np.concatenate([samples, loc[None], goals[None]], 0), -HIRO_ORIG_GOAL_MAX, HIRO_ORIG_GOAL_MAX)
  batch, steps = low_states.shape[:2]
  scores = np.zeros(candidates.shape[:2])
  for k, candidate in enumerate(candidates):
    step_goals = candidate[:, None] + low_states[:, :1, :15] - low_states[:, :, :15]  # [B, c, G]
    merged = np.concatenate([low_states, step_goals], -1).reshape(batch * steps, -1)
    mu = np_actor(actor_weights, merged, -ANT_ACTION_BOUND, ANT_ACTION_BOUND, 2, True).reshape(batch, steps, -1)
    scores[k] = -np.sum((low_actions - mu)**2, (1, 2)) / ANT_ACTION_BOUND**2
  return candidates, scores


def test_meta_update_trains_on_relabelled_goals_scaled_rewards_and_meta_discounts(trainer_b):
  """What the meta update trains on, from a batch of the real meta buffer, against NumPy: the goals relabelled by the
  off-policy correction (the 10 candidates scored over the c stored steps), the stored reward sums x
  reward_scale_factor (2.5), discounts meta_gamma (0.9, not gamma 0.95) x the context discounts (1 away from the
  target), the merged states s ⊕ T and s' ⊕ T'."""
  t = trainer_b
  batch = t.meta_replay_buffer.get_random_batch(16)
  s, g, r, _, s2, low_states, low_actions, ctx, ctx2 = _numpy_batch(batch)
  rng = t.relabeler.rng
  noise = tf.random.Generator.from_state(rng.state.numpy(), rng.algorithm).normal([8, 16, 15]).numpy()
  states, goals, rewards, discounts, next_states, target_noise = (x.numpy() for x in t.meta_level_inputs(batch))
  candidates, scores = _numpy_best_goals(np_weights(t.uvf_agent.networks['actor_net']), s, s2, g, low_states,
                                         low_actions, noise)
  best = np.argmax(scores, 0)
  for b in range(16):
    # The chosen goal is a candidate of (numerically) maximal score: the first maximum unless float32 rounding
    # separates near-ties (scores within 1e-6 of the maximum).
    chosen = [k for k in range(10) if np.allclose(goals[b], candidates[k, b], atol=1e-5)]
    assert chosen, (b, goals[b])
    assert scores[chosen[0], b] >= scores[best[b], b] - 1e-6 * max(1.0, abs(scores[best[b], b])), b
  assert np.mean(np.any(np.abs(goals - g) > 1e-3, 1)) > 0.5  # relabelling changed most goals
  assert np.all(r != 0)
  np.testing.assert_allclose(rewards, SCALE * r, rtol=1e-6)
  target_distances = np.linalg.norm(s2[:, :2] - ctx, axis=1)
  assert np.all(target_distances > 1e-4)
  np.testing.assert_allclose(discounts, META_GAMMA, rtol=1e-6)
  np.testing.assert_array_equal(states, np.concatenate([s, ctx], 1))
  np.testing.assert_array_equal(next_states, np.concatenate([s2, ctx2], 1))
  assert target_noise.shape == (16, 15) and np.all(np.abs(target_noise) <= 0.5)


@pytest.mark.slow
def test_restart_resumes_exactly(run_a, tmp_path):
  train_dir, _, state_a = run_a
  # Restoring gives back the counters, the replay contents and the weights.
  original_run = run_loop.TrainingLoop.run
  run_loop.TrainingLoop.run = lambda self: self.restore_or_initialize()
  try:
    restored = hiro_fixtures.run_training(train_dir, hiro_fixtures.small_bindings(episodes=2))
  finally:
    run_loop.TrainingLoop.run = original_run
  state_r = _state(restored)
  assert state_r[0] == state_a[0]
  for x, y in zip(state_r[1] + state_r[2], state_a[1] + state_a[2]):
    np.testing.assert_array_equal(x, y)
  # Continuing to 300 steps gives what an uninterrupted 300-step run gives.
  continued = _state(hiro_fixtures.run_training(train_dir, hiro_fixtures.small_bindings(episodes=4)))
  fresh = _state(hiro_fixtures.run_training(tmp_path, hiro_fixtures.small_bindings(episodes=4)))
  assert continued[0] == fresh[0] == [300, 6, 6, 250, 26, 300, 30]
  for x, y in zip(continued[1] + continued[2], fresh[1] + fresh[2]):
    np.testing.assert_array_equal(x, y)


@pytest.mark.slow
def test_strategies_match_default(tmp_path):
  # The full configuration, exploration and target smoothing noise included: the noise is drawn outside the replica
  # context, so it does not depend on the strategy. One device runs the same graph as no strategy (bit-identical);
  # mirrored (one replica on the CPU) all-reduces the gradients.
  runs = {}
  for name in ('default', 'one_device', 'mirrored'):
    bindings = hiro_fixtures.small_bindings(episodes=1, extra=[f"train_uvf.distribution_strategy = '{name}'"])
    runs[name] = _state(hiro_fixtures.run_training(tmp_path / name, bindings))
  assert runs['default'][0] == runs['one_device'][0] == runs['mirrored'][0]
  for x, y in zip(runs['default'][1] + runs['default'][2], runs['one_device'][1] + runs['one_device'][2]):
    np.testing.assert_array_equal(x, y)
  # The all-reduce rounds differently (1e-7), and the contact dynamics amplify it in the collected states.
  for x, y in zip(runs['default'][2], runs['mirrored'][2]):
    np.testing.assert_allclose(x, y, atol=1e-4)
  for x, y in zip(runs['default'][1], runs['mirrored'][1]):
    np.testing.assert_allclose(x, y, atol=2e-3)


def test_bad_strategy_is_rejected(tmp_path):
  with pytest.raises(ValueError, match='distribution_strategy'):
    bindings = hiro_fixtures.small_bindings(extra=["train_uvf.distribution_strategy = 'tpu'"])
    hiro_fixtures.run_training(tmp_path, bindings)


@pytest.mark.slow
def test_run_train_end_to_end(tmp_path):
  bindings = hiro_fixtures.small_bindings(
      episodes=1) + ['train_uvf.initial_episodes = 0', 'train_uvf.initial_steps = 20']
  command = [sys.executable, 'run_train.py', 'configs/ant_maze.gin', '--train_dir', str(tmp_path / 'run')]
  for binding in bindings:
    command += ['--gin_param', binding]
  result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'global step 100 / 150' in result.stdout
  assert tf.train.latest_checkpoint(str(tmp_path / 'run')).endswith('model.ckpt-150')


@pytest.mark.parametrize('config, obs_dim, action_dim', [('ant_push_repr', 30, 8), ('ant_fall_repr', 30, 8),
                                                         ('ant_block_repr', 33, 8), ('ant_block_maze_repr', 33, 8),
                                                         ('point_maze_repr', 7, 2)])
@pytest.mark.slow
def test_every_hiro_repr_config_trains(config, obs_dim, action_dim, tmp_path):
  """hiro_repr on the other tasks (ant_maze_repr: tests/uvf/test_representation.py): 20-step episodes, 100 steps."""
  original = hiro_fixtures.CONFIG
  hiro_fixtures.CONFIG = hiro_fixtures.CONFIG.parent / f'{config}.gin'
  try:
    loop = hiro_fixtures.run_training(
        tmp_path, hiro_fixtures.small_bindings(episodes=0, episode=20, extra=['train_uvf.batch_size = 8']))
  finally:
    hiro_fixtures.CONFIG = original
  t = loop.trainer
  assert int(t.global_step.numpy()) == 100 and int(t.num_meta_updates.numpy()) == 9
  names = t.state_preprocess.variables_by_tf1_name()
  assert names['state_preprocess/state_process_net/states/states_1/weights'].shape == [obs_dim, 100]
  assert names['state_preprocess/action_embed_net/hidden/hidden_1/weights'].shape == [10 * action_dim + obs_dim, 400]
  beta1_power, _ = hiro_fixtures.adam_beta_powers(t.repr_update.optimizer)
  np.testing.assert_allclose(beta1_power.numpy(), 0.9**81, rtol=1e-5)  # one repr step per low-level update
  assert all(name in t.policy_variables_by_tf1_name() for name in names)


def test_load_path_restores_the_low_level_only(run_a, tmp_path):
  # The original's `load_path`: the low-level actor and critics from a checkpoint with their TF1 names (here run A's
  # policy checkpoint at its end), nothing else; every low-level name must be there.
  train_dir, loop_a, _ = run_a
  policy = os.path.join(train_dir, 'policy', 'model.ckpt-200')  # run A's end (a later test continues that run)
  original_run = run_loop.TrainingLoop.run
  run_loop.TrainingLoop.run = lambda self: None
  try:
    fresh = hiro_fixtures.run_training(tmp_path, hiro_fixtures.small_bindings(episodes=2)).trainer
  finally:
    run_loop.TrainingLoop.run = original_run
  run_loop.restore_low_level(fresh, policy)
  for agent_a, agent_b, restored in ((loop_a.trainer.uvf_agent, fresh.uvf_agent, True), (loop_a.trainer.meta_agent,
                                                                                         fresh.meta_agent, False)):
    names_a, names_b = agent_a.variables_by_tf1_name(), agent_b.variables_by_tf1_name()
    for name in names_a:
      if '/target_' in name:
        continue
      same = np.array_equal(names_a[name].numpy(), names_b[name].numpy())
      assert same == restored, name
  with pytest.raises(ValueError, match='missing'):
    tf.train.Checkpoint(variables={'global_step': fresh.global_step}).write(str(tmp_path / 'counters_only'))
    run_loop.restore_low_level(fresh, str(tmp_path / 'counters_only'))


def test_compatibility_only_arguments_are_bindable_and_unused():
  """Every original train_uvf parameter stays gin-bindable; those in COMPATIBILITY_ONLY are read nowhere in
  train_uvf (only dropped), and those in NOT_PORTED refuse any value but HIRO's."""
  import ast  # pylint: disable=import-outside-toplevel
  import inspect  # pylint: disable=import-outside-toplevel
  parameters = set(inspect.signature(train.train_uvf).parameters)
  assert set(train.COMPATIBILITY_ONLY) <= parameters and set(train.NOT_PORTED) <= parameters
  tree = ast.parse(inspect.getsource(train.train_uvf))
  function = tree.body[0]
  read = {
      node.id for statement in function.body if not isinstance(statement, ast.Delete) for node in ast.walk(statement)
      if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
  }
  assert not read & set(train.COMPATIBILITY_ONLY)
  defaults = {name: p.default for name, p in inspect.signature(train.train_uvf).parameters.items()}
  for name, (works, message) in train.NOT_PORTED.items():
    assert works(defaults[name]) and not works(7), name
    assert 'not ported' in message or 'must be 1' in message
