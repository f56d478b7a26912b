"""Fault injection on tiny runs of both systems (docs/design/reliability.md): a run can be stopped, crash,
fill the disk or be started twice, and nothing is lost or overwritten.

The trainings run the real `run_train.py` in a subprocess (HIRO: 50-step AntMaze episodes, small buffers; IMPALA:
builtin/find_object, 12 x 12 frames, 2 actors, unrolls of 5); refusals, which stop before any training, and
evaluation go through `launcher.main` in this process, as the scripts do. Each case checks the exit status, that no
traceback is printed, the step the run resumed from, and that the files the earlier run wrote are unchanged (content
and modification time). The disk is filled for real: a small tmpfs mounted for the test, else (no mount allowed) a
file size limit (RLIMIT_FSIZE).
"""

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

import launcher
from rundir import checkpoints as run_checkpoints
from rundir import errors

REPO = launcher.REPO_ROOT
LOG_DIR = None  # set by the `_logs` fixture

HIRO = ['configs/ant_maze.gin'] + [
    a for b in [
        'every_n_steps.n = 50', 'every_n_episodes.steps_per_episode = 50', 'train_uvf.max_steps_per_episode = 50',
        'train_uvf.initial_episodes = 1', 'train_uvf.batch_size = 16', 'agent/CircularBuffer.buffer_size = 1000',
        'meta/CircularBuffer.buffer_size = 200', 'train_uvf.seed = 0', 'train_uvf.log_every_n_steps = 50',
        'train_uvf.save_policy_every_n_steps = 100', 'train_uvf.steps_per_call = 50'
    ] for a in ('--gin_param', b)
]
IMPALA = [
    'configs/impala_builtin.gin', '--num_actors=2', '--batch_size=2', '--unroll_length=5', '--width=12', '--height=12',
    '--gin_param', 'experiment.checkpoint_interval_s = 0'
]


def episodes(n):
  """HIRO's run length: n 50-step episodes + 100 steps (n * 50 + 100 steps)."""
  return ['--gin_param', f'train_uvf.num_episodes_train = {n}']


_LOGS = iter(range(10**6))


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
    process = subprocess.Popen(
        [sys.executable, script] + list(args),
        cwd=REPO,
        stdout=stdout,
        stderr=stderr,
        # noqa reason: signal settings of the child, before exec; no lock is taken.
        preexec_fn=child)  # noqa: PLW1509
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


def launcher_lines(text):
  """The lines the launcher printed (`run_train: ...`, `run_eval: ...`), without TensorFlow's and gym's start-up
  noise."""
  return [line for line in text.splitlines() if line.startswith(('run_train:', 'run_eval:'))]


def run(script, args, preexec=None):
  result = Result(start(script, args, preexec))
  assert 'Traceback' not in result.text, result
  return result


def train(args, preexec=None):
  return run('run_train.py', args, preexec)


def second_training_then_signal(args, ready, signum):
  """Starts a training, and once its output shows `ready`, the same training again (in this process: it must be
  refused, the directory is in use), then sends the first `signum`. Returns the first's `Result` (exit 128 + signum,
  no traceback)."""
  first = start('run_train.py', args)
  try:
    wait_for(first, ready)
    code, _, err = launch('train', args)
  finally:
    first[0].send_signal(signum)
    result = Result(first)
  assert code == launcher.EXIT_RUN_DIR, err
  assert f'is in use by another process (PID {first[0].pid} on host' in err, err
  assert result.code == 128 + signum, result
  assert 'Traceback' not in result.text
  return result


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


def mount_tmpfs(path, megabytes, options=''):
  """Mounts a tmpfs of `megabytes` MiB at `path`; False if this machine does not allow it."""
  path.mkdir(parents=True, exist_ok=True)
  return subprocess.run(['mount', '-t', 'tmpfs', '-o', f'{options}size={megabytes}m', 'tmpfs',
                         str(path)], capture_output=True, check=False).returncode == 0


def unmount(path):
  subprocess.run(['umount', str(path)], check=False)


FILE_SIZE_LIMIT = 6 * 2**20  # without a tmpfs: no file may exceed 6 MiB (a policy checkpoint fits, a full one not)


