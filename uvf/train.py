"""HIRO training: `train_uvf` (original: efficient-hrl train.py and train_utils.py; hiro.md sections 3, 4, 5.3).

Its parameters are the original's, in order, with the original defaults; the original's command-line flags
`--goal_sample_strategy`, `--save_interval_secs` and `--save_summaries_secs` are three extra keyword parameters (the
launcher turns those flags into these bindings), followed by the new ones (`distribution_strategy`, `seed`,
`steps_per_call`, `jit_compile`, `skip_delayed_actor_step`).

The loop (the original's `initialize_training_fn` and `TrainStep.train_step`):
  1. targets <- online networks (hard copy); `initial_steps` (default initial_episodes x max_steps_per_episode)
     collection steps with the untrained noisy policies (global_step counts them);
  2. then per iteration: `num_collect_per_update` collection steps (uvf/collect.py), `num_updates_per_observation`
     low-level TD3 updates (batch `batch_size`, the low reward recomputed from the stored (s, g, s') on
     StatePreprocess'd states, discounts gamma x the context discounts; with hiro_repr each is followed by one
     representation update on a meta batch of its own), and one meta update when global_step // N
     changed during the iteration (N = num_collect_per_meta_update; also on the first iteration of a run, as the
     original's counter started at 0): a meta batch, its goals relabelled (`goal_sample_strategy`), reward = the
     stored sum x reward_scale_factor, discounts meta_gamma x the meta context discounts;
  3. stop when global_step >= num_episodes_train x max_steps_per_episode + 100.
The collection and both updates of many iterations run in one `tf.function` (`steps_per_call` iterations per call,
a `tf.while_loop`); the environment step is a `tf.numpy_function` inside it, the only Python work per step. Between
calls, Python writes summaries (every `save_summaries_secs`), logs progress (every `log_every_n_steps`), saves the
policy (every `save_policy_every_n_steps`) and the full state (every `save_interval_secs`, at the next episode end so
that the environment's state is exact, and at the end).

Files under `train_dir`: `model.ckpt-<step>` (full TF2 checkpoints: agents with targets and contexts, optimizers,
counters, replay buffers, collection state, random generators, environment state; the 2 newest kept),
`policy/model.ckpt-<step>` (TF2 checkpoint of a dict {original TF1 name: variable}, the variables of the original's
policy checkpoint, hiro.md section 4.1), TensorBoard summaries (`events.out.tfevents.*`), `operative_config.gin`.
"""

import inspect
import os
import time

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from uvf import build
from uvf import checkpoints
from uvf import collect
from uvf import off_policy_correction
from uvf import trainer as trainer_lib

LOAD_PATH = None  # The original's module constant: the default of `load_path`.
# The original stopped at num_episodes_train * max_steps_per_episode + 100 environment steps.
EXTRA_STEPS = 100


def _reseed(trainer, seed):
  """Seeds the generators created by gin without a seed (replay sampling, context samplers, agents' noise)."""
  generators = [trainer.replay_buffer.rng, trainer.meta_replay_buffer.rng, trainer.uvf_agent.rng,
                trainer.meta_agent.rng]
  for agent in (trainer.uvf_agent, trainer.meta_agent):
    contexts = [agent.tf_context] + ([agent.sub_context] if hasattr(agent, 'sub_context') else [])
    for context in contexts:
      for mode in context.modes:
        for sampler in context.samplers(mode):
          if isinstance(getattr(sampler, 'rng', None), tf.random.Generator):
            generators.append(sampler.rng)
  if trainer.state_preprocess.rng is not None:
    generators.append(trainer.state_preprocess.rng)  # hiro_repr: the representation loss's index sampling
  for i, generator in enumerate(generators):
    generator.reset_from_seed(seed * 1000 + 10 + i)


def restore_low_level(trainer, load_path):
  """The original's `load_path`: the low-level actor and critics (and with hiro_repr the representation, as the
  original's `lowlevel_saver`) from a checkpoint holding their TF1 names (an original TF1 checkpoint, or a policy
  checkpoint of this port)."""
  low_level = dict(trainer.uvf_agent.variables_by_tf1_name(), **trainer.state_preprocess.variables_by_tf1_name())
  low_level = {name: variable for name, variable in low_level.items() if '/target_' not in name}
  path = checkpoints.restore_policy(load_path, low_level, subset=True)
  logging.info('Restored the %d low-level variables from %s', len(low_level), path)


