"""uvf.eval: HIRO evaluation on the real AntMaze configuration with tiny settings (3 episodes of 10 steps per mode):
the statistics, a full evaluation of a policy checkpoint against an independent sequential rollout, its outputs
(results.json / results.csv, TensorBoard tags), determinism, restarts, the checkpoint poller, videos, user errors and
run_eval.py."""

import csv
import json
import os
import shutil
import subprocess
import threading
import time

from absl import flags
import numpy as np
from PIL import Image
import pytest
import tensorflow as tf

import launcher
from uvf import agent as agent_lib
from uvf import build as build_lib
from uvf import checkpoints
from uvf import eval as eval_lib
from uvf import eval_results
from uvf import protocol
from uvf import representation
from uvf import rollout
from uvf import videos
import uvf.configurables  # noqa: F401  pylint: disable=unused-import
from uvf.environments import create_maze_env
from uvf.environments import rendering

CONFIG = launcher.CONFIG_DIR / 'ant_maze.gin'
STEPS = 10  # episode length
EPISODES = 3  # episodes per mode
STEP = 1000  # global step of the policy checkpoint
MODES = ('eval1', 'eval2', 'eval3')
GOALS = {'eval1': [16.0, 0.0], 'eval2': [16.0, 16.0], 'eval3': [0.0, 16.0]}
TAGS = ('Reward/average_{}_hrl_reward', 'Reward/last_{}_hrl_reward', 'Reward/average_{}_hrl_meta_reward',
        'Reward/last_{}_hrl_meta_reward', 'Reward/average_{}_hrl_success')


def small_bindings(*extra):
  return [
      f'evaluate.max_steps_per_episode = {STEPS}', f'evaluate.num_episodes_eval = {EPISODES}',
      'evaluate.num_threads = 2'
  ] + list(extra)


def parse(*extra):
  launcher.parse_gin([CONFIG], small_bindings(*extra))


def build():
  """(meta_agent, uvf_agent, state_preprocess, {TF1 name: variable}) as training builds them."""
  meta, low, preprocess, _ = build_lib.build_agents(create_maze_env.create_maze_env(), agent_lib.UvfAgent,
                                                    agent_lib.MetaAgent, representation.StatePreprocess,
                                                    representation.InverseDynamics)
  counters = [
      tf.Variable(value, dtype=tf.int64, name=name)
      for name, value in (('global_step', STEP), ('num_episodes', 2), ('num_resets', 2))
  ]
  return meta, low, preprocess, build_lib.policy_variables_by_tf1_name(low, meta, preprocess, *counters)


