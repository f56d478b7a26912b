"""Tests of multi-machine IMPALA (scalable_agent/distributed.py): unrolls and weights through Reverb, reconnection to
a restarted learner, the actor's errors, a learner with two actor processes on localhost started as a user would
(run_train.py) with an actor killed and restarted, and scripts/launch_local_cluster.py running to the end."""

import dataclasses
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf
import tree

from scalable_agent import actor as actor_lib
from scalable_agent import agent as agent_lib
from scalable_agent import distributed
from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import settings as settings_lib
from scalable_agent import transport

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, 'scripts'))
import launch_local_cluster  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

LEVEL = 'builtin/find_object'
# Small and fast: 12 x 12 frames, 3-step unrolls, batches of 2.
SETTINGS = settings_lib.Settings(level_name=LEVEL, num_actors=2, batch_size=2, unroll_length=3, num_action_repeats=1,
                                 width=12, height=12, total_environment_frames=10**6)


def _learner_side(settings=SETTINGS, run_id='test'):
  agent = settings_lib.make_agent(settings, LEVEL)
  unroll_spec = transport.unroll_signature(settings, agent.num_actions, (settings.height, settings.width, 3))
  server = transport.make_server(unroll_spec, transport.weights_signature(agent), 0, run_id)
  return agent, unroll_spec, server


def _actor_connection(server, settings=SETTINGS):
  agent = settings_lib.make_agent(settings, LEVEL)
  connection = transport.LearnerConnection(
      f'localhost:{server.port}',
      transport.unroll_signature(settings, agent.num_actions, (settings.height, settings.width, 3)),
      transport.weights_signature(agent))
  connection.connect(timeout_s=5)
  return agent, connection


def _unrolls(agent, count, seed=3):
  """`count` unrolls of a real Actor (in-process environment, the agent's policy)."""
  env = environments.environment_constructor(LEVEL, seed, width=12, height=12, num_action_repeats=1)()
  actor = actor_lib.Actor(LEVEL, environments.FlowEnvironment(env), actor_lib.numpy_policy(agent),
                          SETTINGS.unroll_length, actor_lib.initial_agent_state(),
                          actor_lib.initial_agent_output(agent.num_actions))
  return [actor.unroll() for _ in range(count)]


def test_unrolls_written_by_an_actor_come_back_batched_time_major_with_their_structure():
  _, unroll_spec, server = _learner_side()
  try:
    actor_agent, connection = _actor_connection(server)
    unrolls = _unrolls(actor_agent, 2)
    dataset = transport.learner_dataset(f'localhost:{server.port}', unroll_spec, batch_size=2)
    # The queue holds 1; each unroll carries the frame counter of the weights it was acted with.
    writer = threading.Thread(target=lambda: [connection.write(u, 1000 * i) for i, u in enumerate(unrolls)])
    writer.start()
    item = next(iter(dataset))
    writer.join(timeout=30)
    assert not writer.is_alive()
    assert isinstance(item, transport.UnrollItem)
    assert item.policy_frames.dtype == tf.int64
    np.testing.assert_array_equal(item.policy_frames.numpy(), [0, 1000])
    batch = item.unroll

    assert isinstance(batch, actor_lib.ActorOutput)
    assert isinstance(batch.env_outputs, environments.StepOutput)
    assert isinstance(batch.env_outputs.info, environments.StepOutputInfo)
    assert isinstance(batch.agent_outputs, agent_lib.AgentOutput)
    steps, num_actions = SETTINGS.unroll_length + 1, actor_agent.num_actions
    shapes = {
        'level_name': [2],
        'agent_state.c': [2, 256],
        'agent_state.h': [2, 256],
        'env_outputs.reward': [steps, 2],
        'env_outputs.info.episode_return': [steps, 2],
        'env_outputs.info.episode_step': [steps, 2],
        'env_outputs.done': [steps, 2],
        'env_outputs.observation.0': [steps, 2, 12, 12, 3],
        'env_outputs.observation.1': [steps, 2],
        'agent_outputs.action': [steps, 2],
        'agent_outputs.policy_logits': [steps, 2, num_actions],
        'agent_outputs.baseline': [steps, 2]
    }
    flat = {'.'.join(str(p) for p in path): t for path, t in tree.flatten_with_path(batch)}
    paths = set(flat)
    assert set(shapes) == paths
    for path, shape in shapes.items():
      assert flat[path].shape.as_list() == shape, path
    assert flat['env_outputs.observation.0'].dtype == tf.uint8
    assert flat['env_outputs.observation.1'].dtype == tf.string
    assert flat['env_outputs.info.episode_step'].dtype == tf.int32
    assert flat['agent_outputs.action'].dtype == tf.int32

    # The values are the unrolls', batched as single-machine training batches them (actor_lib.batch_unrolls).
    expected = actor_lib.batch_unrolls(unrolls)
    np.testing.assert_array_equal([n.decode() for n in batch.level_name.numpy()], [LEVEL, LEVEL])
    for got, want in zip(tf.nest.flatten(batch)[1:], tf.nest.flatten(expected)[1:]):
      got = got.numpy()
      if got.dtype == object:
        got = np.vectorize(lambda b: b.decode(), otypes=[object])(got)
      np.testing.assert_array_equal(got, want)
    connection.close()
  finally:
    server.stop()