def _bound_arguments():
  """train_uvf's arguments under the current gin configuration (bindings, else defaults), but train_dir, without
  building anything: macros are resolved, configurable references (@create_maze_env() ...) are left unevaluated."""
  bindings = gin.get_bindings('train_uvf', resolve_references=False)
  values = {}
  for name, parameter in inspect.signature(train_uvf).parameters.items():
    if name == 'train_dir':
      continue
    value = bindings.get(name, parameter.default)
    for _ in range(10):  # a macro may name a macro
      if not (isinstance(value, gin.config.ConfigurableReference) and value.configurable.name == 'macro'):
        break
      value = gin.query_parameter('%' + value.scoped_selector.rsplit('/', 1)[0])
    values[name] = value
  return values


def preflight(program='train'):
  """Checks train_uvf's bound arguments before anything is written (`launcher.System.preflight`).

  Raises:
    ValueError: a bad value (the message names the binding and what it must be).
    NotImplementedError: a setting this port does not support.
  """
  off_policy_correction.check_compute_dtype_bindings()  # issue 18's bfloat16 switches
  if program == 'train':
    _check_arguments(**_bound_arguments())


# A stop asked by a signal (`request_stop`, called by the launcher's SIGINT / SIGTERM handler): the loop stops at the
# next episode end, after writing a full checkpoint.
_stop_request = {'signal': None}


def request_stop(signal_name='SIGTERM'):
  """Asks the running `train_uvf` to stop at the next episode end after writing its full checkpoint (there the
  environment's state is exact, so the resumed run is exactly the uninterrupted one). Returns True (the request is
  taken). Safe in a signal handler."""
  _stop_request['signal'] = signal_name
  return True


# train_uvf's parameters that the original's gin files and command lines may bind and that have no effect here: name
# -> why. They stay in train_uvf's signature (gin binds only the parameters a function has), so every original
# binding keeps working; `train_uvf` drops them before anything else.
COMPATIBILITY_ONLY = {
    'num_bin_actions': 'the bins of discrete actions; HIRO acts continuously (unused by the original too)',
    'prefetch_queue_capacity': "the original's TF1 input queue; replay batches are sampled inside the compiled step",
    'summarize_gradients': 'gradient histograms of the TF1 train op; the updates write losses only',
    'replay_context_ratio': 'context relabelling, used only with relabel_contexts (not ported; HIRO: False)',
    'next_state_as_context_ratio': 'context relabelling, used only with relabel_contexts (not ported; HIRO: False)',
    'state_index': 'context relabelling, used only with relabel_contexts (not ported; HIRO: False)',
    'zero_timer_ratio': 'context relabelling, used only with relabel_contexts (not ported; HIRO: False)',
    'timer_index': 'context relabelling, used only with relabel_contexts (not ported; HIRO: False)',
    'debug': "the original's TF1 debugging prints (unused by its training loop)",
}

# train_uvf's parameters of original features this port does not have: name -> (fn(value) -> True when the value is
# one that works here (HIRO's), the message otherwise). No HIRO configuration sets another value.
NOT_PORTED = {
    'exp_action_wrapper': (lambda v: v is None,
                           'train_uvf.exp_action_wrapper is not ported (HIRO does not use it).'),
    'relabel_contexts': (lambda v: not v,
                         'train_uvf.relabel_contexts / meta_relabel_contexts (training on sampled contexts) are not '
                         'ported; HIRO trains on the stored ones (False).'),
    'meta_relabel_contexts': (lambda v: not v,
                              'train_uvf.relabel_contexts / meta_relabel_contexts (training on sampled contexts) are '
                              'not ported; HIRO trains on the stored ones (False).'),
    'repeat_size': (lambda v: not v, 'train_uvf.repeat_size > 0 is not ported (HIRO: 0).'),
    'clip_gradient_norm': (lambda v: not v, 'train_uvf.clip_gradient_norm > 0 is not ported (HIRO: 0).'),
    'replay_num_steps': (lambda v: v == 1, 'train_uvf.replay_num_steps / meta_replay_num_steps must be 1 (HIRO '
                                           'samples single transitions).'),
    'meta_replay_num_steps': (lambda v: v == 1, 'train_uvf.replay_num_steps / meta_replay_num_steps must be 1 (HIRO '
                                                'samples single transitions).'),
}


def _is_count(value, minimum):
  return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= minimum


def _is_seconds(value):
  return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value >= 0