def save_policy(variables, policy_dir, step):
  """Writes a policy checkpoint the way TrainingLoop.save_policy does."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(variables=variables), str(policy_dir), max_to_keep=None,
                                       checkpoint_name='model.ckpt')
  return manager.save(checkpoint_number=step)


@pytest.fixture(scope='module', name='policy')
def _policy(tmp_path_factory):
  """A training directory holding the policy checkpoint policy/model.ckpt-1000 of freshly initialised agents."""
  parse()
  train_dir = tmp_path_factory.mktemp('train')
  meta, low, preprocess, variables = build()
  path = save_policy(variables, train_dir / 'policy', STEP)
  return train_dir, path, (meta, low, preprocess)


def read_rows(eval_dir):
  with open(os.path.join(eval_dir, 'results.json'), encoding='utf-8') as f:
    rows = json.load(f)
  with open(os.path.join(eval_dir, 'results.csv'), encoding='utf-8') as f:
    csv_rows = list(csv.DictReader(f))
  return rows, csv_rows


def summary_values(eval_dir):
  values = {}
  for path in tf.io.gfile.glob(os.path.join(str(eval_dir), 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        values.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
  return values


NUMBERS = ('success_rate', 'mean_reward', 'last_reward', 'mean_meta_reward', 'last_meta_reward', 'mean_final_distance')

# -- Statistics ----------------------------------------------------------------------------------------------------


def test_episode_statistics_on_hand_made_episodes():
  rewards = np.array([[-1.0, -2.0, -3.0], [0.0, -1.0, -0.5]])
  meta_rewards = np.array([[-10.0, -8.0, -4.0], [-10.0, -9.0, -7.0]])
  distances = np.array([4.0, 7.0])
  stats = eval_results.episode_statistics(rewards, meta_rewards, distances)
  assert stats['episode_rewards'] == [-6.0, -1.5]
  assert stats['episode_meta_rewards'] == [-22.0, -26.0]
  assert stats['mean_reward'] == pytest.approx(-3.75)
  assert stats['last_reward'] == pytest.approx(-1.75)
  assert stats['mean_meta_reward'] == pytest.approx(-24.0)
  assert stats['last_meta_reward'] == pytest.approx(-5.5)
  assert stats['episode_successes'] == [True, False] and stats['success_rate'] == 0.5
  assert stats['mean_final_distance'] == pytest.approx(5.5)
  # gamma and the environment's discounts weigh step t by gamma^t * discount_t, as the original's compute_reward.
  discounts = np.array([[1.0, 1.0, 0.0], [1.0, 0.5, 1.0]])
  stats = eval_results.episode_statistics(rewards, meta_rewards, distances, discounts, gamma=0.5)
  assert stats['episode_rewards'] == pytest.approx([-1.0 - 0.5 * 2.0, 0.0 - 0.25 * 1.0 - 0.25 * 0.5])
  assert stats['episode_meta_rewards'] == pytest.approx([-10.0 - 4.0, -10.0 - 0.25 * 9.0 - 0.25 * 7.0])
  # Success is strictly below 5 (the original: last_meta_reward > -5).
  assert eval_results.episode_statistics([[0.0]], [[0.0]], [5.0])['success_rate'] == 0.0
  with pytest.raises(ValueError, match='episodes, steps'):
    eval_results.episode_statistics([1.0, 2.0], [1.0, 2.0], [1.0])


def test_final_distances_on_the_task_dims():
  final = np.array([[3.0, 4.0, 9.0], [0.0, 16.0, 1.0]])
  previous = np.array([[1.0, 1.0, 0.0], [0.0, 10.0, 0.0]])
  targets = np.array([[0.0, 0.0], [0.0, 16.0]])
  assert eval_results.final_distances(final, previous, targets, [0, 1]).tolist() == [5.0, 0.0]
  # A relative target is a point relative to s_{T-1}.
  assert eval_results.final_distances(final, previous, targets, [0, 1], relative=True).tolist() == [
      pytest.approx(np.hypot(2.0, 3.0)), pytest.approx(10.0)
  ]


# -- A full evaluation ---------------------------------------------------------------------------------------------


def reference_episode(meta, low, target, seed):
  """One episode by an independent sequential implementation of the original's eval step (hiro_orig AntMaze: the
  goal is 15-d, relative on s[:15]; the meta reward -||s'[:2] - T||): (reward sum, meta reward sum, final distance)."""
  env = create_maze_env.create_maze_env()
  env.seed(seed)
  state = env.reset().observation.astype(np.float64)
  goal = np.zeros(15, np.float32)
  spec = env.action_spec()
  total = total_meta = 0.0
  for t in range(STEPS):
    action = np.clip(
        low.action(tf.constant(state, tf.float32), [tf.constant(goal)]).numpy(), spec.minimum, spec.maximum)
    next_state = env.step(action).observation.astype(np.float64)
    total += -np.sqrt(np.sum((state[:15] + goal - next_state[:15])**2) + 1e-10)
    total_meta += -np.sqrt(np.sum((next_state[:2] - target)**2) + 1e-10)
    if t % 10 == 0:
      goal = meta.action(tf.constant(next_state, tf.float32), [tf.constant(target, tf.float32)]).numpy()
    else:
      goal = (goal + state[:15] - next_state[:15]).astype(np.float32)
    state = next_state
  return total, total_meta, float(np.hypot(*(state[:2] - target)))


