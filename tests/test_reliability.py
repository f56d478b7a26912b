"""Fault injection on tiny runs of both systems (issue #13, docs/reliability.md): a run can be stopped, crash, fill the
disk or be started twice, and nothing is lost or overwritten.

Each case runs the real `run_train.py` / `run_eval.py` in a subprocess (HIRO: 50-step AntMaze episodes, small
buffers; IMPALA: builtin/find_object, 12x12 frames, 2 actors, unrolls of 5) and checks the exit status, that no
traceback is printed, the step the run resumed from, and that the files the earlier run wrote are unchanged (content
and modification time). The disk is filled for real: a small tmpfs mounted for the test, else (no mount allowed) a
file size limit (RLIMIT_FSIZE).
"""

import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import launcher

REPO = Path(launcher.__file__).resolve().parent
LOG_DIR = None  # set by the `_logs` fixture

HIRO = ['configs/ant_maze.gin'] + [a for b in [
    'every_n_steps.n = 50', 'every_n_episodes.steps_per_episode = 50', 'train_uvf.max_steps_per_episode = 50',
    'train_uvf.initial_episodes = 1', 'train_uvf.batch_size = 16', 'agent/CircularBuffer.buffer_size = 1000',
    'meta/CircularBuffer.buffer_size = 200', 'train_uvf.seed = 0', 'train_uvf.log_every_n_steps = 50',
    'train_uvf.save_policy_every_n_steps = 100', 'train_uvf.steps_per_call = 50'] for a in ('--gin_param', b)]
IMPALA = ['configs/impala_builtin.gin', '--num_actors=2', '--batch_size=2', '--unroll_length=5', '--width=12',
          '--height=12', '--gin_param', 'experiment.checkpoint_interval_s = 0']


def episodes(n):
  """HIRO's run length: n 50-step episodes + 100 steps (n * 50 + 100 steps)."""
  return ['--gin_param', f'train_uvf.num_episodes_train = {n}']


_LOGS = iter(range(10 ** 6))


def start(script, args, preexec=None):
  """Starts `python <script> <args>` in the repository, SIGINT / SIGTERM at their defaults as from a shell, its
  output into files (a pipe nobody reads could block it). Returns (process, stdout path, stderr path)."""
  def child():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if preexec is not None:
      preexec()
  n = next(_LOGS)
  out, err = LOG_DIR / f'{n}.out', LOG_DIR / f'{n}.err'
  with open(out, 'w') as stdout, open(err, 'w') as stderr:
    process = subprocess.Popen([sys.executable, script] + list(args), cwd=REPO, stdout=stdout, stderr=stderr,
                               preexec_fn=child)
  return process, out, err


def wait_for(started, pattern, timeout=300):
  """Waits until the stderr or stdout of a started process shows `pattern` (or it exits)."""
  process, out, err = started
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and process.poll() is None:
    if re.search(pattern, out.read_text() + err.read_text()):
      return
    time.sleep(.2)
  raise AssertionError(f'{pattern!r} did not show within {timeout} s: {Result(started)}')


class Result:
  """The exit status and output of a started process, once it exited."""

  def __init__(self, started, timeout=600):
    process, out, err = started
    try:
      process.wait(timeout=timeout)
    finally:
      if process.poll() is None:
        process.kill()
    self.code = process.returncode
    self.out, self.err = out.read_text(), err.read_text()
    self.text = self.out + self.err

  def __repr__(self):
    return f'exit {self.code}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-5000:]}'


def run(script, args, preexec=None):
  result = Result(start(script, args, preexec))
  assert 'Traceback' not in result.text, result
  return result


def train(args, preexec=None):
  return run('run_train.py', args, preexec)


def snapshot(directory):
  """{relative path: (size, mtime_ns, sha256)} of every file under `directory`."""
  files = {}
  for path in sorted(Path(directory).rglob('*')):
    if path.is_file():
      stat = path.stat()
      files[str(path.relative_to(directory))] = (stat.st_size, stat.st_mtime_ns,
                                                  hashlib.sha256(path.read_bytes()).hexdigest())
  return files


def assert_unchanged(before, after, names):
  for name in names:
    assert after.get(name) == before[name], name


