"""Stopping `scripts/launch_local_cluster.py` the way tools stop it (docs/impala/distributed.md, "Stopping the local
cluster"): the real script in a session of its own, as a terminal, `timeout` or a supervisor starts it, with a
learner and 2 actors on the built-in level (12 x 12 frames, batches of 2 unrolls of 5, a checkpoint after every
learner step so that training shows at once), stopped by

1. SIGTERM to the launcher alone (`kill PID`, a supervisor, Kubernetes);
2. SIGKILL to the launcher alone (kill -9, the OOM killer): the kernel sends the learner SIGTERM and the actors
   SIGKILL (parent-death signals);
3. a launcher started in the background (SIGINT ignored, as `... &` from a script starts it): SIGINT does nothing;
   then SIGTERM to the launcher and at once to its process group, as `timeout` sends it when it expires;
4. SIGTERM to every process of the run at once (SLURM at the time limit, `scancel`, systemd's control-group stop).

Each stop must leave no process of the run within 40 s (the launcher's descendants, found in /proc, and anything whose
command line names the test's directory) and the learner's checkpoint at the frame count it reported (case 2: its
lines are lost with the launcher; its checkpoint must be newer than the kill), newer than the start, and the same
command must resume from it: cases 1-3 run one after the other in one run directory, each start checking that it
resumed from the previous stop's checkpoint and that the previous learner released the run's lock (a learner that was
killed leaves its lock to be taken over, with a warning).
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

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='/proc and the parent-death signal')

REPO = launcher.REPO_ROOT
SCRIPT = str(REPO / 'scripts' / 'launch_local_cluster.py')
NO_PROCESS_LEFT_S = 40  # the bound; the launcher's own is 25 s
FLAGS = [
    '--batch_size=2', '--unroll_length=5', '--width=12', '--height=12', '--total_environment_frames=100000000',
    '--gin_param', 'experiment.checkpoint_interval_s = 0'
]
TOTAL = 100000000
TIMES = {}  # case -> seconds from the signal until no process of the run was left (printed at the end)


def _stat(pid):
  """(state, parent PID, start time in clock ticks) of a process, or None if it is gone."""
  try:
    fields = (Path('/proc') / str(pid) / 'stat').read_text().rsplit(')', 1)[1].split()
  except (OSError, IndexError):
    return None
  return fields[0], int(fields[1]), int(fields[19])


def _descendants(root):
  """{PID: start time} of the live processes below `root` (and `root`)."""
  parents = {}
  for entry in Path('/proc').iterdir():
    if entry.name.isdigit():
      stat = _stat(int(entry.name))
      if stat and stat[0] != 'Z':
        parents[int(entry.name)] = stat
  found, frontier = {}, [root]
  while frontier:
    pid = frontier.pop()
    if pid in parents and pid not in found:
      found[pid] = parents[pid][2]
      frontier += [child for child, stat in parents.items() if stat[1] == pid]
  return found


def _alive(processes):
  """The PIDs of `processes` ({PID: start time}) that still run (the same process: the same start time)."""
  return sorted(pid for pid, start in processes.items()
                if (stat := _stat(pid)) is not None and stat[0] != 'Z' and stat[2] == start)


def _naming(text):
  """{PID: start time} of the live processes whose command line contains `text` (not this one)."""
  found = {}
  for entry in Path('/proc').iterdir():
    if entry.name.isdigit() and int(entry.name) != os.getpid():
      try:
        cmdline = (entry / 'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
      except OSError:
        continue
      stat = _stat(int(entry.name))
      if text in cmdline and stat and stat[0] != 'Z':
        found[int(entry.name)] = stat[2]
  return found


class Launch:
  """`python scripts/launch_local_cluster.py ...` in a session of its own, its output in a file."""
  started = []  # every Launch of the current test (`_no_process_left`)

  def __init__(self, tmp_path, name, run_dir, sigint=signal.SIG_DFL):
    self.name, self.tmp_path = name, tmp_path
    self.out = tmp_path / f'{name}.out'
    args = ['--config', 'configs/impala_builtin.gin', '--num_actors', '2', '--logdir', str(run_dir), '--'] + FLAGS
    with open(self.out, 'w') as out:
      # SIGHUP at its default, as in a terminal, even when the tests run under `nohup`; SIGINT as asked (a shell
      # starts a background job with it ignored).
      def preexec():
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, sigint)

      self.process = subprocess.Popen(
          [sys.executable, SCRIPT] + args,
          cwd=REPO,
          stdout=out,
          stderr=subprocess.STDOUT,
          start_new_session=True,
          preexec_fn=preexec,  # noqa: PLW1509  (signals only)
          env=dict(os.environ, CUDA_VISIBLE_DEVICES=''))
    self.pid = self.process.pid
    self.processes = {}  # {PID: start time} of the run, as last seen (`snapshot`)
    Launch.started.append(self)

  def text(self):
    return self.out.read_text(errors='replace')

  def report(self):
    return f'{self.name}: exit {self.process.poll()}\n{self.text()[-5000:]}'

  def wait_for(self, pattern, timeout=240, start=0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      found = re.search(pattern, self.text()[start:], re.MULTILINE)
      if found:
        return found
      assert self.process.poll() is None, f'{pattern!r} did not show\n{self.report()}'
      time.sleep(.2)
    raise AssertionError(f'{pattern!r} did not show within {timeout} s\n{self.report()}')

  def training(self, above):
    """Waits until the learner has trained past `above` frames (its checkpoint after a step); the frames."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
      frames = [int(f) for f in re.findall(r'^\[learner\] Checkpoint: \S+model\.ckpt-(\d+)$', self.text(), re.M)]
      if frames and max(frames) > above:
        self.snapshot()
        # the launcher, the learner, 2 actors and their helpers (console relays, environment processes)
        assert len(self.processes) >= 6, self.processes
        return max(frames)
      assert self.process.poll() is None, self.report()
      time.sleep(.2)
    raise AssertionError(f'the learner did not train past {above} frames\n{self.report()}')

  def snapshot(self):
    """Records the processes of the run: every process below this one, and those naming the test's directory."""
    self.processes.update(_descendants(self.pid))
    self.processes.update(_naming(str(self.tmp_path)))

  def left(self):
    return _alive(self.processes) + [pid for pid in _naming(str(self.tmp_path)) if pid not in self.processes]

  def wait_until_none_left(self, case, sent):
    """Seconds from `sent` until no process of the run is left (asserted within NO_PROCESS_LEFT_S)."""
    deadline = sent + NO_PROCESS_LEFT_S
    while (self.process.poll() is None or self.left()) and time.monotonic() < deadline:
      time.sleep(.1)
    seconds = time.monotonic() - sent
    assert self.process.poll() is not None and not self.left(), \
        f'{case}: processes left after {NO_PROCESS_LEFT_S} s: {self.left()}\n{self.report()}'
    TIMES[case] = round(seconds, 1)
    return seconds