def limit_file_size():
  """RLIMIT_FSIZE (soft) = FILE_SIZE_LIMIT; a write past it fails (EFBIG) instead of killing the process."""
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def launch(program, args):
  """`run_<program>.py <args>` in this process (`launcher.main`): (exit status, stdout, stderr)."""
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = launcher.main(program, fv([f'run_{program}.py'] + list(args)), fv)
  return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope='module', autouse=True)
def _logs(tmp_path_factory):
  global LOG_DIR  # noqa: PLW0603  (module state, set once)  pylint: disable=global-statement
  LOG_DIR = tmp_path_factory.mktemp('logs')


# --------------------------------------------------------------------------------------------------------------------
# HIRO.


@pytest.fixture(scope='module', name='hiro_run')
def _hiro_run(tmp_path_factory):
  """Bad values first (refused, nothing written), then the corrected command in the same directory: 200 steps,
  full checkpoints at 150 and 200 (every episode end: save_interval_secs 0), policy checkpoints at 100 and 200."""
  root = tmp_path_factory.mktemp('hiro')
  run_dir = root / 'run'
  args = HIRO + ['--gin_param', 'train_uvf.save_interval_secs = 0']
  refused = [
      launch('train', args + episodes(2) +
             ['--gin_param', binding, '--train_dir', str(run_dir)])
      for binding in ('train_uvf.batch_size = 0', "train_uvf.batch_size = 'abc'")
  ]
  existed = run_dir.exists()
  result = train(args + episodes(2) + ['--train_dir', str(run_dir)])
  assert result.code == 0, result
  return {'dir': run_dir, 'refused': refused, 'existed': existed, 'root': root, 'args': args}


@pytest.mark.slow
def test_hiro_bad_values_are_refused_before_anything_is_written(hiro_run):
  """Before: the right sentence inside a 38-line traceback, exit 1, and run.json written, so that the corrected
  command was refused as another configuration."""
  for (code, _, err), value in zip(hiro_run['refused'], ('0', "'abc'")):
    assert code == launcher.EXIT_USAGE, err
    assert launcher_lines(err) == [f'run_train: error: train_uvf.batch_size must be a positive int, got {value}.']
  assert not hiro_run['existed']  # and the corrected command then ran in that directory (the fixture)
  assert checkpoints_in(hiro_run['dir']) == [150, 200]


def test_an_unwritable_run_directory_is_a_usage_error(tmp_path):
  target = tmp_path / 'read_only'
  mounted = mount_tmpfs(target, 1, 'ro,')
  run_dir = target / 'run' if mounted else Path('/proc/no_such_dir/run')  # /proc refuses new directories
  try:
    code, _, err = launch('train', HIRO + episodes(1) + ['--train_dir', str(run_dir)])
  finally:
    if mounted:
      unmount(target)
  assert code == launcher.EXIT_USAGE, err
  [line] = launcher_lines(err)
  assert f'cannot write the run directory {run_dir}' in line and 'Choose a directory you can write' in line


@pytest.mark.slow
def test_hiro_corrupt_newest_resumes_from_the_newest_readable(hiro_run, tmp_path):
  """The newest full checkpoint truncated: the rerun warns, sets it aside (kept, renamed), resumes from the older
  one and overwrites nothing (before: `IndexError: Read less bytes than requested`, a 55-line traceback)."""
  run_dir = tmp_path / 'run'
  shutil.copytree(hiro_run['dir'], run_dir)
  os.truncate(run_dir / 'model.ckpt-200.data-00000-of-00001', 1000)
  before = snapshot(run_dir)
  result = train(hiro_run['args'] + episodes(2) + ['--train_dir', str(run_dir)])
  assert result.code == 0, result
  assert f'run directory {run_dir} (resuming the run there)' in result.out
  assert f'the full checkpoint {run_dir}/model.ckpt-200 is unreadable' in result.out
  assert f'Resumed from {run_dir}/model.ckpt-150 at global step 150.' in result.out
  assert 'global step 200 / 200' in result.out
  after = snapshot(run_dir)
  assert after['model.ckpt-200.data-00000-of-00001.corrupt'] == before['model.ckpt-200.data-00000-of-00001']
  assert after['model.ckpt-200.index.corrupt'] == before['model.ckpt-200.index']
  # The resumed run does not write policy/model.ckpt-200 again; the files of the earlier run are untouched.
  assert_unchanged(
      before, after, [n for n in before if n.startswith('policy/model.ckpt-')] +
      ['model.ckpt-150.index', 'model.ckpt-150.data-00000-of-00001', 'run.json', 'config.gin', 'operative_config.gin'])
  assert checkpoints_in(run_dir) == [150, 200] and tf.train.latest_checkpoint(str(run_dir)).endswith('-200')