def test_actors_get_the_latest_weights_once_and_the_finished_flag():
  learner_agent, _, server = _learner_side()
  try:
    publisher = transport.WeightsPublisher(server.localhost_client(), learner_agent)
    for variable in learner_agent.trainable_variables:
      variable.assign(tf.random.normal(variable.shape))
    publisher.publish(1234, step=7, block=True)
    _, connection = _actor_connection(server)
    weights = connection.latest_weights()
    assert int(weights['num_environment_frames']) == 1234 and int(weights['step']) == 7
    assert not weights['finished']
    for value, variable in zip(weights['weights'], learner_agent.tf1_variables().values()):
      np.testing.assert_array_equal(value, variable.numpy())
    assert connection.latest_weights() is None  # Nothing new published.
    publisher.publish(1300, step=8)  # In the background.
    deadline = time.monotonic() + 10
    while publisher.num_published < 2 and time.monotonic() < deadline:
      time.sleep(.05)
    assert int(connection.latest_weights()['step']) == 8
    publisher.publish(1400, step=9, finished=True, block=True)
    publisher.close()
    connection.close()

    # An actor started after the learner finished exits at once, without starting its environment.
    settings = dataclasses.replace(SETTINGS, task=1, job_name='actor', learner_address=f'localhost:{server.port}')
    assert distributed.run_actor(settings) == 0
  finally:
    server.stop()


def test_one_actor_process_runs_several_actor_tasks_in_threads():
  settings = dataclasses.replace(SETTINGS, num_actors=3, task=1, job_name='actor', actors_per_process=5)
  assert distributed.actor_tasks(settings) == [1, 2]  # tasks 1 .. 5, within num_actors = 3
  assert distributed.actor_tasks(dataclasses.replace(settings, task=0, actors_per_process=1)) == [0]
  learner_agent, unroll_spec, server = _learner_side(settings)
  try:
    publisher = transport.WeightsPublisher(server.localhost_client(), learner_agent)
    publisher.publish(600, step=100, block=True)
    settings = dataclasses.replace(settings, learner_address=f'localhost:{server.port}')
    written, items = [], []

    def run_actor():
      try:
        written.append(distributed.run_actor(settings, max_unrolls=2))
      except Exception as e:  # pylint: disable=broad-except
        written.append(e)

    actors = threading.Thread(target=run_actor, daemon=True)
    actors.start()
    dataset = transport.learner_dataset(f'localhost:{server.port}', unroll_spec, batch_size=1)
    reader = threading.Thread(target=lambda: items.extend(dataset.take(4)), daemon=True)
    reader.start()
    actors.join(timeout=120)
    reader.join(timeout=10)
    assert written == [4], written  # 2 tasks x 2 unrolls (or the actor's error)
    assert len(items) == 4
    # Every unroll says which weights it was acted with: those published at 600 frames.
    assert [int(item.policy_frames.numpy()[0]) for item in items] == [600] * 4
    # Two environments (seeded 2 and 3): the two tasks' first unrolls differ.
    firsts = {item.unroll.env_outputs.observation[0].numpy()[:, 0].tobytes() for item in items}
    assert len(firsts) == 4
    publisher.close()
  finally:
    server.stop()