def test_evaluate_outputs_match_a_sequential_rollout_and_are_deterministic(policy, tmp_path):
  train_dir, path, (meta, low, _) = policy
  parse()
  eval_dir = tmp_path / 'eval'
  # Poll mode: evaluates the checkpoint there, then stops at the timeout.
  rows = eval_lib.evaluate(str(train_dir), str(eval_dir), eval_interval_secs=0.05, checkpoint_timeout=0.2)
  assert [(row['mode'], row['step'], row['goal']) for row in rows] == [(m, STEP, GOALS[m]) for m in MODES]
  json_rows, csv_rows = read_rows(eval_dir)
  assert len(json_rows) == len(csv_rows) == 3
  for row, json_row, csv_row in zip(rows, json_rows, csv_rows):
    assert set(protocol.CSV_FIELDS) <= set(json_row) and tuple(csv_row) == protocol.CSV_FIELDS
    assert json_row['checkpoint'] == path and json_row['num_episodes'] == EPISODES
    assert json_row['episode_steps'] == STEPS
    for key in NUMBERS:
      assert float(csv_row[key]) == pytest.approx(json_row[key]) and json_row[key] == row[key]
    episodes = json_row['episodes']
    assert len(episodes['final_distances']) == EPISODES
    assert json_row['success_rate'] == np.mean(np.array(episodes['final_distances']) < 5.0)
    assert json_row['mean_final_distance'] == pytest.approx(np.mean(episodes['final_distances']))
  # The batched evaluation agrees with an independent sequential rollout of the same start states.
  for mode in ('eval1', 'eval3'):
    row = next(row for row in json_rows if row['mode'] == mode)
    for i in range(EPISODES):
      reward, meta_reward, distance = reference_episode(meta, low, np.array(GOALS[mode]), rollout.episode_seed(0, i))
      assert row['episodes']['rewards'][i] == pytest.approx(reward, rel=1e-3)
      assert row['episodes']['meta_rewards'][i] == pytest.approx(meta_reward, rel=1e-4)
      assert row['episodes']['final_distances'][i] == pytest.approx(distance, rel=1e-4)
  # TensorBoard: the original tags at the checkpoint's global step, with the table's values.
  values = summary_values(eval_dir)
  for row in rows:
    for pattern, key in zip(TAGS,
                            ('mean_reward', 'last_reward', 'mean_meta_reward', 'last_meta_reward', 'success_rate')):
      assert values[pattern.format(row['mode'])] == [(STEP, pytest.approx(row[key], rel=1e-6))]

  # A restart finds the checkpoint in results.json and evaluates nothing; the table keeps its rows.
  assert eval_lib.evaluate(str(train_dir), str(eval_dir), eval_interval_secs=0.05, checkpoint_timeout=0.2) == []
  assert read_rows(eval_dir)[0] == json_rows

  # An explicit checkpoint_path is evaluated again; its rows are appended and (deterministic) identical.
  again = eval_lib.evaluate(str(train_dir), str(eval_dir), checkpoint_path='model.ckpt-1000', generate_summaries=False)
  json_rows2, csv_rows2 = read_rows(eval_dir)
  assert json_rows2[:3] == json_rows and len(json_rows2) == len(csv_rows2) == 6
  for first, second in zip(rows, again):
    assert [first[key] for key in NUMBERS] == [second[key] for key in NUMBERS]
    assert first['episodes'] == second['episodes']


def test_rollout_is_traced_once_and_meta_goals_every_c_steps(policy):
  """The batched rollout: one trace for every mode; 10 + 1 steps cross two meta periods."""
  _, _, (meta, low, preprocess) = policy
  envs = rollout.ParallelEnvironments([create_maze_env.create_maze_env() for _ in range(2)], num_threads=2)
  evaluator = rollout.Evaluator(envs, low, meta, preprocess)
  seeds = [rollout.episode_seed(0, i) for i in range(2)]
  first = evaluator.run(evaluator.targets('eval3', 2).numpy(), 11, seeds)
  second = evaluator.run(evaluator.targets('eval1', 2).numpy(), 11, seeds)
  assert evaluator.rollout_function.experimental_get_tracing_count() == 1
  assert first['rewards'].shape == (2, 11) and first['final_states'].shape == (2, 30)
  assert np.all(first['discounts'] == 1.0)
  # Same seeds: the same start states and first actions (g = 0) in both modes, hence the same first low reward.
  assert first['rewards'][:, 0].tolist() == second['rewards'][:, 0].tolist()
  assert np.allclose(-first['meta_rewards'][:, -1],
                     np.hypot(first['final_states'][:, 0], first['final_states'][:, 1] - 16.0), rtol=1e-5)
  envs.close()