def _check_arguments(**kwargs):
  """ValueErrors for bad values and NotImplementedErrors for settings this port does not support (none is used by
  HIRO's configs). `kwargs`: train_uvf's arguments but train_dir (references may be unevaluated gin references)."""
  a = kwargs
  for name in ('environment', 'agent_class', 'meta_agent_class', 'state_preprocess_class', 'inverse_dynamics_class',
               'replay_buffer', 'meta_replay_buffer', 'critic_optimizer', 'actor_optimizer', 'meta_critic_optimizer',
               'meta_actor_optimizer'):
    if a[name] is None:
      raise ValueError(f'train_uvf needs {name} (bound by configs/uvf/configs/train_uvf.gin; include it).')
  for name, (works, message) in NOT_PORTED.items():
    if not works(a[name]):
      raise NotImplementedError(message)
  if a['max_steps_per_episode'] is None:
    raise ValueError('train_uvf.max_steps_per_episode must be set (HIRO: 500, bound by the environment configs).')
  for name in ('num_updates_per_observation', 'num_collect_per_update', 'num_collect_per_meta_update', 'batch_size',
               'steps_per_call', 'max_steps_per_episode', 'target_update_period'):
    if not _is_count(a[name], 1):
      raise ValueError(f'train_uvf.{name} must be a positive int, got {a[name]!r}.')
  for name in ('num_episodes_train', 'initial_episodes', 'initial_steps', 'log_every_n_steps',
               'save_policy_every_n_steps'):
    if not (a[name] is None and name != 'num_episodes_train') and not _is_count(a[name], 0):
      raise ValueError(f'train_uvf.{name} must be an int >= 0, got {a[name]!r}.')
  if a['max_policies_to_save'] is not None and not _is_count(a['max_policies_to_save'], 1):
    raise ValueError(f'train_uvf.max_policies_to_save must be None (keep all) or an int >= 1, got '
                     f'{a["max_policies_to_save"]!r}.')
  for name in ('save_interval_secs', 'save_summaries_secs', 'save_policy_interval_secs'):
    if not _is_seconds(a[name]):
      raise ValueError(f'train_uvf.{name} must be a number of seconds >= 0, got {a[name]!r}.')
  if a['seed'] is not None and not _is_count(a['seed'], 0):
    raise ValueError(f'train_uvf.seed must be None or an int >= 0, got {a["seed"]!r}.')
  for name in ('gamma', 'reward_scale_factor'):
    if not isinstance(a[name], (int, float, np.integer, np.floating)) or isinstance(a[name], bool):
      raise ValueError(f'train_uvf.{name} must be a number, got {a[name]!r}.')
  if a['goal_sample_strategy'] not in off_policy_correction.GOAL_SAMPLE_STRATEGIES:
    raise ValueError(f'Unknown goal_sample_strategy {a["goal_sample_strategy"]!r}; valid: '
                     f'{", ".join(off_policy_correction.GOAL_SAMPLE_STRATEGIES)} (--goal_sample_strategy).')
  if a['distribution_strategy'] not in trainer_lib.DISTRIBUTION_STRATEGIES:
    raise ValueError(f'Unknown distribution_strategy {a["distribution_strategy"]!r}; valid: '
                     f'{", ".join(trainer_lib.DISTRIBUTION_STRATEGIES)} (train_uvf.distribution_strategy).')


