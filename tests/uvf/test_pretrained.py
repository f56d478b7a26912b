"""uvf.pretrained: the committed trained policies through the public API, on the real MuJoCo environment.

The key test plays the committed AntPush policy with `HiroPolicy.act` on the Gymnasium environment for 10 seeded
episodes of 500 steps and compares each episode with the evaluation code run_eval.py runs (`uvf.eval.evaluate`, in
a subprocess, the config parsed as run_eval parses it) evaluating the same checkpoint one episode per call
(`num_episodes_eval=1`, `seed=i`: a batch of 1, as `act` computes): the same final distances, bit for bit, and the
same successes. The others: `act` against the evaluation rollout run on one environment, the tracing count, the
target as the meta policy's input, the bundles' config.gin against the repository's configs, and the user errors.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import types

import gin
import gymnasium
import numpy as np
import pytest
import tensorflow as tf

from reproduction import export
from reproduction import progress
from uvf import eval_results
from uvf import pretrained
from uvf import rollout
from uvf.environments import create_maze_env

REPO = pretrained.PACKAGE_DIR.parent
SEED = 0  # evaluate.seed's default: episode i starts from the reset seeded by rollout.episode_seed(SEED, i)
EPISODES = 10
STEPS = 500  # %RESET_EPISODE_PERIOD, the evaluation's episode length


@pytest.fixture(scope='module', name='policy')
def _policy():
  return pretrained.load_policy('AntPush')


@pytest.fixture(scope='module', name='env')
def _env():
  return create_maze_env.create_maze_env('AntPush')


def start(env, episode):
  """Resets `env` as the evaluation resets episode `episode` -> the first observation float32 [D]."""
  env.seed(rollout.episode_seed(SEED, episode))
  return env.reset().observation


def play(policy, env, episode, steps=STEPS, target=None):
  """One episode -> (final observation s_T float32 [D], goals float32 [T, G]: g_t, the goal of step t's action)."""
  observation = start(env, episode)
  policy.reset(target)
  goals = []
  for _ in range(steps):
    action = policy.act(observation)
    goals.append(policy.goal)
    observation = env.step(action).observation
  return observation, np.array(goals)


# The reference: uvf.eval.evaluate (what run_eval.py runs after parsing its config with launcher.parse_gin) on the
# bundle's checkpoint, one episode per call, for seeds 0 .. n-1; argv: checkpoint prefix, n, the JSON file to write.
REFERENCE = """
import json, sys, tempfile
import launcher
launcher.prepare_process()
launcher.register_configurables()
launcher.parse_gin([launcher.resolve_config_path('configs/ant_push.gin')], [])
from uvf import eval as eval_lib
checkpoint, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for seed in range(n):
  with tempfile.TemporaryDirectory() as eval_dir:
    (row,) = eval_lib.evaluate(eval_dir, eval_dir, checkpoint_path=checkpoint, num_episodes_eval=1, seed=seed,
                               generate_summaries=False)
  rows.append(row)
with open(path, 'w') as f:
  json.dump(rows, f)
"""


@pytest.mark.slow
def test_antpush_episodes_match_run_eval_one_episode_per_call(policy, tmp_path):
  info = json.loads((pretrained.bundle_dir('AntPush') / pretrained.INFO).read_text())
  assert info['config_files'] == ['configs/ant_push.gin'] and not info['bindings']
  checkpoint = str(pretrained.bundle_dir('AntPush') / f'model.ckpt-{info["step"]}')
  rows_path = tmp_path / 'rows.json'
  # The reference runs beside this test's own episodes (two cores).
  reference = subprocess.Popen(
      [sys.executable, '-c', REFERENCE, checkpoint,
       str(EPISODES), str(rows_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL='2'))
  try:
    start_time = time.time()
    env = gymnasium.make('hiro/AntPush-v0')
    finals, distances, successes, meta_rewards = [], [], [], []
    for i in range(EPISODES):
      observation, _ = env.reset(seed=rollout.episode_seed(i, 0))  # evaluate(seed=i)'s episode 0
      policy.reset()
      rewards = []
      for _ in range(STEPS):
        observation, reward, terminated, truncated, step_info = env.step(policy.act(observation))
        rewards.append(reward)
      assert not terminated and truncated  # Gymnasium's limit: the evaluation's 500 steps
      finals.append(observation)
      distances.append(step_info['distance'])
      successes.append(step_info['success'])
      meta_rewards.append(sum(rewards))
    env.close()
    mine_s = time.time() - start_time
    output, _ = reference.communicate(timeout=600)
  finally:
    if reference.poll() is None:
      reference.kill()
      reference.wait()
  assert reference.returncode == 0, output[-3000:]
  rows = json.loads(rows_path.read_text())
  for row in rows:
    assert (row['mode'], row['goal'], row['episode_steps'], row['step'],
            row['num_episodes']) == ('eval2', [0.0, 19.0], STEPS, info['step'], 1)
  expected = [row['episodes']['final_distances'][0] for row in rows]
  expected_successes = [row['episodes']['successes'][0] for row in rows]
  # The evaluation's final distance (eval_results.final_distances) of this test's final observations: the same
  # float64 computation, so the same bits when the episodes are the same.
  mine = eval_results.final_distances(np.array(finals), np.array(finals), np.tile(policy.target, (EPISODES, 1)),
                                      policy.info['state_indices']).tolist()
  print(f'\nHiroPolicy.act on hiro/AntPush-v0 ({mine_s:.1f} s) vs uvf.eval.evaluate one episode per call:\n'
        '  episode  evaluate distance  act distance (info)  success (evaluate, act)\n' +
        '\n'.join(f'  {i:7d}  {e:17.12f}  {d:19.12f}  {es} {s}'
                  for i, (e, d, es, s) in enumerate(zip(expected, distances, expected_successes, successes))))
  assert mine == expected  # bit for bit
  # The environment's distance is sqrt(||.||^2 + 1e-10) (the task reward's): ~1e-11 from the evaluation's.
  np.testing.assert_allclose(distances, expected, rtol=1e-9, atol=0)
  assert successes == expected_successes
  # The whole sequence of observations: the episode's task rewards, the evaluation's in float32 per step.
  np.testing.assert_allclose(meta_rewards, [row['episodes']['meta_rewards'][0] for row in rows], rtol=1e-6)


def test_act_equals_the_evaluation_rollout_on_one_environment(policy, env):
  """The networks on the observation alone, as the evaluation rollout computes a batch of one episode: the goals of
  every step and the final state are the same bits (the uvf environment, as the evaluation steps it)."""
  meta_agent, uvf_agent, state_preprocess = policy.agents
  steps = 100
  environments = rollout.ParallelEnvironments([create_maze_env.create_maze_env('AntPush')])
  evaluator = rollout.Evaluator(environments, uvf_agent, meta_agent, state_preprocess)
  out = evaluator.run(policy.target[None], steps, [rollout.episode_seed(SEED, 3)])
  environments.close()
  final, goals = play(policy, env, 3, steps)
  np.testing.assert_array_equal(goals, out['goals'][0])
  np.testing.assert_array_equal(final, out['final_states'][0])


def test_act_traces_once_and_follows_the_goal_schedule(policy, env):
  for episode in range(2):
    observation = start(env, episode)
    policy.reset()
    assert policy.step_count == 0 and not policy.goal.any()
    previous = previous_goal = None  # s_{t-1} and g_{t-1}, from step 1 on
    for t in range(25):
      action = policy.act(observation)
      assert action.dtype == np.float32 and action.shape == (8,)
      assert np.all(action >= policy.action_low) and np.all(action <= policy.action_high)
      if t == 0:
        assert not policy.goal.any()  # g_0 = 0
      elif t % 10 == 1:  # a meta action: chosen after steps 0, 10, 20 (on s_1, s_11, s_21)
        meta_goal = policy.agents[0].actions(observation[None], [policy.target[None]]).numpy()[0]
        np.testing.assert_allclose(policy.goal, meta_goal, atol=1e-4)
      else:  # the goal transition g + s_repr[:15] - s'_repr[:15]
        np.testing.assert_allclose(policy.goal, previous_goal + previous[:15] - observation[:15], atol=1e-5)
      previous, previous_goal = observation, policy.goal
      observation = env.step(action).observation
    assert policy.step_count == 25
  assert policy.act_function.experimental_get_tracing_count() == 1


def test_reset_target_is_the_meta_policy_input(policy, env):
  observation = start(env, 0)
  goals = {}
  for target in ((0.0, 19.0), (16.0, 0.0)):
    policy.reset(target)
    np.testing.assert_array_equal(policy.target, np.float32(target))
    next_observation = env.step(policy.act(observation)).observation  # the same action: the goal is still 0
    policy.act(next_observation)  # the meta action on (s_1, target)
    expected = policy.agents[0].actions(next_observation[None], [np.float32([target])]).numpy()[0]
    np.testing.assert_allclose(policy.goal, expected, atol=1e-4)
    goals[target] = policy.goal
    observation = start(env, 0)
  assert np.abs(goals[(0.0, 19.0)] - goals[(16.0, 0.0)]).max() > 0.1
  policy.reset()
  np.testing.assert_array_equal(policy.target, [0.0, 19.0])  # the bundle's default, best_policy.json's goal
  assert policy.info['target'] == [0.0, 19.0] and policy.info['task'] == 'AntPush'
  assert policy.info['step'] == 3_000_000 and policy.info['config_files'] == ['configs/ant_push.gin']
  with pytest.raises(ValueError, match=r'shape \[2\]'):
    policy.reset((0.0, 19.0, 1.0))


def test_the_other_tasks_load_and_act_beside_antpush(policy, env):
  """AntMaze and AntFall (a 3-d target) load and act; the AntPush policy loaded before still acts as before."""
  before, _ = play(policy, env, 0, steps=30)
  for task, target, indices in (('AntMaze', [0.0, 16.0], [0, 1]), ('AntFall', [0.0, 27.0, 4.5], [0, 1, 2])):
    other = pretrained.load_policy(task)
    assert (other.info['task'], other.info['target'], other.info['state_indices']) == (task, target, indices)
    np.testing.assert_array_equal(other.target, np.float32(target))
    task_env = create_maze_env.create_maze_env(task)
    task_env.seed(rollout.episode_seed(SEED, 0))
    observation = task_env.reset().observation
    for _ in range(30):
      observation = task_env.step(other.act(observation)).observation
    assert other.goal.shape == (15,) and other.goal.any()
    assert other.act_function.experimental_get_tracing_count() == 1
  after, _ = play(policy, env, 0, steps=30)
  np.testing.assert_array_equal(after, before)
  assert policy.act_function.experimental_get_tracing_count() == 1


def test_committed_bundles_config_gin_is_the_flattened_configuration():
  """Each committed bundle's config.gin is what scripts/export_policy_config.py writes now from its config files
  (`export.policy_config` also checks that the text parsed alone gives the same gin.config_str())."""
  for task in pretrained.TASKS:
    directory = pretrained.bundle_dir(task)
    info = json.loads((directory / pretrained.INFO).read_text())
    assert info['task'] == task
    text = (directory / pretrained.CONFIG).read_text()
    assert text == export.policy_config(info['config_files'], info['bindings']), (
        f'{directory / pretrained.CONFIG} is stale: python scripts/export_policy_config.py {directory}')
    assert not re.search(r'^\s*include\s', text, re.MULTILINE)
    assert f'#   config files: {info["config_files"][0]}\n' in text


@pytest.mark.slow
def test_loads_without_launcher_and_configs_to_the_same_configuration(tmp_path):
  """As an installed package does: a fresh interpreter that imports `uvf.pretrained` alone (no launcher, no
  configs/ tree on gin's search path, another working directory) loads the AntFall bundle, and its gin
  configuration is the one the launcher parses from configs/ant_fall.gin."""
  code = ('import sys, gin; from uvf import pretrained; p = pretrained.load_policy("AntFall"); '
          'print(sorted(m for m in ("launcher", "scalable_agent", "reproduction") if m in sys.modules)); '
          'print(gin.config_str(), end="")')
  out = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL='3'))
  assert out.returncode == 0, out.stderr[-3000:]
  imported, config = out.stdout.split('\n', 1)
  assert imported == '[]'
  export.policy_config(['configs/ant_fall.gin'], [])
  assert config == gin.config_str()