@pytest.mark.slow
def test_an_actor_reconnects_to_a_restarted_learner(monkeypatch):
  monkeypatch.setattr(transport, 'RPC_TIMEOUT_S', 1)
  monkeypatch.setattr(transport, 'BACKOFF_S', (.5, 1.))
  learner_agent, unroll_spec, server = _learner_side(run_id='first')
  port = server.port
  actor_agent, connection = _actor_connection(server)
  unroll, = _unrolls(actor_agent, 1)
  servers = [server]
  try:
    # The learner goes away: the next call notices, and reconnection retries until a learner is back.
    server.stop()
    with pytest.raises(transport.LearnerLost, match='no answer'):
      connection.latest_weights()
    restart = threading.Timer(
        1.5, lambda: servers.append(
            transport.make_server(unroll_spec, transport.weights_signature(learner_agent), port, 'second')))
    restart.start()
    connection.reconnect('test', timeout_s=60)
    assert connection.run_id == 'second'
    dataset = transport.learner_dataset(f'localhost:{port}', unroll_spec, batch_size=1)
    connection.write(unroll)
    batch = next(iter(dataset)).unroll
    np.testing.assert_array_equal(batch.env_outputs.reward.numpy()[:, 0], unroll.env_outputs.reward)

    # A learner restarted faster than the actor looks: the new run id tells.
    servers[-1].stop()
    servers.append(transport.make_server(unroll_spec, transport.weights_signature(learner_agent), port, 'third'))
    with pytest.raises(transport.LearnerLost, match='restarted'):
      connection.latest_weights()
    connection.reconnect('test', timeout_s=60)
    assert connection.run_id == 'third'

    # Nobody comes back: the actor gives up after the reconnection timeout, with a message.
    servers[-1].stop()
    with pytest.raises(transport.LearnerUnreachableError, match='could not reconnect within 2 s'):
      connection.reconnect('test', timeout_s=2)
  finally:
    connection.close()
    for s in servers:
      s.stop()


def test_an_actor_with_other_settings_than_the_learner_is_refused():
  _, _, server = _learner_side()
  try:
    with pytest.raises(transport.DistributedSetupError, match='expects other unrolls') as error:
      _actor_connection(server, dataclasses.replace(SETTINGS, unroll_length=5))
    assert 'learner float32[4], here float32[6]' in str(error.value)
    with pytest.raises(transport.DistributedSetupError, match='expects other unrolls'):
      _actor_connection(server, dataclasses.replace(SETTINGS, width=16))
  finally:
    server.stop()


def test_actor_setting_errors_are_clear():

  def actor(**kwargs):
    arguments = dict(dataclasses.asdict(SETTINGS), task=0, job_name='actor')
    arguments.update(kwargs)
    return experiment.experiment('/tmp/unused', **arguments)

  with pytest.raises(transport.DistributedSetupError, match=r'actor task 2 is beyond num_actors=2: actor tasks'):
    actor(task=2, learner_address='localhost:8000')
  with pytest.raises(transport.DistributedSetupError, match='an actor needs --learner_address=HOST:PORT'):
    actor()
  with pytest.raises(transport.DistributedSetupError, match='learner_address must be HOST:PORT'):
    actor(learner_address='localhost')
  with pytest.raises(transport.DistributedSetupError, match='there is one learner, task 0'):
    experiment.experiment('/tmp/unused', **dict(dataclasses.asdict(SETTINGS), task=1, job_name='learner'))
  with pytest.raises(ValueError, match='multi-machine job'):
    experiment.train('/tmp/unused', dataclasses.replace(SETTINGS, task=0))