# -- Checkpoint selection ------------------------------------------------------------------------------------------


def test_poller_picks_up_new_checkpoints_and_skips_half_written_ones(tmp_path):
  policy_dir = tmp_path / 'policy'
  scratch = tmp_path / 'scratch'
  variables = {'global_step': tf.Variable(0, dtype=tf.int64), 'w': tf.Variable(tf.zeros([2, 3]))}

  def write(step, directory):
    variables['global_step'].assign(step)
    variables['w'].assign(tf.fill([2, 3], float(step)))
    return save_policy(variables, directory, step)

  os.makedirs(policy_dir)
  # model.ckpt-200: the index without its data file (being written).
  half = write(200, scratch)
  shutil.copy(half + '.index', policy_dir)
  # model.ckpt-250: complete files, but the data file is cut short (fails to load).
  broken = write(250, scratch)
  shutil.copy(broken + '.index', policy_dir)
  with open(broken + '.data-00000-of-00001', 'rb') as f:
    data = f.read()
  with open(os.path.join(policy_dir, 'model.ckpt-250.data-00000-of-00001'), 'wb') as f:
    f.write(data[:4])

  target = {'global_step': tf.Variable(0, dtype=tf.int64), 'w': tf.Variable(tf.zeros([2, 3]))}
  evaluated = []

  def evaluate_checkpoint(path):
    checkpoints.restore_policy(path, target)
    evaluated.append((os.path.basename(path), int(target['global_step'].numpy()), float(target['w'][0, 0])))
    return False

  result = {}
  thread = threading.Thread(target=lambda: result.update(count=eval_lib.evaluate_checkpoint_repeatedly(
      str(policy_dir), evaluate_checkpoint, eval_interval_secs=0.05, max_number_of_evaluations=2, checkpoint_timeout=30,
      already_evaluated=[100])))
  save_policy(variables, scratch, 100)
  shutil.copy(os.path.join(scratch, 'model.ckpt-100.index'), policy_dir)  # recorded as evaluated: never loaded
  thread.start()
  time.sleep(0.5)
  assert not evaluated
  write(300, policy_dir)  # written after the poller started
  deadline = time.time() + 20
  while not evaluated and time.time() < deadline:
    time.sleep(0.05)
  assert evaluated == [('model.ckpt-300', 300, 300.0)]
  # The half-written one completes: it is evaluated at the next poll; the broken one never was.
  shutil.copy(half + '.data-00000-of-00001', policy_dir)
  thread.join(20)
  assert not thread.is_alive() and result['count'] == 2
  assert evaluated == [('model.ckpt-300', 300, 300.0), ('model.ckpt-200', 200, 200.0)]


def test_poller_timeout_and_timeout_fn(tmp_path):
  calls = []

  def timeout_fn():  # keep waiting after the first timeout, stop at the second
    calls.append(time.time())
    return len(calls) >= 2

  start = time.time()
  count = eval_lib.evaluate_checkpoint_repeatedly(str(tmp_path), None, eval_interval_secs=0.02, checkpoint_timeout=0.1,
                                                  timeout_fn=timeout_fn)
  assert count == 0 and len(calls) == 2 and calls[1] - calls[0] >= 0.1 and time.time() - start < 5
  with pytest.raises(ValueError, match='max_number_of_evaluations'):
    eval_lib.evaluate_checkpoint_repeatedly(str(tmp_path), calls.append, max_number_of_evaluations=0)


# -- Videos --------------------------------------------------------------------------------------------------------