@gin.configurable
def train_uvf(train_dir,
              environment=None,
              num_bin_actions=3,
              agent_class=None,
              meta_agent_class=None,
              state_preprocess_class=None,
              inverse_dynamics_class=None,
              exp_action_wrapper=None,
              replay_buffer=None,
              meta_replay_buffer=None,
              replay_num_steps=1,
              meta_replay_num_steps=1,
              critic_optimizer=None,
              actor_optimizer=None,
              meta_critic_optimizer=None,
              meta_actor_optimizer=None,
              repr_optimizer=None,
              relabel_contexts=False,
              meta_relabel_contexts=False,
              batch_size=64,
              repeat_size=0,
              num_episodes_train=2000,
              initial_episodes=2,
              initial_steps=None,
              num_updates_per_observation=1,
              num_collect_per_update=1,
              num_collect_per_meta_update=1,
              gamma=1.0,
              meta_gamma=1.0,
              reward_scale_factor=1.0,
              target_update_period=1,
              should_stop_early=None,
              clip_gradient_norm=0.0,
              summarize_gradients=False,
              debug_summaries=False,
              log_every_n_steps=100,
              prefetch_queue_capacity=2,
              policy_save_dir='policy',
              save_policy_every_n_steps=1000,
              save_policy_interval_secs=0,
              replay_context_ratio=0.0,
              next_state_as_context_ratio=0.0,
              state_index=0,
              zero_timer_ratio=0.0,
              timer_index=-1,
              debug=False,
              max_policies_to_save=None,
              max_steps_per_episode=None,
              load_path=LOAD_PATH,
              goal_sample_strategy='sample',
              save_interval_secs=300,
              save_summaries_secs=30,
              distribution_strategy='default',
              seed=None,
              steps_per_call=100,
              jit_compile=False,
              skip_delayed_actor_step=False):
  """Trains the meta and low-level agents of HIRO, writing checkpoints and summaries to `train_dir`.

  A run directory holding a full checkpoint resumes from it (counters, networks, optimizers, replay buffers,
  contexts, collection state, random generators and the environment's state).

  Args (the original's, as bound by configs/uvf/configs/train_uvf.gin; see hiro.md 5.3):
    train_dir: the run directory.
    environment: the maze `PyEnvironment` (gin: @create_maze_env()).
    agent_class, meta_agent_class, state_preprocess_class, inverse_dynamics_class: UvfAgent, MetaAgent,
      StatePreprocess (StatePreprocess.trainable = True: hiro_repr's learned representation), InverseDynamics.
    replay_buffer, meta_replay_buffer: `CircularBuffer`s (200000 each).
    critic_optimizer, actor_optimizer, meta_critic_optimizer, meta_actor_optimizer: the four Adam optimizers.
    repr_optimizer: the representation's optimizer (hiro_repr; @repr/AdamOptimizer(), lr 1e-4); unused when
      StatePreprocess is not trainable.
    batch_size: B of both levels' updates (100).
    num_episodes_train: the run stops at num_episodes_train x max_steps_per_episode + 100 environment steps.
    initial_episodes / initial_steps: collection before the first update (5 x 500 steps).
    num_updates_per_observation, num_collect_per_update, num_collect_per_meta_update: the schedule (1, 1, 10).
    gamma, meta_gamma: discounts (0.99, 0.99), multiplied by the context discounts.
    reward_scale_factor: scales the stored rewards (only the meta level trains on stored rewards).
    target_update_period: delayed actor and target update period (2).
    should_stop_early: None or a callable returning True to stop (checked between compiled calls).
    num_bin_actions, prefetch_queue_capacity, summarize_gradients, replay_context_ratio, next_state_as_context_ratio,
      state_index, zero_timer_ratio, timer_index, debug: accepted for the original's gin files, without effect
      (`COMPATIBILITY_ONLY` says why, for each).
    exp_action_wrapper, relabel_contexts, meta_relabel_contexts, repeat_size, clip_gradient_norm, replay_num_steps,
      meta_replay_num_steps: features not ported; only HIRO's values are accepted (`NOT_PORTED`).
    debug_summaries: passed to the agents (the original crashed with True).
    log_every_n_steps: progress line period, in environment steps.
    policy_save_dir, save_policy_every_n_steps, save_policy_interval_secs, max_policies_to_save: policy
      checkpoints `<train_dir>/<policy_save_dir>/model.ckpt-<step>`; sleep after each save; None keeps all.
    max_steps_per_episode: the episode length (500; required).
    load_path: a checkpoint to restore the low-level actor and critics from before the initial collection.
    goal_sample_strategy: 'sample' (original), 'FuN' or 'None' (the original's --goal_sample_strategy flag).
    save_interval_secs: seconds between full checkpoints (the original's flag; 300).
    save_summaries_secs: seconds between summaries (the original's flag; 30).
  New args:
    distribution_strategy: 'default', 'one_device' or 'mirrored': the `tf.distribute` strategy of the updates.
    seed: None (non-deterministic) or an int seeding networks, noise, sampling and the environment.
    steps_per_call: loop iterations per compiled call (speed only; results do not depend on it).
    jit_compile: compile each level's TD3 update with XLA.
    skip_delayed_actor_step: `Td3Update.skip_delayed_actor_step` (False: the original's Adam step on the delayed
      actor updates).

  Returns:
    The final global step (int).
  """
  _check_arguments(**{k: v for k, v in locals().items() if k != 'train_dir'})
  del num_bin_actions, prefetch_queue_capacity, summarize_gradients, replay_context_ratio  # COMPATIBILITY_ONLY
  del next_state_as_context_ratio, state_index, zero_timer_ratio, timer_index, debug  # COMPATIBILITY_ONLY
  del exp_action_wrapper, relabel_contexts, meta_relabel_contexts, repeat_size, clip_gradient_norm  # NOT_PORTED
  del replay_num_steps, meta_replay_num_steps  # NOT_PORTED: checked above
  if initial_steps is None:
    initial_steps = initial_episodes * max_steps_per_episode
  if agent_class.ACTION_TYPE != 'continuous' or meta_agent_class.ACTION_TYPE != 'continuous':
    raise ValueError('HIRO trains continuous-action agents only.')

  tf.io.gfile.makedirs(train_dir)
  if seed is not None:
    tf.random.set_seed(seed)
    environment.seed(seed)
    environment.reset()
  strategy = trainer_lib.make_strategy(distribution_strategy)
  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(
      environment, agent_class, meta_agent_class, state_preprocess_class, inverse_dynamics_class, strategy,
      debug_summaries=debug_summaries)

  trainer = trainer_lib.HiroTrainer(
      environment, uvf_agent, meta_agent, state_preprocess, replay_buffer, meta_replay_buffer, critic_optimizer,
      actor_optimizer, meta_critic_optimizer, meta_actor_optimizer, strategy, batch_size, gamma, meta_gamma,
      reward_scale_factor, target_update_period, num_updates_per_observation, num_collect_per_update,
      num_collect_per_meta_update, goal_sample_strategy, seed=seed, jit_compile=jit_compile,
      skip_delayed_actor_step=skip_delayed_actor_step, repr_optimizer=repr_optimizer)
  if seed is not None:
    _reseed(trainer, seed)
  loop = TrainingLoop(
      trainer, train_dir, max_number_of_steps=num_episodes_train * max_steps_per_episode + EXTRA_STEPS,
      initial_steps=initial_steps, max_steps_per_episode=max_steps_per_episode, log_every_n_steps=log_every_n_steps,
      policy_save_dir=policy_save_dir, save_policy_every_n_steps=save_policy_every_n_steps,
      save_policy_interval_secs=save_policy_interval_secs, max_policies_to_save=max_policies_to_save,
      save_interval_secs=save_interval_secs, save_summaries_secs=save_summaries_secs, steps_per_call=steps_per_call,
      should_stop_early=should_stop_early, load_path=load_path)
  return loop.run()