@pytest.fixture(autouse=True)
def _no_process_left():
  """After each test, even a failed one: every process of its runs killed (by the PIDs recorded), then checked."""
  yield
  for launch in Launch.started:
    if launch.process.poll() is None:
      launch.snapshot()
    for pid in launch.left():
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    if launch.process.poll() is None:
      launch.process.kill()
    launch.process.wait()
  deadline = time.monotonic() + 10  # (SIGKILL takes a moment)
  while any(launch.left() for launch in Launch.started) and time.monotonic() < deadline:
    time.sleep(.1)
  leftover = [launch.left() for launch in Launch.started]
  Launch.started.clear()
  assert not any(leftover), leftover


def _checkpoints(run_dir):
  """{frames: modification time} of the run's checkpoints."""
  found = {}
  for path in Path(run_dir).glob('model.ckpt-*.index'):
    found[int(re.search(r'ckpt-(\d+)\.index$', path.name).group(1))] = path.stat().st_mtime
  return found


def _check_clean_stop(launch, code, signal_name, expected_code):
  """The launcher's and the learner's stop lines, the report, the exit status; returns the checkpoint's frames."""
  text = launch.text()
  assert code == expected_code, launch.report()
  assert 'Traceback' not in text, launch.report()
  assert text.count(f'launch_local_cluster: {signal_name} received: stopping the learner') == 1, launch.report()
  assert 'again: passing it on' not in text, launch.report()  # a repeated signal taken as the same stop
  stopped = re.search(
      rf'^\[learner\] (?:warning: )?Interrupted at (\d+) environment frames of {TOTAL} '
      rf'\({signal_name}\)\. Checkpoint: (\S+model\.ckpt-\1)$', text, re.M)
  assert stopped, launch.report()
  assert f'[learner] run_train: stopped by {signal_name} after writing the checkpoint' in text
  frames = int(stopped.group(1))
  status = 128 + getattr(signal, signal_name)
  assert re.search(rf'^  learner \(PID \d+\): {signal_name} from the launcher; exit {status}$', text, re.M), \
      launch.report()
  for i in range(2):  # (an actor that hangs at its exit is the launcher's to kill at its deadline: gone all the same)
    assert re.search(
        rf'^  actor {i} \(PID \d+\): {signal_name} from the launcher after the learner\'s stop(; exit '
        rf'{status}|, then killed with SIGKILL \(still running 25 s after the stop signal\); killed by '
        r'SIGKILL)$', text, re.M), launch.report()
  assert (f'launch_local_cluster: the learner\'s checkpoint: {stopped.group(2)} ({frames} environment frames); the '
          f'same command resumes the run from it.') in text, launch.report()
  return frames


def _check_resumed(launch, frames):
  launch.wait_for(rf'^\[learner\] Restored \S+model\.ckpt-{frames}: resuming at {frames} environment frames\.$')
  assert 'took over the lock' not in launch.text(), launch.report()  # the previous learner released it