def checkpoints_in(directory, pattern=r'model\.ckpt-(\d+)\.index$'):
  return sorted(int(m.group(1)) for m in (re.match(pattern, p.name) for p in Path(directory).iterdir()) if m)


def all_finite(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  dtypes = reader.get_variable_to_dtype_map()
  return all(np.all(np.isfinite(reader.get_tensor(k))) for k in dtypes if dtypes[k].is_floating)


@contextlib.contextmanager
def small_disk(path, megabytes):
  """A real file system of `megabytes` MiB at `path` (tmpfs); yields None, or, where mounting is not allowed, a
  preexec function that limits the size of each file the training writes (RLIMIT_FSIZE) instead."""
  path.mkdir(parents=True, exist_ok=True)
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={megabytes}m', 'tmpfs', str(path)],
                           capture_output=True, check=False).returncode == 0
  try:
    if mounted:
      yield None
    else:
      def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (6 * 2 ** 20, 6 * 2 ** 20))
      yield limit
  finally:
    if mounted:
      subprocess.run(['umount', str(path)], check=False)


@pytest.fixture(scope='module', autouse=True)
def _logs(tmp_path_factory):
  global LOG_DIR  # pylint: disable=global-statement
  LOG_DIR = tmp_path_factory.mktemp('logs')


# --------------------------------------------------------------------------------------------------------------------
# HIRO.

@pytest.fixture(scope='module', name='hiro_run')
def _hiro_run(tmp_path_factory):
  """Bad values first (refused, nothing written), then the corrected command in the same directory: 200 steps,
  full checkpoints at 150 and 200 (every episode end: save_interval_secs 0), policy checkpoints at 100 and 200."""
  root = tmp_path_factory.mktemp('hiro')
  run_dir = root / 'run'
  refused = [train(HIRO + episodes(2) + ['--gin_param', binding, '--train_dir', str(run_dir)])
             for binding in ('train_uvf.batch_size = 0', "train_uvf.batch_size = 'abc'")]
  existed = run_dir.exists()
  result = train(HIRO + episodes(2) + ['--gin_param', 'train_uvf.save_interval_secs = 0', '--train_dir',
                                       str(run_dir)])
  assert result.code == 0, result
  return {'dir': run_dir, 'refused': refused, 'existed': existed, 'root': root,
          'args': HIRO + ['--gin_param', 'train_uvf.save_interval_secs = 0']}


def test_hiro_bad_values_are_refused_before_anything_is_written(hiro_run):
  batch_zero, batch_text = hiro_run['refused']
  for result, value in ((batch_zero, '0'), (batch_text, "'abc'")):
    assert result.code == launcher.EXIT_USAGE, result
    assert f'train_uvf.batch_size must be a positive int, got {value}.' in result.err
    assert len(result.err.strip().splitlines()) == 1, result
  assert not hiro_run['existed']  # and the corrected command then ran in that directory (the fixture)
  assert checkpoints_in(hiro_run['dir']) == [150, 200]


def test_an_unwritable_run_directory_is_a_usage_error(tmp_path):
  target = tmp_path / 'ro'
  target.mkdir()
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', str(target)], capture_output=True,
                           check=False).returncode == 0
  run_dir = target / 'run' if mounted else Path('/proc/no_such_dir/run')  # /proc refuses new directories
  try:
    result = train(HIRO + episodes(1) + ['--train_dir', str(run_dir)])
  finally:
    if mounted:
      subprocess.run(['umount', str(target)], check=False)
  assert result.code == launcher.EXIT_USAGE, result
  assert f'cannot write the run directory {run_dir}' in result.err and 'Choose a directory you can write' in result.err
  assert len(result.err.strip().splitlines()) == 1


