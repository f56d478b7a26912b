"""scripts/reproduce.py end to end on the real AntMaze configuration with tiny settings: two seeds, the kit killed
with SIGKILL mid-run while one seed's training is paused (it must be adopted, never started twice) and the other's
training is killed too (it must resume from its last full checkpoint); the same command then finishes both seeds,
evaluates every policy checkpoint exactly once and writes the aggregate, which is checked against a re-computation
from the seeds' results.json files. Also the Ray backend on a local Ray instance, and the user errors."""

import csv
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time

import numpy as np
from PIL import Image
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'scripts'))

import reproduce  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import figures.curves  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import plan as plans  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import processes  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import progress  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import protocol  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import seeds  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import status  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

EPISODE = 50
STEPS = 600  # 12 episodes of 50 steps: the runs stop at 700
POLICY_EVERY = 200  # policy checkpoints 200, 400, 600
MODES = ('eval1', 'eval2', 'eval3')
TINY = [
    '--gin_param', f'RESET_EPISODE_PERIOD = {EPISODE}', '--gin_param', 'train_uvf.initial_episodes = 1', '--gin_param',
    'train_uvf.batch_size = 16', '--gin_param', 'agent/CircularBuffer.buffer_size = 1000', '--gin_param',
    'meta/CircularBuffer.buffer_size = 200', '--gin_param', 'train_uvf.save_interval_secs = 0', '--gin_param',
    'train_uvf.log_every_n_steps = 100', '--gin_param', 'train_uvf.steps_per_call = 50'
]


def kit_command(root, seeds=2, extra=(), steps=STEPS):
  return [
      sys.executable,
      os.path.join(REPO, 'scripts', 'reproduce.py'), 'configs/ant_maze.gin', '--seeds',
      str(seeds), '--steps',
      str(steps), '--root',
      str(root), '--policy_every',
      str(POLICY_EVERY), '--eval_episodes', '2', '--poll_secs', '0.5', '--report_every', '0'
  ] + TINY + list(extra)


