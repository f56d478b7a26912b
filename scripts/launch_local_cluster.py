r"""Starts multi-machine IMPALA on this machine: one learner and N actor processes, as you would across machines.

  python scripts/launch_local_cluster.py --config configs/impala_builtin.gin --num_actors 2 --logdir /tmp/cluster \
      [--port 8000] [-- any other run_train.py flags, e.g. --gin_param "experiment.batch_size = 2"]

It prints the commands and runs them:

  python run_train.py CONFIG --job_name=learner --task=0 --num_actors=N --reverb_port=PORT --logdir=LOGDIR ...
  python run_train.py CONFIG --job_name=actor --task=i --num_actors=N --learner_address=localhost:PORT ...

On several machines, run the first on the learner's host and the others on any hosts, with the learner's host name
in --learner_address (docs/impala/distributed.md). Each process's output lines
are prefixed with its name. Ctrl-C is forwarded to every process (the learner writes a checkpoint); processes still
running 60 s later are killed. When the learner finishes, the actors exit by themselves. The exit status is the
learner's.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TRAIN = os.path.join(REPO_ROOT, 'run_train.py')
STOP_TIMEOUT_S = 60.


def free_port():
  """A TCP port nobody listens on now (the learner binds it a few seconds later)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('', 0))
    return s.getsockname()[1]


def commands(config, num_actors, logdir, port, extra_flags=(), host='localhost', python=sys.executable):
  """The learner's command and the N actors' commands (lists of arguments).

  Args:
    config: a gin file for run_train.py, or None for the original flags alone (the IMPALA defaults).
    num_actors: N.
    logdir: the learner's run directory.
    port: the learner's Reverb port.
    extra_flags: more run_train.py flags, given to every process (every process must have the same configuration).
    host: the learner's host name, as the actors reach it.
    python: the interpreter.
  """
  base = [python, RUN_TRAIN] + ([config] if config else [])
  common = [f'--num_actors={num_actors}'] + list(extra_flags)
  learner = base + ['--job_name=learner', '--task=0'] + common + [f'--reverb_port={port}', f'--logdir={logdir}']
  actors = [base + ['--job_name=actor', f'--task={i}'] + common + [f'--learner_address={host}:{port}']
            for i in range(num_actors)]
  return learner, actors


def _shell(command):
  return ' '.join(a if a and all(c.isalnum() or c in '-_=./:@,+' for c in a) else repr(a) for a in command)


def _pump(name, stream):
  for line in iter(stream.readline, b''):
    sys.stdout.write(f'[{name}] {line.decode(errors="replace")}')
    sys.stdout.flush()


def _start(name, command):
  # In the caller's directory, as the commands would run there (relative --config / --logdir paths).
  process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)  # Ctrl-C reaches this script only; it forwards it.
  threading.Thread(target=_pump, args=(name, process.stdout), daemon=True).start()
  return process


def _stop(processes, timeout=STOP_TIMEOUT_S):
  """SIGINT to every running process, then SIGKILL to those still running after `timeout`."""
  for _, process in processes:
    if process.poll() is None:
      process.send_signal(signal.SIGINT)
  deadline = time.monotonic() + timeout
  for name, process in processes:
    try:
      process.wait(timeout=max(deadline - time.monotonic(), .1))
    except subprocess.TimeoutExpired:
      print(f'launch_local_cluster: {name} did not stop within {timeout:.0f} s; killing it.', flush=True)
      process.kill()
      process.wait()


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0],
                                   epilog='Flags after -- (or unknown flags) go to every run_train.py process.')
  parser.add_argument('--config', default=None, help='gin file (e.g. configs/impala_builtin.gin); default: the '
                      'original IMPALA flags alone')
  parser.add_argument('--num_actors', type=int, required=True)
  parser.add_argument('--logdir', required=True, help='the learner\'s run directory')
  parser.add_argument('--port', type=int, default=0, help='the learner\'s Reverb port (default: a free one)')
  args, extra = parser.parse_known_args(argv)
  extra = [a for a in extra if a != '--']
  if args.num_actors < 1:
    parser.error('--num_actors must be >= 1')
  port = args.port or free_port()
  learner_command, actor_commands = commands(args.config, args.num_actors, args.logdir, port, extra)
  print('launch_local_cluster: the learner (on its host):\n  ' + _shell(learner_command), flush=True)
  print('launch_local_cluster: the actors (on any hosts; replace localhost by the learner\'s host name):', flush=True)
  for command in actor_commands:
    print('  ' + _shell(command), flush=True)

  processes = [('learner', _start('learner', learner_command))]
  processes += [(f'actor {i}', _start(f'actor {i}', command)) for i, command in enumerate(actor_commands)]
  learner = processes[0][1]
  try:
    while learner.poll() is None:
      time.sleep(.5)
    print(f'launch_local_cluster: the learner exited with status {learner.returncode}; waiting for the actors '
          f'(up to {STOP_TIMEOUT_S:.0f} s).', flush=True)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(p.poll() is None for _, p in processes[1:]) and time.monotonic() < deadline:
      time.sleep(.5)
    _stop(processes[1:], timeout=10.)
  except KeyboardInterrupt:
    print('launch_local_cluster: Ctrl-C: stopping the learner (it writes a checkpoint) and the actors.', flush=True)
    _stop(processes)
  return learner.returncode if learner.returncode is not None else 1


if __name__ == '__main__':
  sys.exit(main())
