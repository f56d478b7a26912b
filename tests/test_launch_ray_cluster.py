"""scripts/launch_ray_cluster.py on a real two-node Ray cluster on this machine (two `ray start` nodes on localhost,
each with a resource of its own): the learner runs on the node that has the learner's resource and the actor
processes on the other; an actor process killed with SIGKILL is restarted by Ray and writes unrolls again; SIGTERM to
the launcher writes the learner's checkpoint, and the same command resumes from it."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import portpicker
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO_ROOT, 'scripts', 'launch_ray_cluster.py')
# A tiny built-in level and network, so that the processes start and step fast on 2 busy cores.
FLAGS = [
    '--level_name=builtin/find_object', '--batch_size=2', '--unroll_length=3', '--num_action_repeats=1', '--width=12',
    '--height=12', '--total_environment_frames=100000000'
]

pytestmark = pytest.mark.slow


class _Launcher:
  """The launcher in the background, its output collected line by line."""

  def __init__(self, command, env, path):
    self.path = path
    self._file = open(path, 'w', encoding='utf-8')  # pylint: disable=consider-using-with
    self.process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=self._file, stderr=subprocess.STDOUT)

  def output(self):
    with open(self.path, encoding='utf-8', errors='replace') as f:
      return re.sub(r'\x1b\[[0-9;]*m', '', f.read())

  def wait_for(self, pattern, timeout, count=1):
    """The match objects of `pattern` once it occurs `count` times in the output (fails after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      found = list(re.finditer(pattern, self.output()))
      if len(found) >= count:
        return found
      assert self.process.poll() is None, f'the launcher exited ({self.process.returncode}):\n{self.output()[-4000:]}'
      time.sleep(.5)
    raise AssertionError(f'no {count} x {pattern!r} within {timeout} s:\n{self.output()[-4000:]}')

  def stop(self, timeout):
    self.process.send_signal(signal.SIGTERM)
    code = self.process.wait(timeout)
    self._file.close()
    return code


def _processes_under(path):
  """PIDs of the processes whose command line names `path` (this cluster's Ray processes)."""
  pids = []
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        if path.encode() in f.read():
          pids.append(int(pid))
    except OSError:
      pass
  return pids


@pytest.fixture
def two_node_cluster():
  """A Ray head node with the resource 'learner_node' and a second node with 'actor_node', on this machine;
  yields (address, environment). Stops only this cluster's processes (others' Ray instances keep running)."""
  port = portpicker.pick_unused_port()
  temp = tempfile.mkdtemp(prefix='ray', dir='/tmp')  # short: Ray's socket paths must stay under 107 characters
  # Token authentication, as Ray's security guide recommends: every node and the launcher share the token.
  token = os.path.join(temp, 'auth_token')
  with open(token, 'w', encoding='utf-8') as f:
    f.write(os.urandom(16).hex())
  env = dict(os.environ, RAY_DEDUP_LOGS='0', RAY_AUTH_MODE='token', RAY_AUTH_TOKEN_PATH=token)
  ray_bin = os.path.join(os.path.dirname(sys.executable), 'ray')
  common = ['--object-store-memory=100000000']
  head = [
      'start', '--head', f'--port={port}', '--num-cpus=1', '--resources={"learner_node": 1}',
      '--include-dashboard=false', f'--temp-dir={temp}'
  ] + common
  worker = ['start', f'--address=127.0.0.1:{port}', '--num-cpus=2', '--resources={"actor_node": 1}'] + common
  try:
    for command in (head, worker):
      result = subprocess.run([ray_bin] + command, capture_output=True, text=True, timeout=120, env=env)
      assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    yield f'127.0.0.1:{port}', env
  finally:
    for _ in range(2):
      for pid in _processes_under(temp):
        try:
          os.kill(pid, signal.SIGKILL)
        except OSError:
          pass
      time.sleep(1.)
    shutil.rmtree(temp, ignore_errors=True)


def test_learner_and_actors_on_two_nodes_survive_an_actor_kill_stop_and_resume(tmp_path, two_node_cluster):
  address, env = two_node_cluster
  env = dict(env, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
  logdir = str(tmp_path / 'run')
  command = [
      sys.executable, SCRIPT, '--address', address, '--num_actors', '2', '--actors_per_process', '1', '--logdir',
      logdir, '--port',
      str(portpicker.pick_unused_port()), '--learner_resources', '{"learner_node": 0.5}', '--actor_process_resources',
      '{"actor_node": 0.1}', '--'
  ] + FLAGS
  launcher = _Launcher(command, env, str(tmp_path / 'first.log'))
  try:
    learner_node, = launcher.wait_for(r'learner on \S+ \(node (\w+), PID \d+\)', 120)
    processes = launcher.wait_for(r'actor processes: 0 on node (\w+) \(PID (\d+)\), 1 on node (\w+) \(PID \d+\)', 120)
    learner_node, (actor_node, actor_pid, other_node) = learner_node.group(1), processes[0].groups()
    assert actor_node == other_node != learner_node  # placed by their resources: the learner's node has no actors
    # Ray's prefix of a runner's lines is '(<job name> pid=<runner PID>)'.
    runner_pid = launcher.wait_for(r'\(actor 0 pid=(\d+)\) Actor 0: first unroll written', 120)[0].group(1)

    # SIGKILL to actor 0's process: Ray restarts its runner (a new process), which starts the job again; it
    # connects and writes unrolls again.
    os.kill(int(actor_pid), signal.SIGKILL)
    launcher.wait_for(r'actor 0 exited \(killed by SIGKILL\); Ray restarts it', 60)
    written = launcher.wait_for(r'\(actor 0 pid=(\d+)\) Actor 0: first unroll written', 150, count=1)
    deadline = time.monotonic() + 150
    while not any(m.group(1) != runner_pid for m in written) and time.monotonic() < deadline:
      written = launcher.wait_for(r'\(actor 0 pid=(\d+)\) Actor 0: first unroll written', 10)
      time.sleep(1.)
    assert any(m.group(1) != runner_pid for m in written), launcher.output()[-4000:]

    # SIGTERM to the launcher: the learner's checkpoint, then the actors; exit 143.
    assert launcher.stop(timeout=60) == 128 + signal.SIGTERM
    output = launcher.output()
    frames, path = re.search(r"the learner's checkpoint: (\S+) \((\d+) environment frames\)", output).group(2, 1)
    assert os.path.exists(path + '.index') and path.endswith(f'model.ckpt-{frames}') and int(frames) > 0
  finally:
    if launcher.process.poll() is None:
      launcher.process.kill()

  # The same command resumes from that checkpoint (the learner released its run directory's lock).
  again = _Launcher(command, env, str(tmp_path / 'second.log'))
  try:
    again.wait_for(rf'Restored \S+model.ckpt-{frames}: resuming at {frames} environment frames', 120)
    assert 'took over the lock' not in again.output()
    again.wait_for(r'Actor 1: first unroll written', 120)
    assert again.stop(timeout=60) == 128 + signal.SIGTERM
  finally:
    if again.process.poll() is None:
      again.process.kill()


def test_a_learner_that_cannot_start_stops_the_launch_with_its_error(tmp_path):
  # No cluster running: the launcher starts its own Ray instance. The learner's usage error (an unknown level) ends
  # the launch before any actor starts, with the learner's message and a non-zero status.
  token = tmp_path / 'auth_token'
  token.write_text(os.urandom(16).hex())
  env = dict(os.environ, RAY_AUTH_MODE='token', RAY_AUTH_TOKEN_PATH=str(token), TF_CPP_MIN_LOG_LEVEL='2',
             CUDA_VISIBLE_DEVICES='')
  env.pop('RAY_ADDRESS', None)
  command = [
      sys.executable, SCRIPT, '--address', 'local', '--num_actors', '2', '--logdir',
      str(tmp_path / 'run'), '--port',
      str(portpicker.pick_unused_port()), '--', '--level_name=builtin/no_such_level'
  ]
  result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
  output = re.sub(r'\x1b\[[0-9;]*m', '', result.stdout + result.stderr)
  assert result.returncode == 1, output[-3000:]
  assert "unknown built-in level 'builtin/no_such_level'" in output
  assert 'the learner exited (exit 2) before the actors started' in output
  assert '--job_name=actor' not in output  # no actor was started