class Kit(object):
  """The kit as a child process whose output lines are collected by a thread."""

  def __init__(self, command, new_session=False):
    # SIGHUP at its default, as in a terminal, even under `nohup` (an ignored SIGHUP stays ignored in the kit).
    self.process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'),
        start_new_session=new_session,
        # noqa reason: signal settings of the child, before exec; no lock is taken.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # noqa: PLW1509
    self.lines, self._queue = [], queue.Queue()
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self):
    for line in self.process.stdout:
      self._queue.put(line)

  def output(self):
    while not self._queue.empty():
      self.lines.append(self._queue.get())
    return ''.join(self.lines)

  def wait_for(self, text, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
      if text in self.output():
        return
      assert self.process.poll() is None or text in self.output(), self.output()[-3000:]
      time.sleep(0.2)
    raise AssertionError(f'{text!r} not printed within {timeout} s:\n{self.output()[-3000:]}')


def wait_until(condition, what, timeout=300):
  deadline = time.time() + timeout
  while time.time() < deadline:
    value = condition()
    if value:
      return value
    time.sleep(0.1)
  raise AssertionError(f'timed out waiting for {what}')


def pid_of(root, seed, kind):
  with open(os.path.join(root, 'logs', f'seed_{seed}.{kind}.pid')) as f:
    return json.load(f)['pid']


def training_midway(root, seed):
  """The pid of the seed's training once it has written a full checkpoint and is not finished."""
  step = progress.full_checkpoint_step(os.path.join(root, f'seed_{seed}'))
  path = os.path.join(root, 'logs', f'seed_{seed}.train.pid')
  if step is None or step >= STEPS + 100 or not os.path.exists(path):
    return None
  return pid_of(root, seed, 'train')


@pytest.mark.slow
def test_kit_resumes_after_kill_9_and_aggregates(tmp_path, capsys):
  root = str(tmp_path / 'r')
  first, second, paused, layout = Kit(kit_command(root)), None, {}, {}
  try:
    # Freeze each seed's training as soon as it is midway (a full checkpoint written, not finished).
    def freeze():
      for seed in (0, 1):
        pid = None if seed in paused else training_midway(root, seed)
        if pid is not None:
          os.kill(pid, signal.SIGSTOP)
          paused[seed] = pid
          with open(f'/proc/{pid}/environ', 'rb') as f:
            environ = dict(item.split(b'=', 1) for item in f.read().split(b'\0') if b'=' in item)
          layout[seed] = (os.sched_getaffinity(pid), environ.get(b'TF_NUM_INTRAOP_THREADS'),
                          environ.get(b'TF_NUM_INTEROP_THREADS'))
      return len(paused) == 2

    wait_until(freeze, 'both trainings midway')
    # Two seeds at once on this machine's cores: each training pinned to its own cores, one TensorFlow thread per
    # core it has (docs/hiro/training.md, "Process layout").
    (cores0, intra0, inter0), (cores1, intra1, inter1) = layout[0], layout[1]
    assert not cores0 & cores1 and cores0 | cores1 <= os.sched_getaffinity(0)
    assert (intra0, intra1, inter0, inter1) == (str(len(cores0)).encode(), str(len(cores1)).encode(), b'1', b'1')
    assert f'1 TensorFlow thread on core {min(cores0)}' in first.output() or len(cores0) > 1
    first.process.kill()  # kill -9 of the kit: its children live on in their own sessions
    first.process.wait()
    os.kill(paused.pop(1), signal.SIGKILL)  # seed 1's training dies too (a crash)
    wait_until(lambda: processes.holder(os.path.join(root, 'seed_1')) is None, 'seed 1 gone', 30)
    resume_step = progress.full_checkpoint_step(os.path.join(root, 'seed_1'))

    second = Kit(kit_command(root))
    # Seed 0's training is alive (paused): the kit adopts it instead of starting a second one.
    second.wait_for(f'seed 0: training is running already (pid {paused[0]}, started by an earlier reproduce.py)')
    os.kill(paused.pop(0), signal.SIGCONT)
    assert second.process.wait(timeout=600) == 0, second.output()[-3000:]
  finally:
    for pid in paused.values():
      os.kill(pid, signal.SIGCONT)
    for kit in (first, second):
      if kit is not None and kit.process.poll() is None:
        kit.process.kill()
  out = second.output()
  assert 'seed 1: resuming training' in out and 'seed 0: done' in out and 'seed 1: done' in out

  # Seed 0 trained in one process; seed 1 was restarted and resumed from its last full checkpoint.
  with open(os.path.join(root, 'logs', 'seed_0.train.log')) as f:
    log0 = f.read()
  with open(os.path.join(root, 'logs', 'seed_1.train.log')) as f:
    log1 = f.read()
  assert log0.count('(a new run)') == 1 and 'resuming' not in log0
  assert log1.count('(a new run)') == 1
  assert log1.count('(resuming the run there)') == 1
  assert f'Resumed from {os.path.join(root, "seed_1")}/model.ckpt-{resume_step}' in log1
  expected_steps = [POLICY_EVERY * k for k in (1, 2, 3)]
  seed_rows = {}
  for seed in (0, 1):
    train_dir = os.path.join(root, f'seed_{seed}')
    assert progress.full_checkpoint_step(train_dir) == STEPS + 100
    assert list(progress.policy_steps(train_dir)) == expected_steps
    with open(os.path.join(train_dir, 'run.json')) as f:
      bindings = json.load(f)['bindings']
    assert bindings[-3:] == [
        f'train_uvf.seed = {seed}', f'train_uvf.save_policy_every_n_steps = {POLICY_EVERY}',
        f'train_uvf.num_episodes_train = {STEPS // EPISODE}'
    ]
    with open(os.path.join(train_dir, 'eval', 'results.json')) as f:
      rows = json.load(f)
    # Every checkpoint evaluated exactly once in every mode, over 2 episodes.
    assert sorted((r['step'], r['mode']) for r in rows) == [(s, m) for s in expected_steps for m in MODES]
    assert {r['num_episodes'] for r in rows} == {2}
    seed_rows[seed] = rows
    # No process is left behind.
    assert processes.holder(train_dir) is None and processes.holder(os.path.join(train_dir, 'eval')) is None

  # The aggregate, against a re-computation from the results files.
  with open(os.path.join(root, 'aggregate', 'table1.csv')) as f:
    table = {r['mode']: r for r in csv.DictReader(f)}
  with open(os.path.join(root, 'aggregate', 'curves.csv')) as f:
    curves = list(csv.DictReader(f))
  for mode in MODES:
    bests = [max(r['success_rate'] for r in rows if r['mode'] == mode) for rows in seed_rows.values()]
    assert float(table[mode]['best_success_mean']) == pytest.approx(np.mean(bests))
    assert float(table[mode]['best_success_se']) == pytest.approx(np.std(bests, ddof=1) / np.sqrt(2))
    assert (table[mode]['seeds'], table[mode]['complete'], table[mode]['budget']) == ('2', '2', str(STEPS))
    for step in expected_steps:
      distances = [
          r['mean_final_distance']
          for rows in seed_rows.values()
          for r in rows
          if r['mode'] == mode and r['step'] == step
      ]
      curve = [c for c in curves if c['mode'] == mode and int(c['step']) == step]
      assert len(curve) == 1 and curve[0]['seeds'] == '2'
      assert float(curve[0]['final_distance_mean']) == pytest.approx(np.mean(distances))
  assert table['eval3']['primary'] == '1' and float(table['eval3']['paper_success']) == 0.99
  # The PNG: a valid image, and what it shows (`figures.curves` stores it there) against the seeds' results.
  png_path = os.path.join(root, 'aggregate', 'ant_maze.png')
  with Image.open(png_path) as image:
    image.load()
    assert image.format == 'PNG' and image.size[0] == 1000
    size = list(image.size)
  drawn = figures.curves.read_png(png_path)['description']
  assert drawn['size'] == size
  assert drawn['title'] == f'AntMaze (ant_maze): 2 seeds, {STEPS} steps; paper 0.99 ± 0.01 at 10M (Table 1)'
  assert [p['title'].split(' (goal')[0] for p in drawn['panels']
         ] == ['success rate, eval3', 'success rate, eval1', 'success rate, eval2', 'mean final distance, eval3']
  for panel, mode, key in zip(drawn['panels'], ('eval3', 'eval1', 'eval2', 'eval3'),
                              ('success_rate',) * 3 + ('mean_final_distance',)):
    assert [(s['label'], s['points'], s['x']) for s in panel['series'][:3]] == [('seed 0', 3, expected_steps[::2]),
                                                                                ('seed 1', 3, expected_steps[::2]),
                                                                                ('mean over 2 seeds ± s.e.', 3,
                                                                                 expected_steps[::2])]
    means = [
        np.mean([r[key]
                 for rows in seed_rows.values()
                 for r in rows
                 if r['mode'] == mode and r['step'] == step])
        for step in expected_steps
    ]
    assert panel['series'][2]['y'] == [pytest.approx(min(means)), pytest.approx(max(means))]
  assert drawn['panels'][0]['hlines'][0]['value'] == 0.99

  # Held out: each seed's best eval3 policy (re-computed here: the highest success, the earliest of equal ones) and
  # its final one (step 600) evaluated again, eval3 only, on 100 episodes from evaluation seed 1000.
  best_heldout = []
  for seed, rows in seed_rows.items():
    eval3 = sorted((r for r in rows if r['mode'] == 'eval3'), key=lambda r: (-r['success_rate'], r['step']))
    best_step = eval3[0]['step']
    heldout_dir = os.path.join(root, f'seed_{seed}', 'heldout')
    with open(os.path.join(heldout_dir, 'results.json')) as f:
      heldout = json.load(f)
    assert sorted(r['step'] for r in heldout) == sorted({best_step, STEPS})
    assert {(r['mode'], r['num_episodes']) for r in heldout} == {('eval3', 100)}
    with open(os.path.join(heldout_dir, 'run.json')) as f:
      assert 'evaluate.seed = 1000' in json.load(f)['bindings']
    best_heldout.append(next(r['success_rate'] for r in heldout if r['step'] == best_step))
  assert float(table['eval3']['heldout_best_mean']) == pytest.approx(np.mean(best_heldout))
  assert table['eval3']['seeds_reaching_threshold'] == str(sum(v >= 0.5 for v in best_heldout))
  with open(os.path.join(root, 'reproduce.json')) as f:
    assert len(json.load(f)['launches']) == 2

  # --export_best: the best eval3 policy over both seeds (re-computed here from the results files) is copied out;
  # its re-evaluation with the recorded command, in a fresh eval directory, gives the same result.
  expected = max(((seed, r) for seed, rows in seed_rows.items() for r in rows if r['mode'] == 'eval3'), key=lambda sr:
                 (sr[1]['success_rate'], -sr[1]['mean_final_distance'], -sr[1]['step'], -sr[0]))
  export = str(tmp_path / 'best')
  assert reproduce.main(kit_command(root, extra=['--export_best', export])[2:]) == 0
  assert f'seed {expected[0]}, step {expected[1]["step"]:,}' in capsys.readouterr().out
  with open(os.path.join(export, 'best_policy.json')) as f:
    info = json.load(f)
  assert (info['seed'], info['step'], info['mode']) == (expected[0], expected[1]['step'], 'eval3')
  assert info['mean_final_distance'] == expected[1]['mean_final_distance']
  command = shlex.split(info['reevaluate'])
  command[0] = sys.executable
  command[command.index('--eval_dir') + 1] = str(tmp_path / 'reevaluated')
  assert command[command.index('--checkpoint_path') + 1] == os.path.join(export, f'model.ckpt-{info["step"]}')
  again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert again.returncode == 0, again.stderr[-3000:]
  with open(tmp_path / 'reevaluated' / 'results.json') as f:
    (again_row,) = [r for r in json.load(f) if r['mode'] == 'eval3']
  assert (again_row['step'], again_row['success_rate'],
          again_row['mean_final_distance']) == (info['step'], info['success_rate'], info['mean_final_distance'])

  # --status (in this process: the same main), read-only: both seeds done, 3/3 evaluated.
  before = sorted(os.listdir(root))
  assert reproduce.main(kit_command(root, extra=['--status'])[2:]) == 0
  lines = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1] in ('0', '1')]
  assert [line[:5] for line in lines] == [['0', 'done', '700', '700', '3/3'], ['1', 'done', '700', '700', '3/3']]
  assert sorted(os.listdir(root)) == before

  # Another configuration in the same root is refused before anything starts; nothing changes.
  with open(os.path.join(root, 'seed_0', 'run.json')) as f:
    manifest = f.read()
  assert reproduce.main(kit_command(root, extra=['--gin_param', 'train_uvf.batch_size = 8'])[2:]) == 2
  error = capsys.readouterr().err
  assert 'reproduce: error: seed 0 (train):' in error and 'holds a run of another configuration' in error
  with open(os.path.join(root, 'seed_0', 'run.json')) as f:
    assert f.read() == manifest
  assert sorted(os.listdir(root)) == before