def test_video_gif_frames(policy, tmp_path, monkeypatch):
  train_dir, _, _ = policy
  parse("evaluate.eval_modes = ['eval3']", 'evaluate.generate_videos = True', 'evaluate.num_episodes_videos = 2',
        "evaluate.video_settings = {'width': 96, 'height': 72, 'fps': 10}")
  monkeypatch.setattr(shutil, 'which', lambda name: None)  # no ffmpeg: the GIF path
  eval_dir = tmp_path / 'eval'
  eval_lib.evaluate(str(train_dir), str(eval_dir), checkpoint_path='model.ckpt-1000')
  assert os.listdir(eval_dir / 'videos') == [f'eval3_hrl_step_{STEP}.gif']
  with Image.open(eval_dir / 'videos' / f'eval3_hrl_step_{STEP}.gif') as gif:
    assert gif.n_frames == 2 * (STEPS + 1) and gif.size == (96, 72)
    gif.seek(1)
    frame = np.asarray(gif.convert('RGB'))
  # The target marker (red) is in the picture.
  red = (frame[..., 0] > 150) & (frame[..., 1] < 80) & (frame[..., 2] < 80)
  assert red.sum() > 0


@pytest.mark.skipif(
    shutil.which('ffmpeg') is None or shutil.which('ffprobe') is None,
    reason='ffmpeg / ffprobe not installed (apt-get install ffmpeg); the GIF path is tested instead')
def test_video_mp4_frames(tmp_path):
  frames = np.random.default_rng(0).integers(0, 255, size=(7, 48, 64, 3), dtype=np.uint8)
  path = videos.write_video(frames, str(tmp_path / 'videos' / 'eval1_hrl_step_5'), fps=10)
  assert path.endswith('.mp4')
  count = subprocess.run([
      'ffprobe', '-v', 'error', '-count_frames', '-select_streams', 'v:0', '-show_entries', 'stream=nb_read_frames',
      '-of', 'csv=p=0', path
  ], capture_output=True, text=True, check=True).stdout
  assert int(count.strip()) == 7


def test_videos_without_rendering_stop_unless_asked_to_go_on(policy, tmp_path, monkeypatch, caplog, capsys):
  """MUJOCO_GL=disable: no back end renders (a real failure of rendering.backend(), no mock)."""
  train_dir, _, _ = policy
  monkeypatch.setenv('MUJOCO_GL', 'disable')
  videos = ("evaluate.eval_modes = ['eval3']", 'evaluate.generate_videos = True', 'evaluate.num_episodes_videos = 1')
  parse(*videos)
  with pytest.raises(rendering.RenderingUnavailableError, match='(?s)MUJOCO_GL=disable.*videos_optional = True'):
    eval_lib.evaluate(str(train_dir), str(tmp_path / 'eval'), checkpoint_path='model.ckpt-1000')
  assert not (tmp_path / 'eval').exists()  # stopped before any episode
  parse(*videos, 'evaluate.videos_optional = True')
  rows = eval_lib.evaluate(str(train_dir), str(tmp_path / 'eval'), checkpoint_path='model.ckpt-1000')
  assert [row['mode'] for row in rows] == ['eval3'] and not (tmp_path / 'eval' / 'videos').exists()
  assert any('Evaluating without videos (evaluate.videos_optional = True)' in r.getMessage() for r in caplog.records)
  # Through run_eval.py: the message alone, exit status 3.
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  args = [
      'run_eval.py',
      str(CONFIG), '--train_dir',
      str(train_dir), '--eval_dir',
      str(tmp_path / 'eval2'), '--checkpoint_path', 'model.ckpt-1000'
  ]
  for binding in small_bindings(*videos):
    args += ['--gin_param', binding]
  capsys.readouterr()
  assert launcher.main('eval', fv(args), fv) == launcher.EXIT_UNAVAILABLE
  err = capsys.readouterr().err
  assert err.startswith('run_eval: error: MuJoCo rendering (evaluation videos, env.render()) is off: MUJOCO_GL=disable')
  assert 'videos_optional = True' in err and 'Traceback' not in err