def test_hiro_unreadable_or_unsupported_checkpoints_are_refused_unchanged(hiro_run, tmp_path):
  """No readable full checkpoint, policy checkpoints without a full one, an original TF1 full checkpoint: each is a
  refusal (exit 4) that changes nothing, never a fresh start (before: tracebacks; a fresh start over the policy
  checkpoints; a TF1 one: some variables assigned, then a shape traceback). In this process:
  `uvf.checkpoints.find_resumable`, what `train_uvf` calls before anything is written."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  cases = {}
  for case in ('none_readable', 'policy_only', 'tf1_original'):
    cases[case] = tmp_path / case
    shutil.copytree(hiro_run['dir'], cases[case])
  for name in ('model.ckpt-150', 'model.ckpt-200'):
    os.truncate(cases['none_readable'] / f'{name}.data-00000-of-00001', 100)
  for path in list(cases['policy_only'].glob('model.ckpt-*')) + [cases['policy_only'] / 'checkpoint']:
    path.unlink()
  for path in cases['tf1_original'].glob('model.ckpt-*'):
    path.unlink()
  checkpoints.export_tf1_policy(
      {
          'global_step': tf.constant(300, tf.int64),
          'uvf_agent/critic_net/states/states_1/weights/Adam': tf.zeros([2, 3])
      }, str(cases['tf1_original'] / 'model.ckpt-300'))
  expected = {
      'none_readable': 'holds full checkpoints but none is readable (model.ckpt-200: ',
      'policy_only': 'it holds no full checkpoint model.ckpt-<step>, but it holds policy checkpoints up to '
                     'step 200',
      'tf1_original': 'is an original TF1 (efficient-hrl) full training checkpoint: resuming it as a run is '
                      'not supported'
  }
  for case, run_dir in cases.items():
    before = snapshot(run_dir)
    with pytest.raises(errors.RunDirectoryError) as info:
      checkpoints.find_resumable(str(run_dir), str(run_dir / 'policy'))
    assert expected[case] in str(info.value) and 'othing was changed' in str(info.value), (case, info.value)
    assert info.value.exit_code == launcher.EXIT_RUN_DIR and info.value.user_error
    assert snapshot(run_dir) == before, case


@pytest.mark.slow
def test_hiro_full_disk(tmp_path):
  """The disk fills during a save: one message naming the directory, the size needed and what is free; what the save
  left is removed; the previous checkpoint is intact; the rerun is refused at its start with what it needs (before:
  a ResourceExhaustedError traceback, a model.ckpt-N_temp folder left, and the rerun died on it)."""
  disk = tmp_path / 'disk'
  mounted = mount_tmpfs(disk, 36)
  try:
    run_dir = disk / 'run'
    args = HIRO + episodes(2) + ['--gin_param', 'train_uvf.save_interval_secs = 0', '--train_dir', str(run_dir)]
    result = train(args, preexec=None if mounted else limit_file_size)
    assert result.code == launcher.EXIT_RUN_DIR, result
    assert 'Checkpoints: full checkpoints 11.' in result.out  # what they need, said at the start
    assert f'into {run_dir} failed' in result.err
    assert not list(run_dir.glob('*_temp')) and not list(run_dir.glob('policy/*_temp'))
    if not mounted:  # the 6 MiB file size limit: the first full checkpoint fails
      assert 'writing the full checkpoint model.ckpt-100' in result.err
      return
    # The third full checkpoint does not fit.
    assert 'writing the full checkpoint model.ckpt-200' in result.err and 'the disk is full' in result.err
    assert re.search(r'It needs about 11\.\d MB; \d+\.\d MB free there', result.err), result
    assert f'The previous checkpoint {run_dir}/model.ckpt-150 is intact' in result.err
    assert checkpoints_in(run_dir) == [100, 150] and run_checkpoints.unreadable(str(run_dir / 'model.ckpt-150')) is None
    before = snapshot(run_dir)
    again = train(args)
    assert again.code == launcher.EXIT_RUN_DIR, again
    assert 'not enough disk space' in again.err and 'they need 11.' in again.err
    assert {
        k: v for k, v in snapshot(run_dir).items() if k != 'run.lock'
    } == {
        k: v for k, v in before.items() if k != 'run.lock'
    }
  finally:
    if mounted:
      unmount(disk)


@pytest.mark.slow
def test_hiro_sigterm_second_training_lost_index_and_continuation(tmp_path):
  """A long run: a second training on its directory is refused naming the first (before: both ran and overwrote
  each other's checkpoints); SIGTERM stops the first at the next episode end after a full checkpoint, exit 143, no
  traceback (before: killed, everything since the last checkpoint lost). Its index file then lost and a lock file
  of a killed process left, the rerun with a shorter total takes the lock over with a warning and continues from
  that checkpoint, overwriting nothing (before: a fresh start over the policy checkpoints)."""
  run_dir = tmp_path / 'run'
  result = second_training_then_signal(HIRO + episodes(200) + ['--train_dir', str(run_dir)], 'global step 100 /',
                                       signal.SIGTERM)
  stopped = re.search(r'SIGTERM: stopped at global step (\d+) of 10100', result.out)
  assert stopped, result
  step = int(stopped.group(1))
  assert step % 50 == 0 and checkpoints_in(run_dir) == [step]  # the stop's checkpoint (otherwise every 300 s)
  assert 'stopped by SIGTERM after writing the checkpoint' in result.err
  (run_dir / 'checkpoint').unlink()
  (run_dir / 'run.lock').write_text(
      json.dumps({
          'host': os.uname().nodename,
          'pid': 999999999,
          'started': '2026-01-01T00:00:00',
          'command': ['killed']
      }))
  before = snapshot(run_dir)
  more = train(HIRO + episodes(step // 50 - 1) + ['--train_dir', str(run_dir)])
  assert more.code == 0, more
  assert f'continuing the run with train_uvf.num_episodes_train: 200 -> {step // 50 - 1}' in more.out
  assert 'took over the lock' in more.err and 'PID 999999999' in more.err
  assert f'Resumed from {run_dir}/model.ckpt-{step} at global step {step}.' in more.out
  assert f'global step {step + 50} / {step + 50}' in more.out
  after = snapshot(run_dir)
  assert_unchanged(before, after, [n for n in before if n.startswith(('policy/model.ckpt-', f'model.ckpt-{step}.'))] +
                   ['run.json', 'operative_config.gin'])
  assert checkpoints_in(run_dir) == [step, step + 50]
  assert tf.train.latest_checkpoint(str(run_dir)).endswith(f'model.ckpt-{step + 50}')


def _hiro_policy(hiro_run):
  """Fresh policy variables of the fixture's configuration (`uvf.build.build_agents`): ((uvf_agent, meta_agent,
  state_preprocess), counters, {TF1 name: variable})."""
  from uvf import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from uvf import build as build_lib  # pylint: disable=g-import-not-at-top
  from uvf import representation  # pylint: disable=g-import-not-at-top
  from uvf.environments import create_maze_env  # pylint: disable=g-import-not-at-top
  launcher.register_configurables()
  launcher.parse_gin([REPO / 'configs' / 'ant_maze.gin'], [a for a in hiro_run['args'][1:] if a != '--gin_param'])
  meta, uvf_agent, state_preprocess, _ = build_lib.build_agents(create_maze_env.create_maze_env(), agent_lib.UvfAgent,
                                                                agent_lib.MetaAgent, representation.StatePreprocess,
                                                                representation.InverseDynamics)
  counters = [tf.Variable(0, dtype=tf.int64) for _ in range(3)]
  return ((uvf_agent, meta, state_preprocess), counters,
          build_lib.policy_variables_by_tf1_name(uvf_agent, meta, state_preprocess, *counters))


def test_policy_from_a_full_checkpoint_is_the_policy_checkpoint_of_its_step(hiro_run):
  """The policy run_eval reads from full checkpoint 200 is the one training wrote to policy/model.ckpt-200."""
  from uvf import build as build_lib  # pylint: disable=g-import-not-at-top
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  parts, counters, from_full = _hiro_policy(hiro_run)
  build_lib.restore_policy_from_full_checkpoint(str(hiro_run['dir'] / 'model.ckpt-200'), *parts, *counters)
  _, _, from_policy = _hiro_policy(hiro_run)
  checkpoints.restore_policy(str(hiro_run['dir'] / 'policy' / 'model.ckpt-200'), from_policy)
  assert int(from_full['global_step'].numpy()) == 200
  for name, variable in from_policy.items():
    np.testing.assert_array_equal(from_full[name].numpy(), variable.numpy(), err_msg=name)


def test_run_eval_reads_full_training_checkpoints(hiro_run):
  """run_eval.py --checkpoint_path on a full training checkpoint, this port's or one in the original's TF1 layout
  (policy names and training-only ones), evaluates its policy (before: refused, pointing to an --allow_extra flag
  run_eval does not have). Both hold the policy of step 200: the same results (evaluation is seeded)."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  _, _, variables = _hiro_policy(hiro_run)
  checkpoints.restore_policy(str(hiro_run['dir'] / 'policy' / 'model.ckpt-200'), variables)
  tf1_full = hiro_run['root'] / 'original' / 'model.ckpt-200'
  checkpoints.export_tf1_policy(
      dict(variables, **{
          'uvf_agent/critic_net/states/states_1/weights/Adam': tf.zeros([45, 400]),
          'num_updates': tf.constant(7)
      }), str(tf1_full))
  assert checkpoints.checkpoint_kind(str(tf1_full)) == checkpoints.KIND_FULL_TF1
  assert checkpoints.checkpoint_kind(str(hiro_run['dir'] / 'model.ckpt-200')) == checkpoints.KIND_FULL
  eval_dir = hiro_run['root'] / 'eval_full'
  for path in (hiro_run['dir'] / 'model.ckpt-200', tf1_full):
    code, out, err = launch(
        'eval', hiro_run['args'] + episodes(2) + [
            '--train_dir',
            str(hiro_run['dir']), '--eval_dir',
            str(eval_dir), '--checkpoint_path',
            str(path), '--gin_param', 'evaluate.num_episodes_eval = 2', '--gin_param',
            "evaluate.eval_modes = ['eval1']", '--gin_param', 'evaluate.max_steps_per_episode = 10', '--gin_param',
            'evaluate.num_threads = 1'
        ])
    assert code == 0, err
    assert f'Evaluation of {path} (global step 200)' in out
  rows = json.loads((eval_dir / 'results.json').read_text())
  assert [(row['step'], row['checkpoint']) for row in rows] == [(200, str(hiro_run['dir'] / 'model.ckpt-200')),
                                                                (200, str(tf1_full))]
  for key in ('success_rate', 'mean_reward', 'mean_meta_reward', 'mean_final_distance'):
    assert rows[0][key] == rows[1][key], key


