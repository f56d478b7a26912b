"""One environment step of HIRO's data collection: act, step the contexts, write the transitions (original: train.py
`collect_experience` in tensorflow/models research/efficient-hrl).

`Collector.step()` runs inside a `tf.function`; the environment step is its only Python work (`tf.numpy_function`).
Per call, with s the current observation, g the current goal and T the task target:

  1. a = clip(mu(s ⊕ g) + N(0, stddev^2)) (gin `uvf_add_noise_fn`); the environment steps: (is_last, r, discount, s').
  2. global_step += 1 (if `step_cond_fn`); the episode ends if `reset_episode_cond_fn` (HIRO: global_step mod 500 == 0;
     the conditions see the incremented step count and the episode count before its increment); num_episodes and
     num_resets count the ends and the environment resets.
  3. Not at an episode end: the low-level reward of the step (summaries only) and the meta reward
     r_meta = meta reward fn(s, g, s', T) (HIRO: -||s'[idx] - T||) are computed, then the contexts step: the goal
     becomes the noisy meta action on (s', T) when t mod c == 0, else g + s_repr - s'_repr; t += 1.
     At an episode end: the contexts reset (new target; g = 0; t = 0) and both rewards are 0.
  4. The low-level element [s, a, r, discount, s', g, g_next] is added to the low buffer. The meta element
     [s_start, g_start, R + 0.1 * r_meta, discount * (1 - episode end), s', states[c, O], actions[c, A], T_start,
     T_next] is added to the meta buffer when the episode ends or when t mod c == 1 and t > 1 (t after the step).
     The c (state, action) pairs come from writes at rows (t - 1) mod c (s') and (t - 2) mod c (a): states[i] and
     actions[i] belong to the same time step.
  5. The environment is reset if `reset_env_cond_fn` (HIRO: at every episode end).
  6. When t mod c == 1 a new meta transition starts: s_start = s', R = 0, g_start = g (the new goal), T_start = T;
     otherwise R += 0.1 * r_meta.

Consequences kept from the original: an episode's first step acts with g = 0 and its meta reward is dropped (R is
reset after it); the last step's meta reward is dropped too (rewards are 0 at the episode end), and the last meta
transition of an episode holds 9 pairs of that window plus one stale pair; the very first episode's target is 0 (the
contexts start at zero and are first reset at the first episode end).
"""

import collections
import json

import mujoco
import numpy as np
import tensorflow as tf

# The meta reward of a step is 0.1 x the meta context's reward (hard-coded in the original's collect_experience).
META_REWARD_SCALE = 0.1
# Episodes remembered by the episode reward summaries (the original's `episode_rewards` variables).
EPISODE_HISTORY = 100

# The replay elements (step 4 of the module docstring), in the original's entry order: the buffers store them under
# the keys '0', '1', ... (`<scope>/BufferVariable_<k>`) and return batches of them with a leading [B] dimension.
LowTransition = collections.namedtuple(
    'LowTransition', ['states', 'actions', 'rewards', 'discounts', 'next_states', 'goals', 'next_goals'])
LowTransition.__doc__ = """A low-level element: s [O], a [A], r [] (the environment's), discount [], s' [O], g [G], g' [G]."""
MetaTransition = collections.namedtuple('MetaTransition', [
    'states', 'goals', 'rewards', 'discounts', 'next_states', 'low_states', 'low_actions', 'contexts', 'next_contexts'
])
MetaTransition.__doc__ = """A meta element: s_t [O], the goal g_t set there [G], the sum of 0.1 x r_meta [], discount [],
s_{t+c} [O], the c low-level states [c, O] and actions [c, A] under g_t, the target T_t [M] and the next one [M]."""


