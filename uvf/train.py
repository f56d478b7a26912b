"""HIRO training: `train_uvf` (original: tensorflow/models research/efficient-hrl train.py and train_utils.py).

Job of this module: the train program's gin entry `train_uvf` (and the launcher's `preflight`
hook): it checks its arguments (the environment, replay buffers and optimizers come built by gin), seeds, builds the
agents and the two settings records (uvf/train_settings.py), then the compiled training step (uvf/train_step.py) and
the run loop that drives it (uvf/run_loop.py).

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
a `tf.while_loop`; `train_step.HiroTrainer`); the environment step is a `tf.numpy_function` inside it, the only
Python work per step. Between calls, `run_loop.TrainingLoop` writes summaries (every `save_summaries_secs`), logs
progress (every `log_every_n_steps`: a line and `progress.json`), saves the policy (every `save_policy_every_n_steps`)
and the full state (every `save_interval_secs`, at the next episode end so that the environment's state is exact, and
at the end).

Files under `train_dir`: `model.ckpt-<step>` (full TF2 checkpoints: agents with targets and contexts, optimizers,
counters, replay buffers, collection state, random generators, environment state; the 2 newest kept),
`policy/model.ckpt-<step>` (TF2 checkpoint of a dict {original TF1 name: variable}, the variables of the original's
policy checkpoint), TensorBoard summaries (`events.out.tfevents.*`), `operative_config.gin`,
`progress.json` (`rundir.progress`: step, total_steps, rate, eta_s, state).
"""

import inspect

import gin
import numpy as np
import tensorflow as tf

from uvf import build
from uvf import off_policy_correction
from uvf import protocol
from uvf import run_loop
from uvf import train_settings
from uvf import train_step

LOAD_PATH = None  # The original's module constant: the default of `load_path`.


def _reseed(trainer, seed):
  """Seeds the generators created by gin without a seed (replay sampling, context samplers, agents' noise)."""
  generators = [
      trainer.replay_buffer.rng, trainer.meta_replay_buffer.rng, trainer.uvf_agent.rng, trainer.meta_agent.rng
  ]
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
  off_policy_correction.check_compute_dtype_bindings()  # the bfloat16 switches
  if program == 'train':
    _check_arguments(**_bound_arguments())


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
    'exp_action_wrapper': (lambda v: v is None, 'train_uvf.exp_action_wrapper is not ported (HIRO does not use it).'),
    'relabel_contexts':
        (lambda v: not v, 'train_uvf.relabel_contexts / meta_relabel_contexts (training on sampled contexts) are not '
         'ported; HIRO trains on the stored ones (False).'),
    'meta_relabel_contexts':
        (lambda v: not v, 'train_uvf.relabel_contexts / meta_relabel_contexts (training on sampled contexts) are '
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
  if a['distribution_strategy'] not in train_step.DISTRIBUTION_STRATEGIES:
    raise ValueError(f'Unknown distribution_strategy {a["distribution_strategy"]!r}; valid: '
                     f'{", ".join(train_step.DISTRIBUTION_STRATEGIES)} (train_uvf.distribution_strategy).')


@gin.configurable
def train_uvf(
    train_dir, environment=None, num_bin_actions=3, agent_class=None, meta_agent_class=None,
    state_preprocess_class=None, inverse_dynamics_class=None, exp_action_wrapper=None, replay_buffer=None,
    meta_replay_buffer=None, replay_num_steps=1, meta_replay_num_steps=1, critic_optimizer=None, actor_optimizer=None,
    meta_critic_optimizer=None, meta_actor_optimizer=None, repr_optimizer=None, relabel_contexts=False,
    meta_relabel_contexts=False, batch_size=64, repeat_size=0, num_episodes_train=2000, initial_episodes=2,
    initial_steps=None, num_updates_per_observation=1, num_collect_per_update=1, num_collect_per_meta_update=1,
    gamma=1.0, meta_gamma=1.0, reward_scale_factor=1.0, target_update_period=1, should_stop_early=None,
    clip_gradient_norm=0.0, summarize_gradients=False, debug_summaries=False, log_every_n_steps=100,
    prefetch_queue_capacity=2, policy_save_dir='policy', save_policy_every_n_steps=1000, save_policy_interval_secs=0,
    replay_context_ratio=0.0, next_state_as_context_ratio=0.0, state_index=0, zero_timer_ratio=0.0, timer_index=-1,
    debug=False, max_policies_to_save=None, max_steps_per_episode=None, load_path=LOAD_PATH,
    goal_sample_strategy='sample', save_interval_secs=300, save_summaries_secs=30, distribution_strategy='default',
    seed=None, steps_per_call=100, jit_compile=False, skip_delayed_actor_step=False):
  """Trains the meta and low-level agents of HIRO, writing checkpoints and summaries to `train_dir`.

  A run directory holding a full checkpoint resumes from it (counters, networks, optimizers, replay buffers,
  contexts, collection state, random generators and the environment's state).

  Args (the original's, as bound by configs/uvf/configs/train_uvf.gin):
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
  strategy = train_step.make_strategy(distribution_strategy)
  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(environment, agent_class, meta_agent_class,
                                                                  state_preprocess_class, inverse_dynamics_class,
                                                                  strategy, debug_summaries=debug_summaries)

  update_settings = train_settings.UpdateSettings(
      batch_size=int(batch_size),
      gamma=float(gamma),
      meta_gamma=float(np.ravel(meta_gamma)[0]),  # a 1-tuple in TF1
      reward_scale_factor=float(reward_scale_factor),
      target_update_period=int(target_update_period),
      num_updates_per_observation=int(num_updates_per_observation),
      num_collect_per_update=int(num_collect_per_update),
      num_collect_per_meta_update=int(num_collect_per_meta_update),
      goal_sample_strategy=goal_sample_strategy,
      seed=seed,
      jit_compile=bool(jit_compile),
      skip_delayed_actor_step=bool(skip_delayed_actor_step))
  loop_settings = train_settings.LoopSettings(
      total_steps=int(num_episodes_train * max_steps_per_episode + protocol.EXTRA_STEPS),
      initial_steps=int(initial_steps), max_steps_per_episode=int(max_steps_per_episode),
      steps_per_call=int(steps_per_call), log_every_n_steps=int(log_every_n_steps or 0),
      save_summaries_secs=save_summaries_secs, save_interval_secs=save_interval_secs, policy_save_dir=policy_save_dir,
      save_policy_every_n_steps=int(save_policy_every_n_steps or
                                    0), save_policy_interval_secs=save_policy_interval_secs,
      max_policies_to_save=max_policies_to_save, load_path=load_path)
  trainer = train_step.HiroTrainer(
      py_env=environment, uvf_agent=uvf_agent, meta_agent=meta_agent, state_preprocess=state_preprocess,
      replay_buffer=replay_buffer, meta_replay_buffer=meta_replay_buffer, optimizers={
          'critic': critic_optimizer,
          'actor': actor_optimizer,
          'meta_critic': meta_critic_optimizer,
          'meta_actor': meta_actor_optimizer
      }, strategy=strategy, settings=update_settings, repr_optimizer=repr_optimizer)
  if seed is not None:
    _reseed(trainer, seed)
  loop = run_loop.TrainingLoop(trainer, train_dir, settings=loop_settings, should_stop_early=should_stop_early)
  return loop.run()