def test_kit_export_writes_config_gin(tmp_path):
  """The reproduction kit's --export_best writes config.gin into the bundle it exports (here from a stand-in plan
  whose best policy is the committed AntPush checkpoint), and the bundle loads."""
  bundle = pretrained.bundle_dir('AntPush')
  info = json.loads((bundle / pretrained.INFO).read_text())
  policy_dir = tmp_path / 'train' / progress.POLICY_DIR
  policy_dir.mkdir(parents=True)
  for path in bundle.glob('model.ckpt-*'):
    shutil.copy(path, policy_dir)
  prefix = str(policy_dir / f'model.ckpt-{info["step"]}')
  row = {
      'mode': 'eval2',
      'goal': [0.0, 19.0],
      'step': info['step'],
      'success_rate': 0.9,
      'mean_final_distance': 3.7,
      'num_episodes': 50,
      'checkpoint': prefix
  }
  heldout_row = {
      'mode': 'eval2',
      'goal': [0.0, 19.0],
      'step': info['step'],
      'success_rate': 0.86,
      'mean_final_distance': 4.2,
      'num_episodes': 100
  }
  plan = types.SimpleNamespace(
      protocol=types.SimpleNamespace(task='AntPush', primary_mode='eval2', goals={'eval2': [0.0, 19.0]}, paper=None),
      seed_rows=lambda: {0: [row]}, heldout_rows=lambda: {0: [heldout_row]}, budget=info['step'], root=str(tmp_path),
      name='ant_push', specs={0: types.SimpleNamespace(train_dir=str(tmp_path / 'train'))}, manifest={
          'config_files': [str(REPO / 'configs' / 'ant_push.gin')],
          'bindings': [],
          'eval_episodes': 50
      })
  out = tmp_path / 'best_policy'
  export.export_best(plan, str(out))
  assert (out / pretrained.CONFIG).read_text() == (bundle / pretrained.CONFIG).read_text()
  loaded = pretrained.load_policy(out)
  assert loaded.info['step'] == info['step'] and loaded.info['task'] == 'AntPush'
  written = json.loads((out / pretrained.INFO).read_text())
  assert written['heldout'] == {
      'success_rate': 0.86,
      'mean_final_distance': 4.2,
      'num_episodes': 100,
      'eval_seed': 1000
  }
  # A seed whose held-out evaluation has not run yet: None, not a number from elsewhere.
  plan.heldout_rows = lambda: {0: [dict(heldout_row, step=info['step'] - 50000)]}
  export.export_best(plan, str(out))
  assert json.loads((out / pretrained.INFO).read_text())['heldout'] is None