FULL_CHECKPOINTS_KEPT = 2  # newest full checkpoints kept in train_dir


def _variable_bytes(checkpoint, optimizers=()):
  """Bytes of the variables a `tf.train.Checkpoint` holds (TF1 optimizers keep their slots apart: pass them)."""
  seen = {}
  for trackable in tf.train.TrackableView(checkpoint).descendants():
    if isinstance(trackable, tf.Variable):
      seen[id(trackable)] = trackable
  for optimizer in optimizers:
    for variable in optimizer.variables():
      seen[id(variable)] = variable
  return sum(v.shape.num_elements() * (v.dtype.size if v.dtype != tf.string else 1) for v in seen.values())


class TrainingLoop(object):
  """The Python side of training: restore or initialise, call the compiled loop, summaries, logs, checkpoints."""

  def __init__(self, trainer, train_dir, max_number_of_steps, initial_steps, max_steps_per_episode,
               log_every_n_steps, policy_save_dir, save_policy_every_n_steps, save_policy_interval_secs,
               max_policies_to_save, save_interval_secs, save_summaries_secs, steps_per_call, should_stop_early=None,
               load_path=None):
    self.trainer = trainer
    self.train_dir = train_dir
    self.max_number_of_steps = int(max_number_of_steps)
    self.initial_steps = int(initial_steps)
    self.max_steps_per_episode = int(max_steps_per_episode)
    self.log_every_n_steps = int(log_every_n_steps or 0)
    self.save_policy_every_n_steps = int(save_policy_every_n_steps or 0)
    self.save_policy_interval_secs = save_policy_interval_secs
    self.save_interval_secs = save_interval_secs
    self.save_summaries_secs = save_summaries_secs
    self.steps_per_call = int(steps_per_call)
    self.should_stop_early = should_stop_early
    self.load_path = load_path
    self.checkpoint = trainer.full_checkpoint()
    self.policy_dir = os.path.join(train_dir, policy_save_dir)
    self.max_policies_to_save = max_policies_to_save
    self.manager = self._full_manager()
    self.policy_checkpoint = tf.train.Checkpoint(variables=trainer.policy_variables_by_tf1_name())
    self.policy_manager = tf.train.CheckpointManager(
        self.policy_checkpoint, self.policy_dir, max_to_keep=max_policies_to_save,
        checkpoint_name=checkpoints.CHECKPOINT_NAME)
    self.writer = None  # created by `run`, after the checks of the run directory
    self.checkpoint_bytes = None  # of one full checkpoint (`check_free_space`)
    self.last_saved_step = None
    self.timings = {'initial_collect': 0.0, 'train': 0.0}

  def _full_manager(self):
    return tf.train.CheckpointManager(self.checkpoint, self.train_dir, max_to_keep=FULL_CHECKPOINTS_KEPT,
                                      checkpoint_name=checkpoints.CHECKPOINT_NAME)

  # Checkpoints.

  def restore_or_initialize(self):
    """Restores the newest readable full checkpoint (True), or initialises a fresh run (False): targets <- online
    networks, then the low level from `load_path` if given. `checkpoints.find_resumable` chooses the checkpoint
    (the directory is scanned; a corrupt newer one is set aside) or refuses a directory it cannot resume."""
    latest = checkpoints.find_resumable(self.train_dir, self.policy_dir)
    self.manager = self._full_manager()  # find_resumable may have rebuilt the checkpoint index file
    if latest:
      try:
        self.checkpoint.restore(latest).assert_existing_objects_matched()
      except (AssertionError, ValueError) as e:
        raise checkpoints.RunDirectoryError(
            f'{latest} does not match this configuration\'s training state ({str(e).strip().splitlines()[0]}): it '
            'was written by another configuration or version of this code. Nothing was changed; use another '
            '--train_dir.') from None
      if not self.trainer.collector.restore_env_state():
        raise ValueError(f'{latest} holds no environment state.')
      self.last_saved_step = int(self.trainer.global_step.numpy())
      self.checkpoint_bytes = checkpoints.checkpoint_bytes(latest)
      print(f'Resumed from {latest} at global step {self.last_saved_step}.', flush=True)
      return True
    self.trainer.uvf_agent.copy_to_targets()
    self.trainer.meta_agent.copy_to_targets()
    if self.load_path:
      restore_low_level(self.trainer, self.load_path)
    return False

  def full_checkpoint_bytes(self):
    """Bytes of one full checkpoint: the newest one's size when there is one, else the sum of the sizes of the
    variables it holds (replay buffers, networks, optimizer slots, ...), plus 1%."""
    if self.checkpoint_bytes:
      return self.checkpoint_bytes
    return int(1.01 * _variable_bytes(self.checkpoint, list(self.trainer.optimizers.values()) + (
        [self.trainer.repr_update.optimizer] if self.trainer.repr_update is not None else [])))

  def check_free_space(self):
    """Says what the checkpoints of the run need, and stops if the disk cannot hold its full checkpoints.

    `FULL_CHECKPOINTS_KEPT` (2) full checkpoints are kept, and a save writes the next one before the oldest is
    deleted: up to 3 exist during a save. Policy checkpoints are all kept (max_policies_to_save None).

    Raises:
      checkpoints.RunDirectoryError: the free space is less than the full checkpoints still need.
    """
    full = self.full_checkpoint_bytes()
    existing = len(checkpoints.list_checkpoints(self.train_dir))
    full_needed = max(1, FULL_CHECKPOINTS_KEPT + 1 - existing) * full
    policy = _variable_bytes(self.policy_checkpoint)
    step = int(self.trainer.global_step.numpy())
    every = self.save_policy_every_n_steps
    policies = (self.max_number_of_steps // every - step // every) if every else 0
    if self.max_policies_to_save:
      policies = min(policies, self.max_policies_to_save + 1)
    free = checkpoints.free_bytes(self.train_dir)
    print(f'Checkpoints: full checkpoints {checkpoints.format_bytes(full)} each ({FULL_CHECKPOINTS_KEPT} kept, '
          f'{FULL_CHECKPOINTS_KEPT + 1} during a save: {checkpoints.format_bytes(full_needed)} more needed), policy '
          f'checkpoints {checkpoints.format_bytes(policy)} each ({policies} more to the end: '
          f'{checkpoints.format_bytes(policies * policy)}); {checkpoints.format_bytes(free)} free in '
          f'{self.train_dir}.', flush=True)
    if free is None:
      return
    if free < full_needed:
      raise checkpoints.RunDirectoryError(
          f'not enough disk space in {self.train_dir} for the full checkpoints of this run: they need '
          f'{checkpoints.format_bytes(full_needed)} more ({checkpoints.format_bytes(full)} each, '
          f'{FULL_CHECKPOINTS_KEPT} kept and one more during a save), {checkpoints.format_bytes(free)} is free. '
          'Free some space, or use another --train_dir (smaller replay buffers, CircularBuffer.buffer_size, make '
          'smaller checkpoints). Nothing was written.')
    if free < full_needed + policies * policy:
      logging.warning('The policy checkpoints to the end of the run need %s more than the %s free in %s.',
                      checkpoints.format_bytes(full_needed + policies * policy - free),
                      checkpoints.format_bytes(free), self.train_dir)

  def save(self):
    """Writes a full checkpoint `model.ckpt-<global step>` (not again for the step of the last one).

    Raises:
      checkpoints.RunDirectoryError: the save failed (disk full, permission): what it left is removed and the
        previous checkpoint is intact.
    """
    step = int(self.trainer.global_step.numpy())
    if step == self.last_saved_step:
      return None
    self.trainer.collector.save_env_state()
    try:
      path = self.manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
      checkpoints.remove_partial_saves(self.train_dir)
      raise checkpoints.storage_error(
          e, self.train_dir, f'the full checkpoint model.ckpt-{step}', needed=self.full_checkpoint_bytes(),
          intact=self.manager.latest_checkpoint) from None
    self.last_saved_step = step
    self.checkpoint_bytes = checkpoints.checkpoint_bytes(path)
    logging.info('Saved the full checkpoint %s', path)
    return path

  def save_policy(self):
    """Writes the policy checkpoint `policy/model.ckpt-<global step>`, unless one of that step exists: an
    interrupted run wrote it after its last full checkpoint, and the resumed run, exact, would write the same.

    Raises:
      checkpoints.RunDirectoryError: the save failed (disk full, permission).
    """
    step = int(self.trainer.global_step.numpy())
    existing = os.path.join(self.policy_dir, f'{checkpoints.CHECKPOINT_NAME}-{step}')
    if tf.io.gfile.exists(existing + '.index'):
      logging.info('The policy checkpoint %s exists (written before the run was interrupted); kept.', existing)
      return existing
    try:
      path = self.policy_manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
      checkpoints.remove_partial_saves(self.policy_dir)
      raise checkpoints.storage_error(e, self.policy_dir, f'the policy checkpoint model.ckpt-{step}',
                                      needed=_variable_bytes(self.policy_checkpoint),
                                      intact=self.manager.latest_checkpoint) from None
    logging.info('Saved the policy checkpoint %s', path)
    if self.save_policy_interval_secs > 0:
      logging.info('Wait %d secs after save policy.', self.save_policy_interval_secs)
      time.sleep(self.save_policy_interval_secs)
    return path

  # Summaries and progress.

  def write_summaries(self, metrics, steps_per_sec):
    t = self.trainer
    step = int(t.global_step.numpy())
    episodes = t.collector.episode_summaries()
    with self.writer.as_default(step=step):
      for name, counter in (('environment_steps', t.global_step), ('num_episodes', t.num_episodes),
                            ('num_resets', t.num_resets), ('num_updates', t.num_updates),
                            ('num_meta_updates', t.num_meta_updates), ('replay_buffer_adds', t.replay_buffer.num_adds),
                            ('meta_replay_buffer_adds', t.meta_replay_buffer.num_adds)):
        tf.summary.scalar('Counters/' + name, counter)
      tf.summary.scalar('avg_episode_rewards', episodes['avg_episode_rewards'])
      tf.summary.scalar('avg_episode_meta_rewards', episodes['avg_episode_meta_rewards'])
      tf.summary.histogram('episode_rewards', episodes['episode_rewards'])
      tf.summary.histogram('episode_meta_rewards', episodes['episode_meta_rewards'])
      for name in ('nometa', 'meta'):
        tf.summary.scalar(f'{name}/Reward/average_step_reward', metrics[f'{name}/average_step_reward'])
        tf.summary.scalar(f'{name}/critic_loss', metrics[f'{name}/critic_loss'])
        tf.summary.scalar(f'{name}/actor_loss', metrics[f'{name}/actor_loss'])
      if 'repr/loss' in metrics:
        tf.summary.scalar('repr/loss', metrics['repr/loss'])
      finished = int(min(t.num_episodes.numpy(), collect.EPISODE_HISTORY))
      if finished:
        tf.summary.scalar('avg_episode_final_distance',
                          tf.reduce_mean(t.collector.episode_final_distances[:finished]))
      if steps_per_sec is not None:
        tf.summary.scalar('global_step/sec', steps_per_sec)
    self.writer.flush()

  # The loop.

  def _next_stop(self, step, checkpoint_pending, last_step):
    """The global step at which the current compiled call should end."""
    stop = min(self.max_number_of_steps, step + self.steps_per_call)
    for period in (self.log_every_n_steps, self.save_policy_every_n_steps):
      if period:
        stop = min(stop, (step // period + 1) * period)
    if checkpoint_pending:
      stop = min(stop, (step // self.max_steps_per_episode + 1) * self.max_steps_per_episode)
    if not self.trainer.inline_meta_update:
      period = self.trainer.meta_period
      stop = min(stop, (step // period + 1) * period)
      if last_step // period != (step + 1) // period:  # the first iteration of a fresh run: its own call
        stop = step + 1
    return max(stop, step + 1)

  def _write_operative_config(self, step):
    """`operative_config.gin`, or `operative_config-<step>.gin` when a resumed run's differs (a longer run): the
    earlier run's file is not overwritten."""
    text = gin.operative_config_str()
    path = os.path.join(self.train_dir, 'operative_config.gin')
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path) as f:
        if f.read() == text:
          return
      path = os.path.join(self.train_dir, f'operative_config-{step}.gin')
    with tf.io.gfile.GFile(path, 'w') as f:
      f.write(text)

  def _writing(self, what, fn, *args):
    """fn(*args); a failed write (disk full, permission) becomes one `RunDirectoryError`."""
    try:
      return fn(*args)
    except (tf.errors.OpError, OSError) as e:
      raise checkpoints.storage_error(e, self.train_dir, what, intact=self.manager.latest_checkpoint) from None

  def run(self):
    """Trains until the step budget, `should_stop_early` or a stop request (`request_stop`: at the next episode
    end, after a full checkpoint); returns the final global step."""
    t = self.trainer
    resumed = self.restore_or_initialize()
    self.check_free_space()
    self._writing('the operative configuration', self._write_operative_config, int(t.global_step.numpy()))
    self.writer = self._writing('TensorBoard summaries', tf.summary.create_file_writer, self.train_dir)
    policy_every = (f'a policy checkpoint every {self.save_policy_every_n_steps} steps'
                    if self.save_policy_every_n_steps else 'no policy checkpoints')
    progress_every = (f'a progress line every {self.log_every_n_steps} steps' if self.log_every_n_steps
                      else 'no progress lines')
    logging.info('Training to global step %d (environment steps), from step %d; %s, %s.', self.max_number_of_steps,
                 int(t.global_step.numpy()), progress_every, policy_every)
    start = time.time()
    if not resumed:
      if int(t.global_step.numpy()) != 0:
        raise ValueError('Global step should be zero at the start of a fresh run.')
      if self.initial_steps:
        t.collect_steps(tf.constant(self.initial_steps, tf.int64))
      logging.info('Collected %d initial steps in %.1f s', self.initial_steps, time.time() - start)
    self.timings['initial_collect'] = time.time() - start
    step = int(t.global_step.numpy())
    # The original's TrainStep remembered the previous global step from 0, so a fresh run's first iteration also
    # runs a meta update. A resumed run continues as the uninterrupted run would.
    last_step = step if resumed else 0
    metrics = None
    train_start = last_log_time = last_summary_time = last_save_time = time.time()
    last_log_step = last_summary_step = step
    first_step = step
    checkpoint_pending = False
    stopping = None  # the signal whose stop is under way
    while step < self.max_number_of_steps:
      if _stop_request['signal'] and not stopping:
        stopping = _stop_request['signal']
        if t.collector.stepper.just_reset or step == self.last_saved_step:
          break  # already at an episode end
        logging.info('%s: stopping at the next episode end (global step %d), after a full checkpoint.', stopping,
                     (step // self.max_steps_per_episode + 1) * self.max_steps_per_episode)
        checkpoint_pending = True
      target = self._next_stop(step, checkpoint_pending, last_step)
      metrics = t.run_steps(tf.constant(target - step, tf.int64), tf.constant(last_step, tf.int64))
      previous, step = step, int(t.global_step.numpy())
      if not t.inline_meta_update and int(t.meta_replay_buffer.num_adds.numpy()) > 0 and bool(
          t.meta_due(tf.constant(last_step if target - previous == 1 else step - 1, tf.int64),
                     tf.constant(step, tf.int64))):
        metrics = dict(metrics, **{'meta/' + k: v for k, v in t.meta_step().items()})
      last_step = step
      now = time.time()
      if (self.save_policy_every_n_steps and
          step // self.save_policy_every_n_steps != previous // self.save_policy_every_n_steps):
        self.save_policy()
      if self.log_every_n_steps and step // self.log_every_n_steps != previous // self.log_every_n_steps:
        rate = (step - last_log_step) / max(now - last_log_time, 1e-9)
        remaining = self.max_number_of_steps - step
        loss = float(metrics['nometa/critic_loss'] + metrics['nometa/actor_loss'])
        print(f'global step {step} / {self.max_number_of_steps}: loss = {loss:.4f} ({1.0 / max(rate, 1e-9):.4f} '
              f'sec/step) ({rate:.0f} steps/sec), ETA {_format_eta(remaining / max(rate, 1e-9))}', flush=True)
        last_log_time, last_log_step = now, step
      if now - last_summary_time >= self.save_summaries_secs:
        self._writing('TensorBoard summaries', self.write_summaries, metrics,
                      (step - last_summary_step) / max(now - last_summary_time, 1e-9))
        last_summary_time, last_summary_step = now, step
      if now - last_save_time >= self.save_interval_secs:
        checkpoint_pending = True
      if checkpoint_pending and t.collector.stepper.just_reset:
        self.save()
        last_save_time, checkpoint_pending = time.time(), False
        if stopping:
          break
      if self.should_stop_early and self.should_stop_early():
        logging.info('should_stop_early: stopping at global step %d', step)
        break
    self.timings['train'] = time.time() - train_start
    if metrics is not None:
      self._writing('TensorBoard summaries', self.write_summaries, metrics,
                    (step - first_step) / max(self.timings['train'], 1e-9))
    self.save()
    self.writer.close()
    _stop_request['signal'] = None  # honoured (or the run had ended anyway)
    if stopping:
      print(f'{stopping}: stopped at global step {step} of {self.max_number_of_steps}; full checkpoint '
            f'{self.manager.latest_checkpoint} written.', flush=True)
    logging.info('Training finished at global step %d (%.1f s of training)', step, self.timings['train'])
    return step


def _format_eta(seconds):
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  return f'{hours}h{minutes:02d}m{seconds:02d}s'
