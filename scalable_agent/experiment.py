"""IMPALA experiment: the train / test entry point, with the original command-line flags as gin parameters.

Each flag of the original `experiment.py` (reference impala.md section 2) is a parameter of `experiment` with the
same name and default, so `--level_name=dmlab30` on the command line and `experiment.level_name = 'dmlab30'` in a
gin file are the same setting. `logdir` is the run directory and comes from the command line (`--logdir` or
`--train_dir`), not from gin.
"""

import inspect

import gin

from scalable_agent import environments


@gin.configurable('experiment', module='scalable_agent', denylist=['logdir'])
def experiment(logdir,
               mode='train',
               test_num_episodes=10,
               task=-1,
               job_name='learner',
               total_environment_frames=int(1e9),
               num_actors=4,
               batch_size=2,
               unroll_length=100,
               num_action_repeats=4,
               seed=1,
               entropy_cost=0.00025,
               baseline_cost=.5,
               discounting=.99,
               reward_clipping='abs_one',
               dataset_path='',
               level_name='explore_goal_locations_small',
               width=96,
               height=72,
               learning_rate=0.00048,
               decay=.99,
               momentum=0.,
               epsilon=.1):
  """Trains (`mode='train'`) or evaluates (`mode='test'`) IMPALA; the arguments are the original flags.

  Args:
    logdir: run directory: checkpoints and summaries (original flag `--logdir`).
    mode: 'train' or 'test'.
    test_num_episodes: episodes per level in test mode.
    task: task id; -1 for single-machine training.
    job_name: 'learner' or 'actor'; ignored when task is -1.
    total_environment_frames: frames (agent steps x action repeats) to train for; also the horizon of the linear
      learning-rate decay.
    num_actors: number of actors (environments).
    batch_size: learner batch size, in unrolls.
    unroll_length: agent steps per unroll (an unroll carries unroll_length + 1 steps).
    num_action_repeats: environment frames per agent step.
    seed: random seed.
    entropy_cost: entropy loss multiplier.
    baseline_cost: baseline loss multiplier.
    discounting: discount factor per agent step.
    reward_clipping: 'abs_one' or 'soft_asymmetric'.
    dataset_path: DeepMind Lab dataset path, needed by the psychlab_* levels.
    level_name: a level (see `scalable_agent.environments`), or 'dmlab30'.
    width: observation width in pixels.
    height: observation height in pixels.
    learning_rate: initial RMSProp learning rate (decays linearly to 0).
    decay: RMSProp decay.
    momentum: RMSProp momentum.
    epsilon: RMSProp epsilon.
  """
  del logdir, mode, test_num_episodes, task, job_name, total_environment_frames, num_actors, batch_size
  del unroll_length, num_action_repeats, seed, entropy_cost, baseline_cost, discounting, reward_clipping
  del dataset_path, level_name, width, height, learning_rate, decay, momentum, epsilon
  raise NotImplementedError(experiment.not_implemented)


# Read by the launcher before it writes anything; removed when the training system lands.
experiment.not_implemented = 'the IMPALA training system (issues #4 and #6)'


def bound_value(name):
  """The value `experiment.<name>` takes under the current gin configuration (binding, else default)."""
  bindings = gin.get_bindings('experiment')
  if name in bindings:
    return bindings[name]
  return inspect.signature(experiment).parameters[name].default


def preflight():
  """Checks what the configured experiment needs before anything starts (see `launcher.System.preflight`).

  Raises:
    environments.MissingDependencyError: the level needs DeepMind Lab and it is not installed.
    ValueError: an unknown level.
  """
  environments.check_level_available(bound_value('level_name'))