def _committed_bundles(task):
  """The policy bundles committed for `task`: every directory under docs/reproduction/<task>/ holding a
  best_policy.json."""
  snake = pretrained.bundle_dir(task).parent.name
  return sorted(path.parent for path in (REPO / 'docs' / 'reproduction' / snake).rglob(pretrained.INFO))


def test_each_task_ships_the_best_of_its_committed_bundles_whole():
  """The shipped bundle (docs/reproduction/<task>/best_policy, installed as uvf/trained/<task>/best_policy) of each
  task is the best of the task's committed bundles by the recorded selection success, ties broken by the held-out
  success; every committed bundle is complete (checkpoint, its state file, config.gin, best_policy.json with the
  held-out evaluation) and loads."""
  import tomllib  # pylint: disable=g-import-not-at-top
  package_data = tomllib.loads((REPO / 'pyproject.toml').read_text())['tool']['setuptools']['package-data']
  for task in pretrained.TASKS:
    bundles = _committed_bundles(task)
    infos = {}
    for bundle in bundles:
      info = json.loads((bundle / pretrained.INFO).read_text())
      assert info['task'] == task, bundle
      assert {
          'checkpoint', pretrained.CONFIG, f'model.ckpt-{info["step"]}.index',
          f'model.ckpt-{info["step"]}.data-00000-of-00001'
      } <= {p.name for p in bundle.iterdir()}, bundle
      assert info['heldout']['num_episodes'] == 100 and info['heldout']['eval_seed'] == 1000, bundle
      infos[bundle] = info
    best = max(bundles, key=lambda b: (infos[b]['success_rate'], infos[b]['heldout']['success_rate']))
    shipped = pretrained.bundle_dir(task)
    assert best == shipped, f'{task}: the best committed bundle is {best}, the shipped one {shipped}'
    assert f'{shipped.parent.name}/best_policy/*' in package_data['uvf.trained']
  assert [b.relative_to(REPO).as_posix() for b in _committed_bundles('AntFall')
         ] == ['docs/reproduction/ant_fall/best_policy', 'docs/reproduction/ant_fall/seed_0/best_policy']
  seed_0 = pretrained.load_policy(REPO / 'docs' / 'reproduction' / 'ant_fall' / 'seed_0' / 'best_policy')
  assert (seed_0.info['step'], seed_0.info['seed'], seed_0.info['heldout']['success_rate']) == (1_550_000, 0, 0.03)