class PyEnvironmentStepper(object):
  """The Python side of the environment step: wraps a maze `PyEnvironment` for `tf.numpy_function`.

  Also saves and restores the environment's state (physics, step counter, reset-noise generator) for checkpoints.
  """

  def __init__(self, env):
    self.env = env
    self.just_reset = False  # True when the last call was `reset` (an episode boundary).

  def step(self, action):
    """action float32 [A] -> (observation float32 [O], reward float32 [], discount float32 [], is_last bool [])."""
    self.just_reset = False
    time_step = self.env.step(action)
    return (time_step.observation, np.float32(time_step.reward), np.float32(time_step.discount),
            np.bool_(time_step.is_last()))

  def reset(self):
    """Resets the environment -> the first observation, float32 [O]."""
    self.just_reset = True
    return self.env.reset().observation

  def get_state(self):
    """The environment's state as a JSON string: qpos, qvel, step counter t and the reset-noise generator."""
    qpos, qvel, t = self.env.get_state()
    rng = self.env.rng.bit_generator.state
    return json.dumps({'qpos': qpos.tolist(), 'qvel': qvel.tolist(), 't': int(t), 'rng': rng})

  def set_state(self, text):
    """Restores `get_state`'s JSON. Exact after an environment reset (the physics' warm start is then zero, as
    here); mid-episode the contact solver's warm start is not restored (differences of order 1e-10)."""
    state = json.loads(text)
    robot = self.env.wrapped_env
    mujoco.mj_resetData(robot.model, robot.data)
    self.env.set_state((np.asarray(state['qpos']), np.asarray(state['qvel']), state['t']))
    self.env.rng.bit_generator.state = state['rng']


