"""Stopping a run the way tools stop it (docs/running.md, "Stop signals"): real `run_train.py` processes,
each started in a session of its own as a terminal, `timeout` or a scheduler starts it, and stopped by

1. `timeout` expiring (its alarm: `timeout` then sends SIGTERM to the training and to its whole process group);
2. SIGTERM to the process group (SLURM at the time limit and `scancel`, systemd, `docker stop` of a shell entry
   point);
3. SIGHUP to the process group (a terminal closed, an SSH connection dropped);
4. SIGTERM to the group, then SIGKILL after a 30 s grace period (SLURM's KillWait, Kubernetes' default);
5. the console's stderr filter (the relay process) killed alone with SIGKILL, then SIGTERM to the training.

Each stop must write the checkpoint, print the stop lines, exit with the status of that stop, and the same command
must resume from that checkpoint: the cases run one after the other in one run directory, each start checking that
it resumed from the previous stop's checkpoint. HIRO: AntMaze with 50-step episodes and small buffers; IMPALA: the
builtin find_object level, 2 actor threads with their 2 environment processes (in the training's process group).
"""

import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import time

import pytest

import launcher

REPO = launcher.REPO_ROOT
GRACE_S = 30  # SLURM's KillWait and Kubernetes' terminationGracePeriodSeconds, by default

HIRO = ['configs/ant_maze.gin'] + [
    a for b in [
        'every_n_steps.n = 50', 'every_n_episodes.steps_per_episode = 50', 'train_uvf.max_steps_per_episode = 50',
        'train_uvf.initial_episodes = 1', 'train_uvf.batch_size = 16', 'agent/CircularBuffer.buffer_size = 1000',
        'meta/CircularBuffer.buffer_size = 200', 'train_uvf.seed = 0', 'train_uvf.log_every_n_steps = 50',
        'train_uvf.save_policy_every_n_steps = 100', 'train_uvf.steps_per_call = 50',
        'train_uvf.num_episodes_train = 100000'
    ] for a in ('--gin_param', b)
]
IMPALA = [
    'configs/impala_builtin.gin', '--num_actors=2', '--batch_size=2', '--unroll_length=5', '--width=12', '--height=12',
    '--total_environment_frames=100000000'
]