def test_hiro_lost_index_and_corrupt_newest_resume_from_the_newest_readable(hiro_run, tmp_path):
  """A copy without its `checkpoint` index file, whose newest full checkpoint is truncated, and a lock file left by
  a killed process: the rerun, one episode longer, warns, sets model.ckpt-200 aside, resumes from 150 and overwrites
  nothing (before: it said "resuming", started from step 0 and overwrote the policy checkpoints; a truncated
  checkpoint was a traceback)."""
  run_dir = tmp_path / 'run'
  shutil.copytree(hiro_run['dir'], run_dir)
  (run_dir / 'checkpoint').unlink()
  data = run_dir / 'model.ckpt-200.data-00000-of-00001'
  os.truncate(data, 1000)
  stale = {'host': os.uname().nodename, 'pid': 999999999, 'started': '2026-01-01T00:00:00', 'command': ['x']}
  (run_dir / 'run.lock').write_text(json.dumps(stale))
  before = snapshot(run_dir)
  result = train(hiro_run['args'] + episodes(3) + ['--train_dir', str(run_dir)])
  assert result.code == 0, result
  assert 'continuing the run with train_uvf.num_episodes_train: 2 -> 3' in result.out
  assert 'took over the lock' in result.err and 'PID 999999999' in result.err
  assert 'the full checkpoint' in result.out and 'model.ckpt-200 is unreadable' in result.out
  assert f'Resumed from {run_dir}/model.ckpt-150 at global step 150.' in result.out
  assert 'global step 200 / 250' in result.out and 'global step 250 / 250' in result.out
  after = snapshot(run_dir)
  # The corrupt checkpoint is kept, renamed; the policy checkpoints of the earlier run are untouched (the resumed
  # run does not write policy/model.ckpt-200 again).
  assert after['model.ckpt-200.data-00000-of-00001.corrupt'] == before['model.ckpt-200.data-00000-of-00001']
  assert after['model.ckpt-200.index.corrupt'] == before['model.ckpt-200.index']
  assert_unchanged(before, after, [n for n in before if n.startswith('policy/model.ckpt-')] + [
      'run.json', 'config.gin', 'operative_config.gin'])
  assert checkpoints_in(run_dir) == [200, 250] and checkpoints_in(run_dir / 'policy') == [100, 200]
  assert tf.train.latest_checkpoint(str(run_dir)).endswith('model.ckpt-250')