def test_the_numbers_quoted_for_the_shipped_policies_are_theirs():
  """README's held-out sentence and the results page's data-files list quote the shipped bundles' own numbers."""
  readme = (REPO / 'README.md').read_text()
  results = (REPO / 'docs' / 'results.md').read_text()
  quoted = re.search(r'the best policies score AntMaze (\d+\.\d+), AntPush (\d+\.\d+), AntFall (\d+\.\d+)',
                     ' '.join(readme.split()))
  assert quoted, 'README no longer quotes the shipped policies\' held-out success'
  flat_results = ' '.join(results.split())
  for task, value in zip(pretrained.TASKS, quoted.groups()):
    info = json.loads((pretrained.bundle_dir(task) / pretrained.INFO).read_text())
    assert float(value) == info['heldout']['success_rate'], task
    seed, step = info['seed'], info['step']
    expected = (f'{task} seed {seed} at {step / 1e6:g}M: {info["success_rate"]:.2f} / '
                f'{"held out " if task == "AntMaze" else ""}{info["heldout"]["success_rate"]:.2f}')
    assert expected in flat_results, expected
  assert f'(held-out success {json.loads((pretrained.bundle_dir("AntPush") / pretrained.INFO).read_text())["heldout"]["success_rate"]:.2f})' in readme