class Run:
  """`run_train.py ARGS` in a new session (its own process group), under `prefix` (e.g. `timeout 600`), output to
  files."""
  started = []  # every Run of the current test (`_no_process_left` kills what a failed test left running)

  def __init__(self, log_dir, name, args, prefix=()):
    self.out, self.err = log_dir / f'{name}.out', log_dir / f'{name}.err'
    with open(self.out, 'w') as out, open(self.err, 'w') as err:
      # SIGHUP at its default in the run, as in a terminal, even when these tests run under `nohup` (which
      # leaves it ignored, and an ignored SIGHUP stays ignored: the launcher's rule for `nohup`).
      self.process = subprocess.Popen(
          list(prefix) + [sys.executable, 'run_train.py'] + list(args),
          cwd=REPO,
          stdout=out,
          stderr=err,
          start_new_session=True,
          # noqa reason: signal settings of the child, before exec; no lock is taken.
          preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # noqa: PLW1509
    self.pid = self.process.pid
    Run.started.append(self)

  def text(self):
    return self.out.read_text() + self.err.read_text()

  def wait_for(self, pattern, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and self.process.poll() is None:
      found = re.search(pattern, self.text())
      if found:
        return found
      time.sleep(.2)
    raise AssertionError(f'{pattern!r} did not show within {timeout} s:\n{self.report()}')

  def wait(self, timeout=300):
    """Waits for the exit; returns (exit status, seconds waited)."""
    start = time.monotonic()
    try:
      self.process.wait(timeout=timeout)
    finally:
      if self.process.poll() is None:
        os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()
    return self.process.returncode, time.monotonic() - start

  def report(self):
    return f'exit {self.process.poll()}\n--- stdout\n{self.out.read_text()[-3000:]}\n--- stderr\n' \
           f'{self.err.read_text()[-4000:]}'


@pytest.fixture(autouse=True)
def _no_process_left():
  """After each test, even a failed one: the process groups of its runs killed, their relays with them."""
  yield
  for run in Run.started:
    relays = [pid for pid, (parent, group) in _processes().items() if parent == run.pid and group == pid]
    for group in [run.pid] + relays:
      try:
        os.killpg(group, signal.SIGKILL)
      except ProcessLookupError:
        pass
    run.process.wait()
  Run.started.clear()


def _processes():
  """{PID: (parent PID, process group)} of the live processes (zombies left out)."""
  processes = {}
  for entry in Path('/proc').iterdir():
    if entry.name.isdigit():
      try:
        state, parent, group = (entry / 'stat').read_text().rsplit(')', 1)[1].split()[:3]
      except (OSError, ValueError):
        continue
      if state != 'Z':
        processes[int(entry.name)] = (int(parent), int(group))
  return processes


def relay_pid(training_pid):
  """The console relay of a training: its child that leads a process group of its own."""
  relays = [pid for pid, (parent, group) in _processes().items() if parent == training_pid and group == pid]
  assert len(relays) == 1, _processes()
  return relays[0]


def process_group_members(pgid):
  return [pid for pid, (_, group) in _processes().items() if group == pgid]


def _checkpoint_steps(run_dir):
  return sorted(
      int(m.group(1)) for m in (re.match(r'model\.ckpt-(\d+)\.index$', p.name) for p in Path(run_dir).iterdir()) if m)


def _stop_cases(tmp_path, args, ready, stopped_line, resumed_line):
  """Runs the five stops of the module docstring one after the other in one run directory. `ready`: a pattern of the
  output once training runs; `stopped_line(signal name)`: the pattern of the system's own stop line, whose group 1 is
  the step or frame count of the checkpoint written; `resumed_line(count)`: what a start prints when it resumes from
  that checkpoint. Returns {case: seconds from the signal to the exit}."""
  run_dir = tmp_path / 'run'
  args = list(args) + ['--train_dir', str(run_dir)]
  times, resumed_from = {}, None

  def start(name, prefix=()):
    run = Run(tmp_path, name, args, prefix)
    found = run.wait_for(ready)
    if resumed_from is not None:
      assert re.search(resumed_line(resumed_from), run.text()), run.report()
    return run, found

  def check_stop(run, name, code, signal_name, waited):
    nonlocal resumed_from
    text = run.text()
    assert code == expected_code(name, signal_name), run.report()
    assert 'Traceback' not in text, run.report()
    assert f'run_train: {signal_name} received: stopping at the next safe point and writing a checkpoint' in text
    assert f'run_train: stopped by {signal_name} after writing the checkpoint; the same command resumes the run.' \
        in text, run.report()
    stopped = re.search(stopped_line(signal_name), text)
    assert stopped, run.report()
    count = int(stopped.group(1))
    assert count in _checkpoint_steps(run_dir) and count == max(_checkpoint_steps(run_dir)), run.report()
    assert resumed_from is None or count >= resumed_from
    resumed_from = count
    times[name] = waited
    deadline = time.monotonic() + 10  # (multiprocessing's resource tracker ends once the learner's pipe closes)
    while process_group_members(run.pid) and time.monotonic() < deadline:
      time.sleep(.1)
    assert not process_group_members(run.pid), f'{name}: processes of the group left'

  def expected_code(name, signal_name):
    return 124 if name == 'timeout' else 128 + getattr(signal, signal_name)

  # 1. `timeout` expires: SIGALRM is its timer, which makes it send SIGTERM to the training and then to its group.
  run, _ = start('timeout', ['timeout', '3600'])
  sent = time.monotonic()
  os.kill(run.pid, signal.SIGALRM)
  code, _ = run.wait()
  check_stop(run, 'timeout', code, 'SIGTERM', time.monotonic() - sent)

  # 2. and 3. SIGTERM, then SIGHUP, to the process group.
  for name, signum in (('group SIGTERM', signal.SIGTERM), ('group SIGHUP', signal.SIGHUP)):
    run, _ = start(name)
    os.killpg(run.pid, signum)
    code, waited = run.wait()
    check_stop(run, name, code, signum.name, waited)

  # 4. SIGTERM to the group, SIGKILL GRACE_S later if anything of it is still alive: it must have stopped by then.
  run, _ = start('grace')
  sent = time.monotonic()
  os.killpg(run.pid, signal.SIGTERM)
  try:
    run.process.wait(timeout=GRACE_S)
  except subprocess.TimeoutExpired:
    pass
  waited = time.monotonic() - sent
  if process_group_members(run.pid):
    os.killpg(run.pid, signal.SIGKILL)
  code, _ = run.wait()
  assert code != -signal.SIGKILL, f'not stopped within the {GRACE_S} s grace period\n{run.report()}'
  check_stop(run, 'grace', code, 'SIGTERM', waited)

  # 5. The relay killed alone: the training notices, prints from then on without it, and still stops cleanly.
  run, _ = start('relay killed')
  relay = relay_pid(run.pid)
  os.kill(relay, signal.SIGKILL)
  run.wait_for(rf'warning: the console filter of TensorFlow\'s native log lines \(PID {relay}\) killed by SIGKILL; '
               r'its lines are shown from here, the run goes on\.')
  time.sleep(1)
  assert run.process.poll() is None, run.report()
  os.kill(run.pid, signal.SIGTERM)
  code, waited = run.wait()
  check_stop(run, 'relay killed', code, 'SIGTERM', waited)

  # The same command resumes from the last stop's checkpoint.
  run, _ = start('resume')
  os.killpg(run.pid, signal.SIGINT)
  code, _ = run.wait()
  check_stop(run, 'resume', code, 'SIGINT', 0)
  return times


# Per system: its arguments, a pattern of its output once it trains, its stop line (group 1: the step or frame count
# of the checkpoint written) by signal name, and what it prints when it resumes from that count.
SYSTEMS = {
    'hiro': (HIRO, r'global step \d+ / ',
             lambda name: rf'{name}: stopped at global step (\d+) of 5000100; full checkpoint \S+model\.ckpt-\1 '
             r'written\.', lambda step: rf'Resumed from \S+/model\.ckpt-{step} at global step {step}\.'),
    'impala': (IMPALA, r'Frames \d+ / 100000000 ',
               lambda name: rf'Interrupted at (\d+) environment frames of 100000000 \({name}\)\. Checkpoint: '
               r'\S+model\.ckpt-\1', lambda frames: rf'resuming at {frames} environment frames'),
}


@pytest.mark.parametrize('system', sorted(SYSTEMS))
@pytest.mark.slow
def test_stops_by_timeout_group_signals_grace_and_a_dead_relay(system, tmp_path):
  times = _stop_cases(tmp_path, *SYSTEMS[system])
  assert max(times.values()) < GRACE_S, times


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_relay_outlives_every_stop_signal_and_ends_with_its_pipe(signum):
  """The relay process ignores every stop signal, even sent to it alone, and ends when its pipe closes (here: when
  the program that started it exits)."""
  code = ('import os, signal, sys, time\n'
          'from launcher import console\n'
          'console.filter_native_stderr()\n'
          'os.kill(console.RELAY.pid, int(sys.argv[1]))\n'
          'time.sleep(0.5)\n'
          'os.write(2, b"I1201 14:08:10.071630  140482 some_kernel.cc:12] a native line\\nafter the signal\\n")\n'
          'print(console.RELAY.pid, flush=True)\n')
  result = subprocess.run([sys.executable, '-c', code, str(int(signum))], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)
  assert result.returncode == 0, result
  assert result.stderr == 'after the signal\n', result
  relay = int(result.stdout)
  deadline = time.monotonic() + 10
  while relay in _processes() and time.monotonic() < deadline:
    time.sleep(.05)
  assert relay not in _processes()


@pytest.mark.slow
def test_impala_learner_checkpoints_when_its_environment_processes_die_with_the_stop(tmp_path):
  """The environment processes share the learner's process group: here they, and every other child in the group,
  die (SIGKILL) just before the group's SIGTERM. The learner still writes its checkpoint, prints its stop lines and exits 143."""
  run_dir = tmp_path / 'run'
  run = Run(tmp_path, 'impala', IMPALA + ['--train_dir', str(run_dir)])
  run.wait_for(r'Frames \d+ / 100000000 ')  # the first progress line: training runs
  # The 2 environment processes (and multiprocessing's resource tracker): every child in the group.
  children = [pid for pid, (parent, group) in _processes().items() if parent == run.pid and group == run.pid]
  assert len(children) >= 2, _processes()
  for pid in children:
    os.kill(pid, signal.SIGKILL)
  time.sleep(0.3)  # they die first: the actors notice before the learner's stop request comes
  os.killpg(run.pid, signal.SIGTERM)
  code, _ = run.wait()
  text = run.text()
  assert code == 143 and 'Traceback' not in text, run.report()
  stopped = re.search(
      r'Interrupted at (\d+) environment frames of 100000000 \(SIGTERM\)\. Checkpoint: \S+model\.ckpt-'
      r'\1', text)
  assert stopped and int(stopped.group(1)) == max(_checkpoint_steps(run_dir)), run.report()
  assert 'run_train: stopped by SIGTERM after writing the checkpoint' in text