def test_export_tf1_policy_keeps_file_system_urls():
  """export_tf1_policy to a ram:// path (before: os.path.abspath wrote its index file into ./ram:/...)."""
  from uvf import checkpoints  # pylint: disable=g-import-not-at-top
  path = 'ram://exported/policy/model.ckpt-7'
  written = checkpoints.export_tf1_policy(
      {
          'global_step': tf.constant(7, tf.int64),
          'uvf_agent/action_context_0': tf.constant([1., 2.])
      }, path)
  assert written == path and tf.io.gfile.exists(path + '.index')
  assert not Path('ram:').exists()
  assert tf.train.latest_checkpoint('ram://exported/policy') == path
  assert int(tf.compat.v1.train.NewCheckpointReader(path).get_tensor('global_step')) == 7


# --------------------------------------------------------------------------------------------------------------------
# IMPALA.


@pytest.mark.slow
def test_impala_bad_value_then_corrected_sigint_and_second_training(tmp_path):
  """--num_actors=0 is one line, exit 2, nothing written (before: a 43-line traceback and run.json written); the
  corrected command runs in that directory; a second training there is refused while it runs; Ctrl-C (SIGINT)
  writes the checkpoint and exits 130 without a traceback (before: a 50-line KeyboardInterrupt traceback)."""
  run_dir = tmp_path / 'run'
  args = IMPALA[:-2] + ['--total_environment_frames=1000000', '--train_dir', str(run_dir)]
  code, _, err = launch('train', args + ['--num_actors=0'])
  assert code == launcher.EXIT_USAGE, err
  assert launcher_lines(err) == [
      'run_train: error: num_actors must be >= 1, got 0 (experiment.num_actors, --num_actors).'
  ]
  assert not run_dir.exists()
  result = second_training_then_signal(args, r'Frames \d+ / 1000000 ', signal.SIGINT)
  stopped = re.search(r'Interrupted at (\d+) environment frames of 1000000 \(SIGINT\)', result.err)
  assert stopped, result
  frames = int(stopped.group(1))
  assert frames > 0 and checkpoints_in(run_dir) == [0, frames]
  assert 'stopped by SIGINT after writing the checkpoint' in result.err