class Collector(tf.Module):
  """Collects one environment step into both replay buffers (see the module docstring).

  Args (all but `py_env` by keyword):
    py_env: the maze `PyEnvironment` (already reset).
    uvf_agent, meta_agent: the `UvfAgent` and `MetaAgent`.
    state_preprocess: `StatePreprocess` (s -> s_repr).
    replay_buffer, meta_replay_buffer: the `CircularBuffer`s; their storage is created here.
    global_step, num_episodes, num_resets: int64 scalar counter variables.
    mode: the context sampler mode of collection (the original: 'explore').
    seed: None or int, seeds the exploration noise.
  """

  def __init__(self, py_env, *, uvf_agent, meta_agent, state_preprocess, replay_buffer, meta_replay_buffer, global_step,
               num_episodes, num_resets, mode='explore', seed=None):
    super().__init__(name='collector')
    self._stepper = PyEnvironmentStepper(py_env)
    self._uvf_agent, self._meta_agent = uvf_agent, meta_agent
    self._state_preprocess = state_preprocess
    self.replay_buffer, self.meta_replay_buffer = replay_buffer, meta_replay_buffer
    self.global_step, self.num_episodes, self.num_resets = global_step, num_episodes, num_resets
    self._mode = mode
    self._low_context, self._meta_context = uvf_agent.tf_context, meta_agent.tf_context
    if len(self._low_context.vars) != 1 or len(self._meta_context.vars) != 1:
      raise ValueError('HIRO collection needs one low-level context (the goal) and one meta context (the target).')
    self._c = int(self._low_context.meta_action_every_n or 0)
    if self._c < 1:
      raise ValueError('The low Context needs meta_action_every_n (gin: agent/Context.meta_action_every_n = 10).')
    self.rng = tf.random.Generator.from_non_deterministic_state() if seed is None else (
        tf.random.Generator.from_seed(seed))
    self._action_fn = uvf_agent.add_noise_fn(uvf_agent.action, global_step=None, rng=self.rng)
    self._meta_action_fn = meta_agent.add_noise_fn(meta_agent.action, global_step=None, rng=self.rng)

    obs_spec = py_env.observation_spec()
    obs_dim = int(obs_spec.shape[0])
    action_dim = int(uvf_agent.action_spec.shape[0])
    goal_spec, target_spec = self._low_context.context_specs[0], self._meta_context.context_specs[0]
    self.obs_dim, self.action_dim = obs_dim, action_dim
    zeros = lambda shape: tf.zeros(shape, tf.float32)  # pylint: disable=unnecessary-lambda-assignment
    # The collection state (the original's root-scope variables states_var, actions_var, state_var, reward_var,
    # meta_action_var, meta_context_var0), the current observation and the episode statistics.
    self.current_obs = tf.Variable(py_env.current_time_step().observation, trainable=False, name='current_obs')
    self.states_var = tf.Variable(zeros([self._c, obs_dim]), trainable=False, name='states_var')
    self.actions_var = tf.Variable(zeros([self._c, action_dim]), trainable=False, name='actions_var')
    self.state_var = tf.Variable(zeros([obs_dim]), trainable=False, name='state_var')
    self.reward_var = tf.Variable(zeros([]), trainable=False, name='reward_var')
    self.meta_action_var = tf.Variable(zeros(goal_spec.shape), trainable=False, name='meta_action_var')
    self.meta_context_var0 = tf.Variable(zeros(target_spec.shape), trainable=False, name='meta_context_var0')
    self.episode_rewards = tf.Variable(zeros([EPISODE_HISTORY]), trainable=False, name='episode_rewards')
    self.episode_meta_rewards = tf.Variable(zeros([EPISODE_HISTORY]), trainable=False, name='episode_meta_rewards')
    # New: the distance to the target at each episode's last step, for the progress summaries.
    self.episode_final_distances = tf.Variable(zeros([EPISODE_HISTORY]), trainable=False,
                                               name='episode_final_distances')
    self.env_state = tf.Variable('', trainable=False, name='env_state')  # filled by `save_env_state`

    f32 = tf.float32
    replay_buffer.create_storage(
        LowTransition(states=tf.TensorSpec([obs_dim], f32), actions=tf.TensorSpec([action_dim],
                                                                                  f32), rewards=tf.TensorSpec([], f32),
                      discounts=tf.TensorSpec([], f32), next_states=tf.TensorSpec([obs_dim], f32),
                      goals=tf.TensorSpec(goal_spec.shape, f32), next_goals=tf.TensorSpec(goal_spec.shape, f32)))
    meta_replay_buffer.create_storage(
        MetaTransition(states=tf.TensorSpec([obs_dim], f32), goals=tf.TensorSpec(goal_spec.shape,
                                                                                 f32), rewards=tf.TensorSpec([], f32),
                       discounts=tf.TensorSpec([], f32), next_states=tf.TensorSpec([obs_dim], f32),
                       low_states=tf.TensorSpec([self._c, obs_dim],
                                                f32), low_actions=tf.TensorSpec([self._c, action_dim], f32),
                       contexts=tf.TensorSpec(target_spec.shape,
                                              f32), next_contexts=tf.TensorSpec(target_spec.shape, f32)))

  @property
  def stepper(self):
    """The `PyEnvironmentStepper` (Python side of the environment)."""
    return self._stepper

  @property
  def at_episode_boundary(self):
    """bool: whether the last collection step ended an episode and reset the environment (False before the first
    step). The environment's state is exact there, so a full checkpoint written now resumes exactly."""
    return self._stepper.just_reset

  @property
  def meta_action_every_n(self):
    return self._c

  def save_env_state(self):
    """Copies the environment's state into `env_state` (call eagerly before writing a checkpoint)."""
    self.env_state.assign(self._stepper.get_state())

  def restore_env_state(self):
    """Restores the environment from `env_state` (after restoring a checkpoint); False if it holds none."""
    text = self.env_state.numpy().decode()
    if not text:
      return False
    self._stepper.set_state(text)
    return True

  def _env_step(self, action):
    obs, reward, discount, is_last = tf.numpy_function(self._stepper.step, [action],
                                                       [tf.float32, tf.float32, tf.float32, tf.bool], stateful=True,
                                                       name='env_step')
    obs.set_shape([self.obs_dim])
    for x in (reward, discount, is_last):
      x.set_shape([])
    return obs, reward, discount, is_last

  def _env_reset(self):
    obs = tf.numpy_function(self._stepper.reset, [], tf.float32, stateful=True, name='env_reset')
    obs.set_shape([self.obs_dim])
    return obs

  def step(self):
    """Collects one environment step (call inside a `tf.function`; see the module docstring).

    Returns:
      dict of scalars: 'reward' (float32, the environment's), 'context_reward' and 'meta_reward' (float32, the
      low-level and meta rewards of the step, 0 at an episode end), 'episode_end' (bool).
    """
    low_context, meta_context = self._low_context, self._meta_context
    c = self._c
    state = self.current_obs.read_value()
    state_repr = self._state_preprocess(state)
    goal = low_context.vars[0].read_value()
    target = meta_context.vars[0].read_value()
    action = self._action_fn(state, None)
    next_state, reward, discount, is_last = self._env_step(action)
    next_state_repr = self._state_preprocess(next_state)

    step_cond = self._uvf_agent.step_cond_fn(state, action, is_last, self.global_step, self.num_episodes)
    self.global_step.assign_add(tf.cast(step_cond, tf.int64))
    steps = self.global_step.read_value()
    episodes = self.num_episodes.read_value()
    reset_episode = self._uvf_agent.reset_episode_cond_fn(state, action, is_last, steps, episodes)
    reset_env = self._uvf_agent.reset_env_cond_fn(state, action, is_last, steps, episodes)
    self.num_episodes.assign_add(tf.cast(reset_episode, tf.int64))
    self.num_resets.assign_add(tf.cast(reset_env, tf.int64))
    episode_end = tf.logical_or(reset_episode, tf.equal(discount, 0.0))

    batch = lambda x: tf.expand_dims(x, 0)  # pylint: disable=unnecessary-lambda-assignment
    meta_reward_now = meta_context.compute_rewards(batch(state), batch(goal), batch(reward), batch(next_state),
                                                   [batch(target)])[0][0]

    def continue_episode():
      context_reward = low_context.compute_rewards(batch(state_repr), batch(action), batch(reward),
                                                   batch(next_state_repr), [batch(goal)])[0][0]
      low_context.step(self._mode, meta_context=meta_context,
                       meta_action=lambda: self._meta_action_fn(next_state, None), state=state, next_state=next_state,
                       state_repr=state_repr, next_state_repr=next_state_repr)
      return tf.cast(context_reward, tf.float32), tf.cast(meta_reward_now, tf.float32)

    def begin_episode():
      low_context.reset(self._mode, meta_context=meta_context)
      return tf.zeros([]), tf.zeros([])

    context_reward, meta_reward = tf.cond(reset_episode, begin_episode, continue_episode)
    self._update_episode_stats(context_reward, meta_reward, -meta_reward_now, reset_episode)

    next_goal = low_context.vars[0].read_value()
    next_target = meta_context.vars[0].read_value()
    t = low_context.t.read_value()
    meta_end = tf.logical_and(tf.equal(t % c, 1), t > 1)
    self.actions_var.scatter_nd_update([[(t - 2) % c]], action[None])
    scaled_meta_reward = META_REWARD_SCALE * meta_reward
    self.replay_buffer.maybe_add(
        LowTransition(states=state, actions=action, rewards=reward, discounts=discount, next_states=next_state,
                      goals=goal, next_goals=next_goal), step_cond)
    meta_transition = MetaTransition(states=self.state_var.read_value(), goals=self.meta_action_var.read_value(),
                                     rewards=self.reward_var + scaled_meta_reward,
                                     discounts=discount * (1.0 - tf.cast(episode_end, tf.float32)),
                                     next_states=next_state, low_states=self.states_var.read_value(),
                                     low_actions=self.actions_var.read_value(),
                                     contexts=self.meta_context_var0.read_value(), next_contexts=next_target)
    self.meta_replay_buffer.maybe_add(meta_transition, tf.logical_and(step_cond, tf.logical_or(episode_end, meta_end)))

    self.current_obs.assign(tf.cond(reset_env, self._env_reset, lambda: next_state))
    meta_period = tf.equal(t % c, 1)
    self.states_var.scatter_nd_update([[(t - 1) % c]], next_state[None])
    self.state_var.assign(tf.where(meta_period, next_state, self.state_var))
    self.reward_var.assign(tf.where(meta_period, 0.0, self.reward_var + scaled_meta_reward))
    self.meta_action_var.assign(tf.where(meta_period, next_goal, self.meta_action_var))
    self.meta_context_var0.assign(tf.where(meta_period, next_target, self.meta_context_var0))
    return {
        'reward': reward,
        'context_reward': context_reward,
        'meta_reward': meta_reward,
        'episode_end': reset_episode
    }

  def _update_episode_stats(self, context_reward, meta_reward, distance, reset):
    """The original's `update_episode_rewards`: at an episode end shift in a 0, else add to entry 0."""

    def update(variable, value):
      shifted = tf.concat([[0.0], variable[:-1]], 0)
      added = tf.concat([variable[:1] + value, variable[1:]], 0)
      variable.assign(tf.where(reset, shifted, added))

    update(self.episode_rewards, context_reward)
    update(self.episode_meta_rewards, meta_reward)
    # New: the final distance of the episode that ends goes to entry 0 (entry 0 is the last finished episode).
    self.episode_final_distances.assign(
        tf.where(reset, tf.concat([[tf.cast(distance, tf.float32)], self.episode_final_distances[:-1]], 0),
                 self.episode_final_distances))

  def episode_summaries(self):
    """Averages over the remembered finished episodes: dict of float32 scalars and the [99] histories."""
    return {
        'avg_episode_rewards': tf.reduce_mean(self.episode_rewards[1:]),
        'avg_episode_meta_rewards': tf.reduce_mean(self.episode_meta_rewards[1:]),
        'episode_rewards': self.episode_rewards[1:],
        'episode_meta_rewards': self.episode_meta_rewards[1:],
    }