def test_hiro_unreadable_or_unsupported_checkpoints_are_refused_unchanged(hiro_run, tmp_path):
  """No readable full checkpoint, policy checkpoints without a full one, an original TF1 full checkpoint: each is a
  refusal (exit 4) that changes nothing, never a fresh start."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  cases = {}
  for case in ('none_readable', 'policy_only', 'tf1_original'):
    run_dir = tmp_path / case
    shutil.copytree(hiro_run['dir'], run_dir)
    cases[case] = run_dir
  for name in ('model.ckpt-150', 'model.ckpt-200'):
    os.truncate(cases['none_readable'] / f'{name}.data-00000-of-00001', 100)
  for path in cases['policy_only'].glob('model.ckpt-*'):
    path.unlink()
  (cases['policy_only'] / 'checkpoint').unlink()
  for path in cases['tf1_original'].glob('model.ckpt-*'):
    path.unlink()
  checkpoints.export_tf1_policy({'global_step': tf.constant(300, tf.int64),
                                 'uvf_agent/critic_net/critic_net/states/weights/Adam': tf.zeros([2, 3])},
                                str(cases['tf1_original'] / 'model.ckpt-300'))
  expected = {'none_readable': 'holds full checkpoints but none is readable (model.ckpt-200: ',
              'policy_only': 'it holds no full checkpoint model.ckpt-<step>, but it holds policy checkpoints up to '
                             'step 200',
              'tf1_original': 'is an original TF1 (efficient-hrl) full training checkpoint: resuming it as a run is '
                              'not supported'}
  for case, run_dir in cases.items():
    before = snapshot(run_dir)
    result = train(hiro_run['args'] + episodes(2) + ['--train_dir', str(run_dir)])
    assert result.code == launcher.EXIT_RUN_DIR, (case, result)
    assert expected[case] in result.err, (case, result)
    assert 'Nothing was changed' in result.err or 'nothing was changed' in result.err
    after = snapshot(run_dir)
    assert {k: v for k, v in after.items() if k != 'run.lock'} == {k: v for k, v in before.items() if k != 'run.lock'}


def test_hiro_full_disk(tmp_path):
  """The disk fills during a save: one message naming the directory, the size needed and what is free; what the save
  left is removed; the previous checkpoint is intact; the rerun is refused at its start with what it needs (before:
  a ResourceExhaustedError traceback, a model.ckpt-N_temp folder left, and the rerun died on it)."""
  mount = tmp_path / 'disk'
  with small_disk(mount, 36) as limit:
    run_dir = mount / 'run'
    args = HIRO + episodes(2) + ['--gin_param', 'train_uvf.save_interval_secs = 0', '--train_dir', str(run_dir)]
    result = train(args, preexec=limit)
    assert result.code == launcher.EXIT_RUN_DIR, result
    assert 'Checkpoints: full checkpoints 11.' in result.out  # says what they need, at the start
    assert f'into {run_dir} failed' in result.err
    assert not list(run_dir.glob('*_temp')) and not list(run_dir.glob('policy/*_temp'))
    from uvf import checkpoints  # pylint: disable=g-import-not-at-top
    if limit is None:  # tmpfs: the third full checkpoint does not fit
      assert 'writing the full checkpoint model.ckpt-200' in result.err and 'the disk is full' in result.err
      assert re.search(r'It needs about 11\.\d MB; \d+\.\d MB free there', result.err), result
      assert f'The previous checkpoint {run_dir}/model.ckpt-150 is intact' in result.err
      assert checkpoints_in(run_dir) == [100, 150] and checkpoints.unreadable(str(run_dir / 'model.ckpt-150')) is None
      before = snapshot(run_dir)
      again = train(args)
      assert again.code == launcher.EXIT_RUN_DIR, again
      assert 'not enough disk space' in again.err and 'they need 11.' in again.err
      assert {k: v for k, v in snapshot(run_dir).items() if k != 'run.lock'} == {
          k: v for k, v in before.items() if k != 'run.lock'}
    else:  # a 6 MiB file size limit: the first full checkpoint fails
      assert 'writing the full checkpoint model.ckpt-100' in result.err


def test_hiro_sigterm_second_training_and_continuation(tmp_path):
  """A long run: a second training on its directory is refused naming the first; SIGTERM stops the first at the
  next episode end after a full checkpoint, exit 143, no traceback (before: killed, everything since the last
  checkpoint lost); the rerun with a shorter total continues from that step."""
  run_dir = tmp_path / 'run'
  first = start('run_train.py', HIRO + episodes(200) + ['--train_dir', str(run_dir)])
  wait_for(first, 'global step 100 /')
  second = train(HIRO + episodes(200) + ['--train_dir', str(run_dir)])
  first[0].send_signal(signal.SIGTERM)
  result = Result(first)
  assert second.code == launcher.EXIT_RUN_DIR, second
  assert f'{run_dir} is in use by another process (PID {first[0].pid} on host' in second.err
  assert result.code == 128 + signal.SIGTERM, result
  assert 'Traceback' not in result.text
  stopped = re.search(r'SIGTERM: stopped at global step (\d+) of 10100', result.out)
  assert stopped, result
  step = int(stopped.group(1))
  assert step % 50 == 0 and checkpoints_in(run_dir) == [step]  # only the stop's checkpoint (save every 300 s)
  assert 'stopped by SIGTERM after writing the checkpoint' in result.err
  before = snapshot(run_dir)
  more = train(HIRO + episodes(step // 50 - 1) + ['--train_dir', str(run_dir)])
  assert more.code == 0, more
  assert f'continuing the run with train_uvf.num_episodes_train: 200 -> {step // 50 - 1}' in more.out
  assert f'Resumed from {run_dir}/model.ckpt-{step} at global step {step}.' in more.out
  assert f'global step {step + 50} / {step + 50}' in more.out
  after = snapshot(run_dir)
  assert_unchanged(before, after, [n for n in before if n.startswith(('policy/model.ckpt-', f'model.ckpt-{step}.'))]
                   + ['run.json', 'operative_config.gin'])
  assert checkpoints_in(run_dir) == [step, step + 50]


def test_run_eval_reads_a_full_training_checkpoint(hiro_run):
  """run_eval.py --checkpoint_path on a full training checkpoint evaluates its policy (before: refused, pointing to
  an --allow_extra flag run_eval does not have)."""
  eval_dir = hiro_run['root'] / 'eval_full'
  result = run('run_eval.py', hiro_run['args'] + episodes(2) + [
      '--train_dir', str(hiro_run['dir']), '--eval_dir', str(eval_dir), '--checkpoint_path',
      str(hiro_run['dir'] / 'model.ckpt-200'), '--gin_param', 'evaluate.num_episodes_eval = 1',
      '--gin_param', "EVAL_MODES = ['eval1']", '--gin_param', 'evaluate.max_steps_per_episode = 10',
      '--gin_param', 'evaluate.num_threads = 1'])
  assert result.code == 0, result
  rows = json.loads((eval_dir / 'results.json').read_text())
  assert [(row['step'], row['checkpoint']) for row in rows] == [(200, str(hiro_run['dir'] / 'model.ckpt-200'))]


def test_policy_from_a_full_checkpoint_is_the_policy_checkpoint_of_its_step(hiro_run):
  """The policy run_eval reads from full checkpoint 200 is the one training wrote to policy/model.ckpt-200."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  from uvf import train as train_lib  # pylint: disable=g-import-not-at-top
  from uvf.environments import create_maze_env  # pylint: disable=g-import-not-at-top
  from uvf import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from uvf import representation  # pylint: disable=g-import-not-at-top
  launcher.register_configurables()
  launcher.parse_gin([REPO / 'configs' / 'ant_maze.gin'], [a for a in hiro_run['args'][1:] if a != '--gin_param'])

  def policy():
    meta, uvf_agent, state_preprocess, _ = train_lib.build_agents(
        create_maze_env.create_maze_env(), agent_lib.UvfAgent, agent_lib.MetaAgent, representation.StatePreprocess,
        representation.InverseDynamics)
    counters = [tf.Variable(0, dtype=tf.int64) for _ in range(3)]
    return (uvf_agent, meta, state_preprocess, counters,
            train_lib.policy_variables_by_tf1_name(uvf_agent, meta, state_preprocess, *counters))

  *parts, counters, from_full = policy()
  train_lib.restore_policy_from_full_checkpoint(str(hiro_run['dir'] / 'model.ckpt-200'), *parts, *counters)
  *_, from_policy = policy()
  checkpoints.restore_policy(str(hiro_run['dir'] / 'policy' / 'model.ckpt-200'), from_policy)
  assert int(from_full['global_step'].numpy()) == 200
  for name, variable in from_policy.items():
    np.testing.assert_array_equal(from_full[name].numpy(), variable.numpy(), err_msg=name)