@pytest.mark.slow
def test_impala_divergence_stops_before_a_non_finite_checkpoint(tmp_path):
  """A learning rate of 1e30 makes the parameters diverge: the run stops with the non-finite values named, exit 5,
  no traceback, and every checkpoint holds finite values (before: an actor's 'action must be an integer index'
  error in 5 tracebacks)."""
  run_dir = tmp_path / 'run'
  result = train(IMPALA + ['--total_environment_frames=400', '--learning_rate=1e30', '--train_dir', str(run_dir)])
  assert result.code == launcher.EXIT_DIVERGED, result
  [line] = launcher_lines(result.err)
  assert line.startswith('run_train: error:') and 'non-finite' in line
  assert checkpoints_in(run_dir)
  for frames in checkpoints_in(run_dir):
    assert all_finite(run_dir / f'model.ckpt-{frames}'), frames


def _impala_learner(checkpoint_interval_s=600.):
  from scalable_agent import settings as settings_lib  # pylint: disable=g-import-not-at-top
  settings = settings_lib.Settings(level_name='builtin/find_object', width=12, height=12, batch_size=2, unroll_length=3,
                                   num_action_repeats=1, checkpoint_interval_s=checkpoint_interval_s)
  return (settings,) + settings_lib.make_agent_and_learner(settings, settings.level_name)