def test_a_learner_port_in_use_is_a_clear_error():
  _, unroll_spec, server = _learner_side()
  try:
    agent = settings_lib.make_agent(SETTINGS, LEVEL)
    with pytest.raises(transport.DistributedSetupError, match=f'cannot serve on port {server.port}: it is in use'):
      transport.make_server(unroll_spec, transport.weights_signature(agent), server.port, 'other')
  finally:
    server.stop()


def test_an_unreachable_learner_address_fails_fast_with_the_address_and_how_to_start_the_learner():
  port = portpicker.pick_unused_port()
  start = time.monotonic()
  with pytest.raises(transport.LearnerUnreachableError) as error:
    experiment.experiment(
        '/tmp/unused',
        **dict(dataclasses.asdict(SETTINGS), task=0, job_name='actor', learner_address=f'localhost:{port}',
               connect_timeout_s=2))
  assert time.monotonic() - start < 30
  message = str(error.value)
  assert f'cannot reach the IMPALA learner at localhost:{port} within 2 s' in message
  assert '--job_name=learner --task=0' in message and f'--reverb_port={port}' in message
  assert 'firewall' in message and 'connect_timeout_s' in message


# ---------------------------------------------------------------------------------------------------------------------
# A learner and two actor processes, as a user starts them (run_train.py).