def test_export_tf1_policy_keeps_file_system_urls():
  """export_tf1_policy to a ram:// path (before: os.path.abspath made it '<cwd>/ram:/...')."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  path = 'ram://exported/policy/model.ckpt-7'
  written = checkpoints.export_tf1_policy({'global_step': tf.constant(7, tf.int64), 'uvf_agent/action_context_0':
                                           tf.constant([1., 2.])}, path)
  assert written == path and tf.io.gfile.exists(path + '.index')
  assert not Path('ram:').exists()
  assert tf.train.latest_checkpoint('ram://exported/policy') == path
  assert checkpoints.checkpoint_step(path) == 7


# --------------------------------------------------------------------------------------------------------------------
# IMPALA.

@pytest.fixture(scope='module', name='impala_run')
def _impala_run(tmp_path_factory):
  """--num_actors=0 first (refused, nothing written), then the corrected command in the same directory: 60 frames,
  a checkpoint after every learner step (10 frames each): model.ckpt-0 ... model.ckpt-60, the 5 newest kept."""
  root = tmp_path_factory.mktemp('impala')
  run_dir = root / 'run'
  refused = train(IMPALA + ['--total_environment_frames=60', '--num_actors=0', '--train_dir', str(run_dir)])
  existed = run_dir.exists()
  result = train(IMPALA + ['--total_environment_frames=60', '--train_dir', str(run_dir)])
  assert result.code == 0, result
  return {'dir': run_dir, 'refused': refused, 'existed': existed, 'root': root}


def test_impala_bad_value_is_refused_before_anything_is_written(impala_run):
  result = impala_run['refused']
  assert result.code == launcher.EXIT_USAGE, result
  assert 'num_actors must be >= 1, got 0 (experiment.num_actors, --num_actors).' in result.err
  assert len(result.err.strip().splitlines()) == 1
  assert not impala_run['existed']
  assert checkpoints_in(impala_run['dir']) == [20, 30, 40, 50, 60]


def test_impala_lost_index_and_corrupt_newest_resume_from_the_newest_readable(impala_run, tmp_path):
  run_dir = tmp_path / 'run'
  shutil.copytree(impala_run['dir'], run_dir)
  (run_dir / 'checkpoint').unlink()
  os.truncate(run_dir / 'model.ckpt-60.data-00000-of-00001', 1000)
  before = snapshot(run_dir)
  # Longer, and with the 600 s interval: only the final checkpoint is written.
  result = train(IMPALA[:-2] + ['--total_environment_frames=80', '--train_dir', str(run_dir)])
  assert result.code == 0, result
  assert 'continuing the run with experiment.total_environment_frames: 60 -> 80; ' in result.out, result
  assert 'experiment.checkpoint_interval_s: 0 -> (default)' in result.out and 'new horizon' in result.out
  assert 'model.ckpt-60 is unreadable' in result.err
  assert 'resuming at 50 environment frames' in result.err
  after = snapshot(run_dir)
  assert after['model.ckpt-60.data-00000-of-00001.corrupt'] == before['model.ckpt-60.data-00000-of-00001']
  assert_unchanged(before, after, [f'model.ckpt-{n}.{s}' for n in (20, 30, 40, 50)
                                   for s in ('index', 'data-00000-of-00001')] + ['run.json', 'config.gin'])
  assert checkpoints_in(run_dir) == [20, 30, 40, 50, 80]


def test_impala_full_disk(tmp_path):
  mount = tmp_path / 'disk'
  with small_disk(mount, 24) as limit:
    run_dir = mount / 'run'
    result = train(IMPALA + ['--total_environment_frames=60', '--train_dir', str(run_dir)], preexec=limit)
    assert result.code == launcher.EXIT_RUN_DIR, result
    assert f'writing a checkpoint into {run_dir} failed' in result.err
    assert not list(run_dir.glob('*_temp'))
    if limit is None:  # two 9.3 MB checkpoints fit, the third does not
      assert 'the disk is full' in result.err and re.search(r'it needs about 9\.\d MB, \d+\.\d MB free', result.err)
      assert f'The previous checkpoint {run_dir}/model.ckpt-10 is intact' in result.err
      assert checkpoints_in(run_dir) == [0, 10] and all_finite(run_dir / 'model.ckpt-10')


def test_impala_sigint_second_training_and_resume(tmp_path):
  """Ctrl-C (SIGINT) writes the checkpoint and exits 130 without a traceback (before: a 40-line KeyboardInterrupt
  traceback after the checkpoint); a second training on the directory is refused while the first runs."""
  run_dir = tmp_path / 'run'
  first = start('run_train.py', IMPALA[:-2] + ['--total_environment_frames=1000000', '--train_dir', str(run_dir)])
  wait_for(first, 'Episode return')
  second = train(IMPALA + ['--total_environment_frames=1000000', '--train_dir', str(run_dir)])
  first[0].send_signal(signal.SIGINT)
  result = Result(first)
  assert second.code == launcher.EXIT_RUN_DIR, second
  assert f'is in use by another process (PID {first[0].pid} on host' in second.err
  assert result.code == 128 + signal.SIGINT, result
  assert 'Traceback' not in result.text
  stopped = re.search(r'SIGINT: stopped at (\d+) environment frames of 1000000', result.err)
  assert stopped, result
  frames = int(stopped.group(1))
  assert frames > 0 and checkpoints_in(run_dir) == [0, frames]


def test_impala_divergence_stops_before_a_non_finite_checkpoint(tmp_path):
  """A learning rate of 1e30 makes the parameters diverge: the run stops with the non-finite values named, exit 5,
  no traceback, and every checkpoint holds finite values (before: an actor's 'action must be an integer index'
  error in 5 tracebacks)."""
  run_dir = tmp_path / 'run'
  result = train(IMPALA + ['--total_environment_frames=400', '--learning_rate=1e30', '--train_dir', str(run_dir)])
  assert result.code == launcher.EXIT_DIVERGED, result
  assert 'non-finite' in result.err
  assert len([line for line in result.err.splitlines() if line.startswith('run_train: error:')]) == 1
  assert checkpoints_in(run_dir)
  for frames in checkpoints_in(run_dir):
    assert all_finite(run_dir / f'model.ckpt-{frames}'), frames


def test_learner_names_the_non_finite_step_and_tensors(tmp_path):
  """A NaN reward in a batch: the learner's step is stopped naming the losses and the variables it made non-finite,
  before any checkpoint of them."""
  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
  settings = experiment.Settings(level_name='builtin/find_object', width=12, height=12, batch_size=2,
                                 unroll_length=3, num_action_repeats=1, checkpoint_interval_s=0.)
  agent, learner = experiment.make_agent_and_learner(settings, settings.level_name)
  manager = checkpoints.make_checkpoint_manager(str(tmp_path), agent, learner.optimizer,
                                                learner.num_environment_frames)
  progress = experiment.LearnerProgress(str(tmp_path), settings, learner, manager)
  progress.start()
  t, b = settings.unroll_length + 1, settings.batch_size
  rewards = np.zeros([t, b], np.float32)
  rewards[2, 1] = np.nan
  env_outputs = environments.StepOutput(
      reward=rewards, info=environments.StepOutputInfo(np.zeros([t, b], np.float32), np.zeros([t, b], np.int32)),
      done=np.zeros([t, b], bool), observation=(np.zeros([t, b, 12, 12, 3], np.uint8), np.full([t, b], '', object)))
  agent_outputs = agent_lib.AgentOutput(np.zeros([t, b], np.int32), np.zeros([t, b, agent.num_actions], np.float32),
                                        np.zeros([t, b], np.float32))
  state = agent.initial_state(b)
  metrics = {k: v.numpy() for k, v in learner.step(state, env_outputs, agent_outputs).items()}
  with pytest.raises(learner_lib.NonFiniteError) as info:
    progress.after_step(metrics, [])
  message = str(info.value)
  assert 'learner step 1 of this run (from 0 environment frames)' in message
  assert 'total_loss = nan' in message and 'agent/' in message and '/RMSProp' not in message.split(':')[0]
  assert learner.nonfinite_variables() and all(name.startswith('agent/') for name in learner.nonfinite_variables())
  assert checkpoints_in(tmp_path) == [0] and all_finite(tmp_path / 'model.ckpt-0')
  progress.close()


def test_impala_resumes_an_original_tf1_checkpoint(tmp_path):
  """An original (name-based) IMPALA checkpoint in the run directory: the learner resumes from it (agent, RMSProp
  slots, frame counter)."""
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  settings = experiment.Settings(level_name='builtin/find_object', width=12, height=12)
  agent, learner = experiment.make_agent_and_learner(settings, settings.level_name)
  for variable in agent.tf1_variables().values():
    variable.assign(tf.random.normal(variable.shape))
    learner.optimizer.slots_for(variable)[0].assign(tf.fill(variable.shape, 3.))
  checkpoints.export_tf1_checkpoint(str(tmp_path / 'model.ckpt'), agent, learner.optimizer, global_step=1280)
  expected = {name: v.numpy() for name, v in checkpoints.tf1_variable_map(agent, learner.optimizer).items()}
  other_agent, other = experiment.make_agent_and_learner(settings, settings.level_name)
  manager = checkpoints.make_checkpoint_manager(str(tmp_path), other_agent, other.optimizer,
                                                other.num_environment_frames)
  assert checkpoints.restore_latest(manager) == str(tmp_path / 'model.ckpt-1280')
  assert int(other.num_environment_frames.numpy()) == 1280
  for name, value in checkpoints.tf1_variable_map(other_agent, other.optimizer).items():
    np.testing.assert_array_equal(value.numpy(), expected[name], err_msg=name)