def _impala_manager(directory, agent, learner):
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  return checkpoints.make_checkpoint_manager(str(directory), agent, learner.optimizer, learner.num_environment_frames)


def test_impala_lost_index_and_corrupt_newest_resume_from_the_newest_readable(tmp_path):
  """Checkpoints at 0, 10, 20 frames, the index file lost and the newest truncated: the learner resumes from 10,
  sets 20 aside (kept, renamed), rebuilds the index file and overwrites nothing (before: "resuming", then a fresh
  start from 0 frames over model.ckpt-0; a truncated one: a 58-line traceback). `checkpoints.restore_latest`, as
  the learner calls it."""
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  _, agent, learner = _impala_learner()
  manager = _impala_manager(tmp_path, agent, learner)
  expected = {}
  for frames in (0, 10, 20):
    learner.num_environment_frames.assign(frames)
    for variable in agent.tf1_variables().values():
      variable.assign_add(tf.ones_like(variable))
    expected[frames] = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(agent, learner.optimizer).items()}
    checkpoints.save(manager)
  (tmp_path / 'checkpoint').unlink()
  os.truncate(tmp_path / 'model.ckpt-20.data-00000-of-00001', 1000)
  before = snapshot(tmp_path)
  _, agent, learner = _impala_learner()
  manager = _impala_manager(tmp_path, agent, learner)
  assert checkpoints.restore_latest(manager) == str(tmp_path / 'model.ckpt-10')
  assert int(learner.num_environment_frames.numpy()) == 10
  for name, value in checkpoints.tf1_variable_map(agent, learner.optimizer).items():
    np.testing.assert_array_equal(value.numpy(), expected[10][name], err_msg=name)
  after = snapshot(tmp_path)
  assert after['model.ckpt-20.data-00000-of-00001.corrupt'] == before['model.ckpt-20.data-00000-of-00001']
  assert_unchanged(before, after, [n for n in before if n.startswith(('model.ckpt-0.', 'model.ckpt-10.'))])
  assert manager.latest_checkpoint == str(tmp_path / 'model.ckpt-10')
  learner.num_environment_frames.assign(20)
  checkpoints.save(manager)  # the frame number of the corrupt one: it is not overwritten
  assert snapshot(
      tmp_path)['model.ckpt-20.data-00000-of-00001.corrupt'] == after['model.ckpt-20.data-00000-of-00001.corrupt']
  assert checkpoints_in(tmp_path) == [0, 10, 20] and checkpoints.restore_latest(manager).endswith('model.ckpt-20')
  # Only checkpoints set aside: a refusal, never a fresh start.
  for path in tmp_path.glob('model.ckpt-*.index'):
    path.unlink()
  (tmp_path / 'checkpoint').unlink()
  with pytest.raises(errors.RunDirectoryError, match='cannot be resumed: it holds no checkpoint'):
    checkpoints.restore_latest(_impala_manager(tmp_path, agent, learner))