@pytest.mark.slow
def test_kit_stop_while_the_kit_runs_stops_every_seed(tmp_path):
  """`--stop` beside a running kit: the stopped trainings are not restarted as crashes, the queued seed never
  starts, and the kit exits with status 130, leaving no process."""
  root = str(tmp_path / 'r')
  steps = 100 * STEPS  # long enough to be stopped midway, even on a loaded machine
  kit = Kit(kit_command(root, seeds=3, extra=['--parallel', '2'], steps=steps))
  try:
    wait_until(lambda: all(progress.full_checkpoint_step(os.path.join(root, f'seed_{seed}')) for seed in (0, 1)),
               'both trainings midway')
    stop = subprocess.run(kit_command(root, seeds=3, extra=['--parallel', '2', '--stop'], steps=steps), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert stop.returncode == 0, stop.stderr
    assert kit.process.wait(timeout=300) == 130, kit.output()[-3000:]
  finally:
    if kit.process.poll() is None:
      kit.process.kill()
  out = kit.output()
  assert 'seed 0: train was stopped (exit status 130)' in out or 'seed 1: train was stopped (exit status 130)' in out, out
  assert 'restarting it' not in out and 'seed 2:' not in out.replace('seed 2: stopped.', '')
  assert not os.path.exists(os.path.join(root, 'logs', 'seed_2.train.log'))
  for seed in (0, 1):
    assert progress.full_checkpoint_step(os.path.join(root, f'seed_{seed}')) < steps + 100  # stopped midway
    assert processes.holder(os.path.join(root, f'seed_{seed}')) is None
    assert processes.holder(os.path.join(root, f'seed_{seed}', 'eval')) is None


@pytest.mark.slow
def test_kit_stops_on_sighup_to_its_process_group_and_resumes(tmp_path):
  """A closed terminal: SIGHUP to the kit's process group. The kit stops its seeds (their trainings write their
  checkpoints: exit 130 on the kit's SIGINT), exits with 129 and leaves no process; the same command resumes each
  seed from its checkpoint."""
  root = str(tmp_path / 'r')
  steps = 100 * STEPS  # long enough to be stopped midway, even on a loaded machine
  kit = Kit(kit_command(root, seeds=2, extra=['--parallel', '2'], steps=steps), new_session=True)
  try:
    wait_until(lambda: all(progress.full_checkpoint_step(os.path.join(root, f'seed_{seed}')) for seed in (0, 1)),
               'both trainings midway')
    os.killpg(kit.process.pid, signal.SIGHUP)
    assert kit.process.wait(timeout=300) == 129, kit.output()[-3000:]
  finally:
    if kit.process.poll() is None:
      kit.process.kill()
  out = kit.output()
  assert 'stopping (SIGHUP): the processes the kit started get SIGINT (SIGTERM where SIGINT is ignored; the same command resumes).' in out, out
  assert 'Traceback' not in out and 'restarting it' not in out, out
  stopped_at = {}
  for seed in (0, 1):
    directory = os.path.join(root, f'seed_{seed}')
    assert processes.holder(directory) is None and processes.holder(directory + '/eval') is None
    with open(os.path.join(root, 'logs', f'seed_{seed}.train.log')) as f:
      log = f.read()
    assert 'run_train: stopped by SIGINT after writing the checkpoint' in log, log[-2000:]
    stopped_at[seed] = progress.full_checkpoint_step(directory)
    assert 0 < stopped_at[seed] < steps + 100
  again = Kit(kit_command(root, seeds=2, extra=['--parallel', '2'], steps=steps))
  try:
    for seed in (0, 1):
      wait_until(
          lambda seed=seed: f'Resumed from {root}/seed_{seed}/model.ckpt-{stopped_at[seed]} at global step '
          f'{stopped_at[seed]}.' in open(os.path.join(root, 'logs', f'seed_{seed}.train.log')).read(),
          f'seed {seed} resumed')
  finally:
    again.process.send_signal(signal.SIGINT)
    assert again.process.wait(timeout=300) == 130, again.output()[-3000:]


@pytest.mark.slow
def test_kit_user_errors(tmp_path):
  result = subprocess.run(kit_command(tmp_path, extra=['--gin_param', 'train_uvf.seed = 3']), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert 'the kit sets train_uvf.seed itself (use --seeds)' in result.stderr and 'Traceback' not in result.stderr
  assert not os.listdir(tmp_path)
  # Nothing evaluated yet: nothing to export, and nothing is written.
  result = subprocess.run(kit_command(tmp_path / 'r', extra=['--export_best', str(tmp_path / 'best')]), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert 'is evaluated in eval3 within 600 steps yet: nothing to export' in result.stderr
  assert 'Traceback' not in result.stderr and not os.listdir(tmp_path)


@pytest.mark.slow
def test_kit_user_errors_of_only_seeds_and_results_from(tmp_path):
  """Bad --only_seeds / --results_from values: one line naming the problem, exit status 2, nothing written."""
  wrong_task = tmp_path / 'push.csv'  # an AntPush table: its eval2 goal is (0, 19), not AntMaze's (16, 16)
  wrong_task.write_text('seed,mode,goal,step,success_rate,mean_final_distance,num_episodes\n'
                        '0,eval2,"[0.0, 19.0]",200,0.0,19.0,2\n')
  not_a_table = tmp_path / 'x.csv'
  not_a_table.write_text('step,success\n200,0.5\n')
  for extra, message in ((['--only_seeds', '2'], '--only_seeds 2: give seeds of 0..1 (--seeds 2)'),
                         (['--only_seeds', 'one'], '--only_seeds one: give seeds of 0..1'),
                         (['--results_from', str(tmp_path / 'none.csv')], 'none.csv: no such file'),
                         (['--results_from', str(wrong_task)], "its eval2 goal [0.0, 19.0] is not this task's"),
                         (['--results_from',
                           str(not_a_table)], 'not a per_seed.csv of the kit (no column seed, mode, goal')):
    result = subprocess.run(kit_command(tmp_path / 'r', extra=extra), cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2 and message in result.stderr, (extra, result.stderr)
    assert 'Traceback' not in result.stderr and not os.path.exists(tmp_path / 'r')


@pytest.mark.slow
def test_kit_runs_only_some_seeds_and_aggregates_seeds_run_elsewhere(tmp_path, capsys):
  """--only_seeds 1 with --results_from: seed 0 was run on another machine (its per_seed.csv rows, hand-written
  here); the kit trains and evaluates seed 1 only, never touches seed 0, and the aggregate counts both."""
  root = str(tmp_path / 'r')
  imported = tmp_path / 'per_seed.csv'
  goals = {'eval1': '"[16.0, 0.0]"', 'eval2': '"[16.0, 16.0]"', 'eval3': '"[0.0, 16.0]"'}
  seed0 = {
      ('eval1', 200): 0.5,
      ('eval1', 400): 0.0,
      ('eval1', 600): 0.5,
      ('eval2', 200): 0.0,
      ('eval2', 400): 0.0,
      ('eval2', 600): 0.5,
      ('eval3', 200): 0.0,
      ('eval3', 400): 1.0,
      ('eval3', 600): 0.5
  }
  imported.write_text('seed,mode,goal,step,success_rate,mean_final_distance,num_episodes\n' +
                      ''.join(f'0,{mode},{goals[mode]},{step},{success},{0.0 if success == 1.0 else 3.0},2\n'
                              for (mode, step), success in seed0.items()))
  extra = ['--only_seeds', '1', '--results_from', str(imported)]
  kit = Kit(kit_command(root, extra=extra))
  assert kit.process.wait(timeout=900) == 0, kit.output()[-3000:]
  out = kit.output()
  assert 'seeds 0..1 (this launch: 1)' in out and 'seed 1: done' in out and 'seed 0:' not in out
  assert sorted(os.listdir(root)) == ['.reproduce.lock', 'aggregate', 'logs', 'reproduce.json', 'seed_1']
  assert not any(name.startswith('seed_0') for name in os.listdir(os.path.join(root, 'logs')))
  with open(os.path.join(root, 'seed_1', 'eval', 'results.json')) as f:
    rows1 = json.load(f)
  assert sorted((r['step'], r['mode']) for r in rows1) == [(s, m) for s in (200, 400, 600) for m in MODES]

  # The aggregate over both seeds, against a re-computation: seed 0's best from the table above, seed 1's from its
  # results file.
  with open(os.path.join(root, 'aggregate', 'table1.csv')) as f:
    table = {r['mode']: r for r in csv.DictReader(f)}
  for mode in MODES:
    bests = [
        max(v for (m, _), v in seed0.items() if m == mode),
        max(r['success_rate'] for r in rows1 if r['mode'] == mode)
    ]
    assert float(table[mode]['best_success_mean']) == pytest.approx(np.mean(bests))
    assert float(table[mode]['best_success_se']) == pytest.approx(np.std(bests, ddof=1) / np.sqrt(2))
    assert (table[mode]['seeds'], table[mode]['complete']) == ('2', '2')
  assert json.loads(table['eval3']['best_per_seed'])['0'] == {'success': 1.0, 'step': 400, 'last_step': 600}

  # --status: seed 0 is shown as run elsewhere, with its imported evaluations.
  assert reproduce.main(kit_command(root, extra=extra + ['--status'])[2:]) == 0
  lines = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1] in ('0', '1')]
  assert lines[0][:6] == ['0', 'run', 'elsewhere', '(--results_from)', '600', '700'] and lines[0][6] == '3/3'
  assert lines[1][:5] == ['1', 'done', '700', '700', '3/3']

  # --export_best: the best eval3 policy is seed 0's (1.0 at distance 0), whose checkpoint is not here: refused,
  # nothing written.
  export = tmp_path / 'best'
  assert reproduce.main(kit_command(root, extra=extra + ['--export_best', str(export)])[2:]) == 2
  error = capsys.readouterr().err
  assert "seed 0's at step 400 (success 1.00), evaluated elsewhere" in error and not export.exists()


# A program that writes a run directory as run_train.py / run_eval.py do: it forks first (as console's stderr relay,
# with the same command line), then takes the directory's lock (`rundir.lock.RunLock`) and holds it until stopped.
HOLDER = """import os, sys, time
sys.path.insert(0, sys.argv[2])
from rundir import lock
if os.fork() == 0:
  time.sleep(120)
  os._exit(0)
lock.RunLock(sys.argv[1]).acquire()
print('held', flush=True)
time.sleep(120)
"""


def hold(tmp_path, run_dir, kit_spec=None):
  """A process holding `run_dir`'s lock: started as the kit starts its processes (its pid file written) for the seed
  of `kit_spec`, or by hand. Returns its Popen once the lock is held."""
  script = tmp_path / 'holder.py'
  script.write_text(HOLDER)
  os.makedirs(run_dir, exist_ok=True)
  command = [sys.executable, str(script), str(run_dir), REPO]
  if kit_spec is not None:
    process = seeds.start(kit_spec, 'train', command)
  else:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)
  wait_until(lambda: (processes.holder(run_dir) or {}).get('pid') == process.pid, 'the lock held', 60)
  return process


def kill_group(process):
  """SIGKILL to the process group of `process` (itself and its fork), then reaps it."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait()


def seed_spec(root, seed, run_length=3_000_100):
  train_dir = os.path.join(root, f'seed_{seed}')
  return seeds.SeedSpec(seed=seed, train_dir=train_dir, eval_dir=os.path.join(train_dir, 'eval'), train_command=[],
                        eval_command=[], log_dir=os.path.join(root, 'logs'), run_length=run_length, modes=['eval3'],
                        poll_secs=0.5, max_restarts=0, detach=True, repo_root=REPO,
                        heldout_dir=os.path.join(train_dir, 'heldout'), budget=3_000_000, primary_mode='eval3')


def test_processes_are_found_by_the_lock_they_hold_not_their_fork(tmp_path, capsys):
  """The holder of a run directory's lock is its writer: the process that took the lock, not the child it forked
  before (same command line); the kit's own (its pid file) is stopped by --stop, one started by hand is left."""
  spec = seed_spec(str(tmp_path / 'r'), 0)
  process = hold(tmp_path, spec.train_dir, kit_spec=spec)
  by_hand = None
  try:
    record = processes.holder(spec.train_dir)
    assert (record['pid'], record['command']) == (process.pid, [str(tmp_path / 'holder.py'), spec.train_dir, REPO])
    assert processes.started_by_kit(spec.pid_file('train'), record)
    assert not processes.started_by_kit(spec.pid_file('eval'), record)  # no record of the kit there
    assert processes.holder(spec.eval_dir) is None  # nothing holds it (no lock file)
    other = seed_spec(str(tmp_path / 'r'), 1)
    by_hand = hold(tmp_path, other.train_dir)
    assert not processes.started_by_kit(other.pid_file('train'), processes.holder(other.train_dir))
    # --stop: the kit's process gets SIGINT and has released its lock when it returns; the other is left running.
    for one in (spec, other):
      seeds.stop_started(one, 'train', report=print)
    out = capsys.readouterr().out
    assert f'seed 0: stopping train (pid {process.pid}).' in out
    assert f'seed 1: train pid {by_hand.pid} was not started by the kit; left running.' in out
    assert processes.holder(spec.train_dir) is None and process.wait(timeout=30) != 0
    assert processes.holder(other.train_dir)['pid'] == by_hand.pid
  finally:
    for one in (process, by_hand):
      if one is not None:
        kill_group(one)
  assert processes.holder(other.train_dir) is None  # a killed holder's lock is free at once


# A run_train.py stand-in started with SIGINT ignored, as a kit started by `cmd &` in a script starts its programs:
# it keeps SIGINT ignored and stops on SIGTERM with 128 + 15, as the launcher does.
IGNORES_SIGINT = """import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
print('ready', flush=True)
time.sleep(120)
"""


def test_stop_sends_sigterm_to_a_program_that_ignores_sigint(tmp_path):
  script = tmp_path / 'ignores.py'
  script.write_text(IGNORES_SIGINT)
  process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
  try:
    assert process.stdout.readline().strip() == 'ready'
    assert processes.ignores(process.pid, signal.SIGINT) and not processes.ignores(process.pid, signal.SIGTERM)
    start = time.time()
    processes.stop(process.pid, wait_s=30)  # the default request, SIGINT, would be ignored
    assert process.wait(timeout=30) == 143 and time.time() - start < 20
  finally:
    if process.poll() is None:
      kill_group(process)
  assert not processes.ignores(os.getpid(), signal.SIGINT)  # pytest handles SIGINT itself


def test_status_reads_the_progress_file_the_locks_and_the_checkpoints(tmp_path):
  """--status without log text or /proc: seed 0 runs (it holds its lock) and has written progress.json; seed 1 is a
  run of older code (no progress.json), stopped: its checkpoints say where; seed 2 has not started."""
  root = str(tmp_path / 'r')
  specs = [seed_spec(root, seed) for seed in range(3)]
  now = time.time()
  os.makedirs(specs[0].train_dir)
  with open(os.path.join(specs[0].train_dir, 'progress.json'), 'w') as f:
    json.dump(
        {
            'step': 122_000,
            'total_steps': 3_000_100,
            'rate': 200.0,
            'eta_s': 14_390.5,
            'time': now - 5,
            'pid': 1,
            'state': 'running'
        }, f)
  os.makedirs(os.path.join(specs[1].train_dir, 'policy'))
  for directory, step in ((os.path.join(specs[1].train_dir, 'policy'), 100_000), (specs[1].train_dir, 120_000)):
    for suffix in ('.index', '.data-00000-of-00001'):
      open(os.path.join(directory, f'model.ckpt-{step}{suffix}'), 'wb').close()
  with open(os.path.join(specs[1].train_dir, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-120000"\n')
  protocol_ = protocol.Protocol(task='AntMaze', modes=('eval3',), goals={'eval3': [0., 16.]}, primary_mode='eval3',
                                max_steps_per_episode=500, eval_episodes=50, paper=protocol.PAPER_TABLE1['AntMaze'])
  plan = plans.Plan(root=root, name='ant_maze', protocol=protocol_, specs=specs, resumes={}, manifest={}, parallel=1,
                    budget=3_000_000)
  process = hold(tmp_path, specs[0].train_dir, kit_spec=specs[0])
  try:
    lines = status.status_table(plan, now).splitlines()
  finally:
    kill_group(process)
  # 122,000 steps at now - 5 at 200 steps/s: ~123,000 now; (3,000,100 - 123,000) / 200 s = 3h59m left.
  assert lines[1].split()[:9] == [
      '0', 'training', '(pid', f'{process.pid})', '~123000', '3000100', '200', '3h59m', '0/0'
  ]
  assert lines[2].split()[:6] == ['1', 'stopped', '(resumes', 'at', '120000)', '120000']
  assert lines[2].split()[7] == '0/1'  # its policy checkpoint, not evaluated
  assert lines[3].split()[:4] == ['2', 'not', 'started', '0']


def test_kit_prints_no_third_party_banner(tmp_path):
  """`--dry_run` plans with the launcher (TensorFlow, tf-agents, gym imported): only the kit's lines are printed."""
  result = subprocess.run(kit_command(tmp_path, extra=['--dry_run']), cwd=REPO, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr
  assert 'reproduce:' in result.stdout
  assert 'Gym has been unmaintained' not in result.stdout + result.stderr


@pytest.mark.slow
def test_ray_backend_on_a_local_ray_instance(tmp_path):
  """--backend ray: the seed's job runs as a Ray task on a local Ray instance (ray.init in the kit). CI installs
  requirements-ray.txt; elsewhere this needs it too."""
  if not os.environ.get('CI'):
    pytest.importorskip('ray', reason='the Ray backend needs pip install -r requirements-ray.txt')
  root = str(tmp_path / 'ray')
  command = kit_command(root, seeds=1, extra=['--backend', 'ray', '--parallel', '1'], steps=200)
  result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, RAY_AUTH_MODE='disabled'))
  out = result.stdout + result.stderr
  assert result.returncode == 0, out[-3000:]
  assert 'seed 0: submitted to Ray.' in out
  assert '(run_seed pid=' in out  # the job's own messages come from a Ray worker process
  train_dir = os.path.join(root, 'seed_0')
  assert progress.full_checkpoint_step(train_dir) == 300
  with open(os.path.join(train_dir, 'eval', 'results.json')) as f:
    rows = json.load(f)
  assert sorted((r['step'], r['mode']) for r in rows) == [(200, m) for m in MODES]
  assert os.path.exists(os.path.join(root, 'aggregate', 'table1.csv'))
  assert processes.holder(train_dir) is None and processes.holder(os.path.join(train_dir, 'eval')) is None