@pytest.mark.slow
def test_sigterm_sigkill_and_a_background_launcher_stop_the_cluster_and_the_run_resumes(tmp_path):
  run_dir = tmp_path / 'run'

  # 1. SIGTERM to the launcher alone.
  launch = Launch(tmp_path, 'sigterm', run_dir)
  launch.training(above=0)
  sent = time.monotonic()
  os.kill(launch.pid, signal.SIGTERM)
  launch.wait_until_none_left('SIGTERM to the launcher', sent)
  frames = _check_clean_stop(launch, launch.process.returncode, 'SIGTERM', 143)
  assert frames > 0 and max(_checkpoints(run_dir)) == frames, launch.report()
  port = re.search(r'--reverb_port=(\d+)', launch.text()).group(1)

  # 2. SIGKILL to the launcher alone: the kernel sends the learner SIGTERM and the actors SIGKILL. The jobs' last
  # lines are lost with the launcher's output; the learner released the lock (it stopped, it was not killed), its
  # checkpoint is newer than the one it resumed from and than the kill, and the next start resumes from it.
  launch = Launch(tmp_path, 'sigkill', run_dir)
  _check_resumed(launch, frames)
  assert f'port {port}: the one the run in {run_dir} was started with' in launch.text(), launch.report()
  trained = launch.training(above=frames)
  sent, killed_at = time.monotonic(), time.time()
  os.kill(launch.pid, signal.SIGKILL)
  launch.wait_until_none_left('SIGKILL to the launcher', sent)
  assert (run_dir / 'run.lock').read_text() == '', 'the learner did not release its lock: it was killed'
  checkpoints = _checkpoints(run_dir)
  frames = max(checkpoints)
  assert frames >= trained > 0 and checkpoints[frames] >= killed_at - 1, (checkpoints, trained, killed_at)

  # 3. Started in the background (SIGINT ignored, as `... &` in a script starts it): SIGINT stays ignored. Then what
  # `timeout` does when it expires: SIGTERM to the launcher, then to its process group (the launcher again): one stop.
  launch = Launch(tmp_path, 'background', run_dir, sigint=signal.SIG_IGN)
  _check_resumed(launch, frames)
  launch.training(above=frames)
  os.kill(launch.pid, signal.SIGINT)
  time.sleep(1.5)
  assert launch.process.poll() is None and 'received' not in launch.text(), launch.report()
  sent = time.monotonic()
  os.kill(launch.pid, signal.SIGTERM)
  time.sleep(.3)  # (`timeout` sends them back to back; here the launcher surely handles the first one first)
  os.killpg(launch.pid, signal.SIGTERM)
  launch.wait_until_none_left('SIGTERM to the launcher, then to its group', sent)
  stopped = _check_clean_stop(launch, launch.process.returncode, 'SIGTERM', 143)
  assert stopped > frames and max(_checkpoints(run_dir)) == stopped, launch.report()
  print(f'\nseconds until no process of the run was left: {TIMES}')
  assert max(TIMES.values()) < 30, TIMES  # inside a 30 s grace period


@pytest.mark.slow
def test_sigterm_to_every_process_of_the_run_is_one_stop(tmp_path):
  """SLURM (time limit, `scancel`) and systemd (KillMode=control-group) send SIGTERM to every process of the job:
  the learner stops on its own signal; the launcher sees its stop line and sends it none (a second signal would stop
  it without its checkpoint)."""
  run_dir = tmp_path / 'run'
  launch = Launch(tmp_path, 'everyone', run_dir)
  launch.training(above=0)
  sent = time.monotonic()
  for pid in launch.processes:  # the launcher first, as a process list would have it
    try:
      os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
      pass
  launch.wait_until_none_left('SIGTERM to every process', sent)
  text = launch.text()
  assert launch.process.returncode == 143 and 'Traceback' not in text, launch.report()
  stopped = re.search(
      rf'^\[learner\] (?:warning: )?Interrupted at (\d+) environment frames of {TOTAL} \(SIGTERM\)\. '
      r'Checkpoint: \S+model\.ckpt-\1$', text, re.M)
  assert stopped and max(_checkpoints(run_dir)) == int(stopped.group(1)), launch.report()
  assert text.count('[learner] run_train: SIGTERM received') == 1, launch.report()
  assert re.search(
      r'^  learner \(PID \d+\): its own SIGTERM \(sent to every process of the job\); none from the '
      r'launcher; exit 143$', text, re.M), launch.report()
  for i in range(2):
    assert re.search(
        rf'^  actor {i} \(PID \d+\): its own SIGTERM, as the learner\'s; none from the launcher'
        r'(; exit 143|, then killed with SIGKILL \(still running 25 s after the stop signal\); killed by '
        r'SIGKILL)$', text, re.M), launch.report()
  print(f'\nseconds until no process of the run was left: {TIMES}')