def test_impala_save_on_a_full_disk(tmp_path):
  """Two 9.3 MB checkpoints fit a 24 MiB tmpfs, the third does not: one message naming the directory, the size
  needed and what is free; no `_temp` left; the previous checkpoint intact (before: a 75-line ResourceExhaustedError
  traceback and model.ckpt-0_temp/ left for ever)."""
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  disk = tmp_path / 'disk'
  mounted = mount_tmpfs(disk, 24)
  previous = resource.getrlimit(resource.RLIMIT_FSIZE), signal.getsignal(signal.SIGXFSZ)
  try:
    _, agent, learner = _impala_learner()
    manager = _impala_manager(disk, agent, learner)
    if not mounted:
      limit_file_size()  # in this process: each checkpoint (9.3 MB) is over the limit
    saved = []
    with pytest.raises(errors.RunDirectoryError) as info:
      for frames in (0, 10, 20):
        learner.num_environment_frames.assign(frames)
        saved.append(checkpoints.save(manager))
    message = str(info.value)
    assert f'writing a checkpoint into {disk} failed' in message and info.value.exit_code == launcher.EXIT_RUN_DIR
    assert not list(disk.glob('*_temp'))
    if mounted:
      assert 'the disk is full' in message and re.search(r'It needs about 9\.\d MB; \d+\.\d MB free', message)
      assert f'The previous checkpoint {disk}/model.ckpt-10 is intact' in message
      assert checkpoints_in(disk) == [0, 10] and all_finite(disk / 'model.ckpt-10')
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, previous[0])
    signal.signal(signal.SIGXFSZ, previous[1])
    if mounted:
      unmount(disk)


def test_impala_longer_rerun_continues_and_another_change_is_refused(tmp_path):
  """A rerun with only a longer total_environment_frames (or other checkpoint interval) continues the run and says
  the learning-rate decay follows the new horizon (before: refused as another configuration)."""
  run_dir = tmp_path / 'run'
  args = IMPALA + ['--total_environment_frames=60', '--train_dir', str(run_dir)]
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  first = launcher.plan('train', fv(['run_train.py'] + args), fv)
  launcher.write_manifest(run_dir, first.manifest)
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  longer = launcher.plan(
      'train',
      fv(['run_train.py'] + IMPALA[:-2] +
         ['--total_environment_frames=80', '--train_dir', str(run_dir)]), fv)
  assert longer.resumes and longer.continues == [
      'experiment.total_environment_frames: 60 -> 80', 'experiment.checkpoint_interval_s: 0 -> (default)'
  ]
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  with pytest.raises(launcher.LaunchError, match=r'another configuration.*\n  -experiment.batch_size = 2\n'
                     r'  \+experiment.batch_size = 4'):
    launcher.plan('train', fv(['run_train.py'] + args + ['--batch_size=4']), fv)