def test_user_errors(tmp_path, monkeypatch):
  for call in (pretrained.bundle_dir, pretrained.load_policy):
    with pytest.raises(ValueError, match="unknown task 'AntWalk'.*AntMaze, AntPush, AntFall"):
      call('AntWalk')
  # A bundle without config.gin: the message names it and the command that writes it.
  bundle = tmp_path / 'bundle'
  bundle.mkdir()
  shutil.copy(pretrained.bundle_dir('AntPush') / pretrained.INFO, bundle)
  with pytest.raises(FileNotFoundError, match=r'has no config\.gin.*scripts/export_policy_config\.py'):
    pretrained.load_policy(bundle)
  with pytest.raises(FileNotFoundError, match='is not a directory'):
    pretrained.load_policy(tmp_path / 'missing')
  # The installed copy comes first; neither: FileNotFoundError.
  monkeypatch.setattr(pretrained, 'PACKAGE_DIR', tmp_path / 'site-packages' / 'uvf')
  with pytest.raises(FileNotFoundError, match='no trained AntPush policy'):
    pretrained.bundle_dir('AntPush')
  installed = tmp_path / 'site-packages' / 'uvf' / 'trained' / 'ant_push' / 'best_policy'
  installed.mkdir(parents=True)
  assert pretrained.bundle_dir('AntPush') == installed


def test_act_rejects_a_wrong_observation(policy):
  with pytest.raises((ValueError, TypeError)):
    policy.act(np.zeros([29], np.float32))
  assert tf.is_tensor(policy.act_function(tf.zeros([policy.observation_dim])))


@pytest.mark.slow
def test_a_library_user_sees_nothing_but_their_own_lines(tmp_path):
  """A fresh interpreter outside the checkout, as a library user: `import uvf`, `from uvf import pretrained`,
  `load_policy` and `act` print nothing of TensorFlow's native start-up lines or gym's banner; the
  TF_CPP_MIN_LOG_LEVEL this import sets while TensorFlow loads is gone after; one the user set is kept."""
  code = ('import os, numpy as np, uvf; from uvf import pretrained; p = pretrained.load_policy("AntMaze"); p.reset(); '
          'p.act(np.zeros(30, np.float32)); print("level", os.environ.get("TF_CPP_MIN_LOG_LEVEL"))')
  environment = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  environment['PYTHONPATH'] = str(REPO)
  out = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=environment)
  assert out.returncode == 0, out.stderr[-3000:]
  assert (out.stdout, out.stderr) == ('level None\n', '')
  kept = subprocess.run(
      [sys.executable, '-c', 'import os; from uvf import pretrained; '
       'print(os.environ["TF_CPP_MIN_LOG_LEVEL"])'], cwd=tmp_path, capture_output=True, text=True, timeout=300,
      env=dict(environment, TF_CPP_MIN_LOG_LEVEL='1'))
  assert kept.returncode == 0 and kept.stdout == '1\n' and 'Gym has been unmaintained' not in kept.stderr