class _Process:
  """A job started with a command of `launch_local_cluster.commands`, its output in a file."""

  def __init__(self, name, command, log_dir):
    self.name = name
    self.log_path = os.path.join(log_dir, name.replace(' ', '_') + '.log')
    self._log = open(self.log_path, 'ab')  # pylint: disable=consider-using-with
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    # SIGINT at its default: a shell ignores it for background jobs (a CI script started with `&`), the children
    # inherit that, and the launcher then leaves Ctrl-C ignored, as for any `nohup ... &` job.
    self.popen = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=self._log,
        stderr=subprocess.STDOUT,
        env=env,
        # noqa reason: signal settings of the child, before exec; no lock is taken.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509

  def log(self):
    with open(self.log_path, errors='replace') as f:
      return f.read()

  def wait_for_log(self, pattern, timeout, start=0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      match = re.search(pattern, self.log()[start:])
      if match:
        return match
      if self.popen.poll() is not None:
        break
      time.sleep(.2)
    raise AssertionError(f'{self.name}: no {pattern!r} within {timeout} s (exit {self.popen.poll()}):\n'
                         f'{self.log()[-3000:]}')

  def send(self, sig=signal.SIGINT):
    if self.popen.poll() is None:
      self.popen.send_signal(sig)

  def stop(self, sig=signal.SIGINT, timeout=30):
    if self.popen.poll() is None:
      self.popen.send_signal(sig)
      try:
        self.popen.wait(timeout=timeout)
      except subprocess.TimeoutExpired:
        self.popen.kill()
        self.popen.wait()
    self._log.close()
    return self.popen.returncode


def _learner_frames(port, timeout=30):
  """The learner's frame counter, read from its weights table."""
  client = reverb.Client(f'localhost:{port}')
  client.server_info(timeout=timeout)
  sample = next(client.sample(transport.WEIGHTS_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
  return int(sample.data['num_environment_frames'])


def _wait_for_frames(port, minimum, timeout):
  deadline = time.monotonic() + timeout
  frames = -1
  while time.monotonic() < deadline:
    frames = _learner_frames(port)
    if frames >= minimum:
      return frames
    time.sleep(.2)
  raise AssertionError(f'the learner reached only {frames} < {minimum} frames in {timeout} s')


@pytest.mark.slow
def test_learner_and_actor_processes_train_through_an_actor_kill_and_checkpoint(tmp_path):
  logdir, logs = str(tmp_path / 'run'), str(tmp_path / 'logs')
  os.makedirs(logs)
  port = portpicker.pick_unused_port()
  flags = [
      '--level_name=' + LEVEL, '--batch_size=2', '--unroll_length=3', '--num_action_repeats=1', '--width=12',
      '--height=12', '--total_environment_frames=1000000'
  ]
  learner_command, actor_commands = launch_local_cluster.commands(config=None, num_actors=2, logdir=logdir, port=port,
                                                                  extra_flags=flags)
  batch_frames = 2 * 3
  actor_run_dir = os.path.join(REPO_ROOT, 'runs', 'impala')  # The launcher's default train_dir for these flags.
  actor_run_dir_existed = os.path.exists(actor_run_dir)
  processes = {}
  try:
    processes['learner'] = _Process('learner', learner_command, logs)
    for i, command in enumerate(actor_commands):
      processes[f'actor {i}'] = _Process(f'actor {i}', command, logs)
    processes['learner'].wait_for_log(r'serving on port %d' % port, timeout=120)
    frames = _wait_for_frames(port, 2 * batch_frames, timeout=120)

    # SIGKILL actor 0 and start it again: the learner keeps training on actor 1's unrolls meanwhile.
    processes['actor 0'].popen.kill()
    processes['actor 0'].stop()
    frames_at_kill = _learner_frames(port)
    processes['actor 0 again'] = _Process('actor 0 again', actor_commands[0], logs)
    processes['actor 0 again'].wait_for_log(r'Actor 0: first unroll written', timeout=120)
    frames_after_restart = _wait_for_frames(port, _learner_frames(port) + 2 * batch_frames, timeout=60)
    assert frames_after_restart > frames_at_kill >= frames
    assert processes['actor 1'].popen.poll() is None and processes['actor 0 again'].popen.poll() is None

    # Ctrl-C: the learner writes a checkpoint at its frame counter (a restarted learner resumes from it).
    # 130: stopped by SIGINT after its checkpoint (-9 would mean it missed the timeout and was killed).
    status = processes['learner'].stop(signal.SIGINT, timeout=120)
    assert status == 130, (status, processes['learner'].log()[-3000:])
    # The learner's last lines reach its log through the launcher's stderr relay, which may finish writing them just
    # after the learner has exited: wait for them.
    deadline, match = time.monotonic() + 30, None
    while match is None and time.monotonic() < deadline:
      match = re.search(r'Interrupted at (\d+) environment frames', processes['learner'].log())
      time.sleep(.2)
    assert match, processes['learner'].log()[-3000:]
    interrupted = int(match.group(1))
    assert interrupted >= frames_after_restart
    assert os.path.exists(os.path.join(logdir, f'model.ckpt-{interrupted}.index'))
    assert os.path.exists(actor_run_dir) == actor_run_dir_existed  # Actors write no run directory.
  finally:
    for process in processes.values():
      process.send(signal.SIGINT)
    for process in processes.values():
      process.stop(signal.SIGINT, timeout=20)
  tags = {
      v.tag
      for f in glob.glob(os.path.join(logdir, 'events.*'))
      for e in tf.compat.v1.train.summary_iterator(f)
      for v in e.summary.value
  }
  assert {'total_loss', 'learning_rate', LEVEL + '/episode_return'} <= tags


@pytest.mark.slow
def test_launch_local_cluster_runs_to_the_end_and_the_actors_exit_by_themselves(tmp_path):
  logdir = str(tmp_path / 'run')
  result = subprocess.run([
      sys.executable,
      os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py'), '--num_actors', '2', '--logdir', logdir, '--',
      '--level_name=' + LEVEL, '--batch_size=2', '--unroll_length=3', '--num_action_repeats=1', '--width=12',
      '--height=12', '--total_environment_frames=24'
  ], cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
                                                                          CUDA_VISIBLE_DEVICES=''))
  output = result.stdout + result.stderr
  assert result.returncode == 0, output[-3000:]
  assert '--job_name=learner --task=0 --num_actors=2' in output and '--learner_address=localhost:' in output
  assert re.search(r'\[learner\] .*Done: 24 environment frames', output), output[-3000:]
  for i in range(2):  # Each actor saw the final weights (or started after them) and exited with status 0.
    assert re.search(r'\[actor %d\] .*Actor %d: the learner finished the run at 24 environment frames' % (i, i),
                     output), output[-3000:]
  assert os.path.exists(os.path.join(logdir, 'model.ckpt-24.index'))