def test_learner_names_the_non_finite_step_and_tensors(tmp_path):
  """A NaN reward in a batch: the learner's step is stopped naming the losses and the variables it made non-finite,
  before any checkpoint of them."""
  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import progress as progress_lib  # pylint: disable=g-import-not-at-top
  settings, agent, learner = _impala_learner(checkpoint_interval_s=0.)
  progress = progress_lib.LearnerProgress(str(tmp_path), settings, learner, _impala_manager(tmp_path, agent, learner))
  progress.start()
  t, b = settings.unroll_length + 1, settings.batch_size
  rewards = np.zeros([t, b], np.float32)
  rewards[2, 1] = np.nan
  env_outputs = environments.StepOutput(
      reward=rewards, info=environments.StepOutputInfo(np.zeros([t, b], np.float32), np.zeros([t, b], np.int32)),
      done=np.zeros([t, b], bool), observation=(np.zeros([t, b, 12, 12, 3], np.uint8), np.full([t, b], '', object)))
  agent_outputs = agent_lib.AgentOutput(np.zeros([t, b], np.int32), np.zeros([t, b, agent.num_actions], np.float32),
                                        np.zeros([t, b], np.float32))
  batch = tf.nest.map_structure(tf.convert_to_tensor, (agent.initial_state(b), env_outputs, agent_outputs))
  metrics = {k: v.numpy() for k, v in learner.step(*batch).items()}
  with pytest.raises(learner_lib.NonFiniteError) as info:
    progress.after_step(metrics, [])
  message = str(info.value)
  assert 'learner step 1 of this run (from 0 environment frames)' in message
  assert 'total_loss = nan' in message and 'agent/batch_apply/' in message
  assert info.value.exit_code == launcher.EXIT_DIVERGED
  nonfinite = learner.nonfinite_variables()
  assert nonfinite and all(name.startswith('agent/') for name in nonfinite)
  assert checkpoints_in(tmp_path) == [0] and all_finite(tmp_path / 'model.ckpt-0')
  progress.close()


def test_impala_resumes_an_original_tf1_checkpoint(tmp_path):
  """An original (name-based) IMPALA checkpoint in the run directory: the learner resumes from it (agent, RMSProp
  slots, frame counter)."""
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  _, agent, learner = _impala_learner()
  for variable in agent.tf1_variables().values():
    variable.assign(tf.random.normal(variable.shape))
    learner.optimizer.slots_for(variable)[0].assign(tf.fill(variable.shape, 3.))
  checkpoints.export_tf1_checkpoint(str(tmp_path / 'model.ckpt'), agent, learner.optimizer, global_step=1280)
  expected = {name: v.numpy() for name, v in checkpoints.tf1_variable_map(agent, learner.optimizer).items()}
  _, other_agent, other = _impala_learner()
  assert checkpoints.restore_latest(_impala_manager(tmp_path, other_agent, other)) == str(tmp_path / 'model.ckpt-1280')
  assert int(other.num_environment_frames.numpy()) == 1280
  for name, value in checkpoints.tf1_variable_map(other_agent, other.optimizer).items():
    np.testing.assert_array_equal(value.numpy(), expected[name], err_msg=name)


def test_an_actor_reports_non_finite_logits(tmp_path):
  """An agent whose parameters diverged (NaN): the actor says its logits are non-finite instead of passing the
  action sampled from them to the environment (before: "action must be an integer index in [0, 4); got 4")."""
  from scalable_agent import actor as actor_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
  settings, agent, _ = _impala_learner()
  for variable in agent.trainable_variables:
    variable.assign(tf.fill(variable.shape, np.nan))
  constructor = environments.environment_constructor(settings.level_name, seed=1, width=12, height=12,
                                                     num_action_repeats=1)
  actor = actor_lib.Actor(settings.level_name, environments.FlowEnvironment(constructor.env_type(**constructor.kwargs)),
                          actor_lib.numpy_policy(agent), 3, actor_lib.initial_agent_state(),
                          actor_lib.initial_agent_output(agent.num_actions))
  with pytest.raises(learner_lib.NonFiniteError, match=r"the policy's logits are non-finite \(\[nan, nan"):
    actor.unroll()