def test_waiting_for_checkpoints_says_how_to_stop(tmp_path, caplog):
  caplog.set_level('INFO')
  variables = {'global_step': tf.Variable(5, dtype=tf.int64)}
  evaluated = []
  thread = threading.Thread(target=eval_lib.evaluate_checkpoint_repeatedly, args=(str(tmp_path), evaluated.append),
                            kwargs=dict(eval_interval_secs=0.05, max_number_of_evaluations=1))
  thread.start()
  deadline = time.time() + 20
  while not any('Waiting' in r.getMessage() for r in caplog.records) and time.time() < deadline:
    time.sleep(0.05)
  save_policy(variables, tmp_path, 5)
  thread.join(20)
  assert not thread.is_alive() and len(evaluated) == 1
  waiting = [r.getMessage() for r in caplog.records if 'Waiting' in r.getMessage()]
  assert waiting == [
      f'Waiting for new policy checkpoints in {tmp_path} (looking every 0.05 s; Ctrl-C stops). To stop '
      'after the existing checkpoints instead, run with --gin_param "evaluate.checkpoint_timeout = 0".'
  ]
  caplog.clear()
  eval_lib.evaluate_checkpoint_repeatedly(str(tmp_path), evaluated.append, eval_interval_secs=0.05,
                                          checkpoint_timeout=0.1, already_evaluated=[5])
  assert [r.getMessage() for r in caplog.records if 'Waiting' in r.getMessage()
         ] == [f'Waiting up to 0.1 s for a new policy checkpoint in {tmp_path} (looking every 0.05 s; Ctrl-C stops).']


# -- User errors ---------------------------------------------------------------------------------------------------


def test_no_checkpoint_says_where_it_looked(tmp_path):
  parse()
  with pytest.raises(rollout.EvalError, match='save_policy_every_n_steps') as error:
    eval_lib.evaluate(str(tmp_path / 'train'), str(tmp_path / 'eval'), checkpoint_range=(0, 10))
  assert str(tmp_path / 'train' / 'policy') in str(error.value)
  with pytest.raises(rollout.EvalError, match='no policy checkpoint in .*checkpoint_timeout'):
    eval_lib.evaluate(str(tmp_path / 'train'), str(tmp_path / 'eval'), checkpoint_timeout=0, eval_interval_secs=0)
  with pytest.raises(rollout.EvalError, match='no checkpoint at'):
    eval_lib.evaluate(str(tmp_path / 'train'), str(tmp_path / 'eval'), checkpoint_path='model.ckpt-5')


def test_checkpoint_of_another_configuration(tmp_path):
  parse()
  save_policy({'global_step': tf.Variable(7, dtype=tf.int64)}, tmp_path / 'train' / 'policy', 7)
  # The poller does not retry it: the error (CheckpointMismatchError's list of names) stops the evaluation.
  with pytest.raises(rollout.EvalError, match=r'(?s)missing in the checkpoint \(40\): uvf_agent/actor_net.*another '
                     'configuration'):
    eval_lib.evaluate(str(tmp_path / 'train'), str(tmp_path / 'eval'), eval_interval_secs=0, checkpoint_timeout=30)


def test_unknown_eval_mode(policy, tmp_path):
  train_dir, _, _ = policy
  parse("evaluate.eval_modes = ['eval1', 'eval9']")
  with pytest.raises(rollout.EvalError, match=r"unknown eval mode\(s\) \['eval9'\].*'eval1', 'eval2', 'eval3'"):
    eval_lib.evaluate(str(train_dir), str(tmp_path / 'eval'), checkpoint_path='model.ckpt-1000')


# -- run_eval.py ---------------------------------------------------------------------------------------------------


def test_run_eval_evaluates_a_checkpoint(policy, capsys):
  train_dir, _, _ = policy
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  args = ['run_eval.py', str(CONFIG), '--train_dir', str(train_dir)]
  for binding in small_bindings("evaluate.eval_modes = ['eval2']"):
    args += ['--gin_param', binding]
  argv = fv(args + ['--checkpoint_path', 'model.ckpt-1000'])
  launcher.plan('eval', argv, fv)  # plans without error
  assert launcher.main('eval', argv, fv) == 0
  out = capsys.readouterr()
  assert 'not implemented' not in out.err and 'eval2' in out.out
  rows, _ = read_rows(train_dir / 'eval')
  assert [(row['mode'], row['step']) for row in rows] == [('eval2', STEP)]
  # Another checkpoint choice evaluates into the same eval directory (checkpoint selection is not configuration);
  # a missing checkpoint is one message, no traceback.
  argv = fv(args + ['--checkpoint_path', 'model.ckpt-77'])
  assert launcher.main('eval', argv, fv) == launcher.EXIT_USAGE
  err = capsys.readouterr().err
  assert 'no checkpoint at' in err and 'model.ckpt-1000' in err and 'Traceback' not in err
