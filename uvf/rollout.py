"""HIRO's batched evaluation rollout: a batch of deterministic episodes in one `tf.function` call.

`ParallelEnvironments` steps N maze environments together (threads; called from the graph through `tf.numpy_function`),
and `Evaluator` runs N episodes of T steps on them with the restored agents (as efficient-hrl eval.py):

  for t = 0 .. T-1:  a_t = clip(mu_low(s_t (+) g_t))            (no noise; g_0 = 0)
                     s_{t+1}, r^env_t = env.step(a_t)
                     r_t = low context reward (s_repr_t, g_t, s_repr_{t+1}),  r^meta_t = task reward (s_t, s_{t+1}, T)
                     g_{t+1} = low_context.next_goal(g_t, t, ...)  (mu_meta(s_{t+1} (+) T) when t mod c == 0, else
                               g_t + s_repr_t[:k] - s_repr_{t+1}[:k])

The goal schedule is `uvf.context.context.Context.next_goal`, the same function that collection's `Context.step`
applies during training. `evaluate` (uvf/eval.py) turns the rollout's outputs into statistics; uvf/videos.py draws the
episodes it recorded.
"""

from concurrent import futures

import numpy as np
import tensorflow as tf

from uvf import collect
from uvf.environments import create_maze_env


class EvalError(ValueError):
  """A user-facing error of the evaluation (`uvf.eval`: a missing checkpoint, another configuration's checkpoint,
  a bad setting).

  `user_error` tells the launcher to print the message alone, without a traceback.
  """
  user_error = True


def episode_seed(seed, episode):
  """The reset seed of evaluation episode `episode` (the same start states for every mode and checkpoint), or None
  when `seed` is None (unseeded)."""
  if seed is None:
    return None
  return int(np.random.SeedSequence([int(seed), int(episode)]).generate_state(1)[0])


class ParallelEnvironments(object):
  """The Python side of the evaluation: a batch of maze environments stepped together.

  `reset` and `step` are called through `tf.numpy_function` from `Evaluator`'s rollout; each environment is stepped
  through the `collect.PyEnvironmentStepper` that training's collection uses, by `num_threads` threads (MuJoCo
  releases the GIL while it simulates). With `record(k)`, the states of the first k
  environments and the sub-goal positions are kept for the videos (rendered afterwards, on the main thread).
  """

  def __init__(self, envs, num_threads=1):
    self.envs = list(envs)
    if not self.envs:
      raise ValueError('ParallelEnvironments needs at least one environment.')
    self._steppers = [collect.PyEnvironmentStepper(env) for env in self.envs]
    self.obs_dim = int(self.envs[0].observation_spec().shape[0])
    self.action_dim = int(self.envs[0].action_spec().shape[0])
    num_threads = max(1, min(int(num_threads or 1), len(self.envs)))
    bounds = np.linspace(0, len(self.envs), num_threads + 1).astype(int)
    self._chunks = [range(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    self._pool = futures.ThreadPoolExecutor(num_threads) if num_threads > 1 else None
    self.seeds = [None] * len(self.envs)
    self._record = 0
    self._obs = np.zeros([len(self.envs), self.obs_dim], np.float32)
    self.recorded_qpos = []  # per frame: float64 [k, nq]
    self.recorded_subgoals = []  # per frame: float64 [k, 2] (None for the first frame)

  def __len__(self):
    return len(self.envs)

  def close(self):
    if self._pool is not None:
      self._pool.shutdown()
      self._pool = None

  def record(self, num_envs):
    """Keeps the physics states of the first `num_envs` environments from the next reset on (0: none)."""
    self._record = int(num_envs)
    self.recorded_qpos, self.recorded_subgoals = [], []

  def _map(self, fn):
    if self._pool is None:
      for chunk in self._chunks:
        fn(chunk)
    else:
      list(self._pool.map(fn, self._chunks))

  def _snapshot(self, subgoals):
    if self._record:
      self.recorded_qpos.append(np.stack([self.envs[i].wrapped_env.data.qpos.copy() for i in range(self._record)]))
      self.recorded_subgoals.append(subgoals)

  def reset(self):
    """Reseeds (see `seeds`) and resets every environment -> float32 [N, O]."""
    obs = np.empty([len(self.envs), self.obs_dim], np.float32)

    def reset_chunk(chunk):
      for i in chunk:
        if self.seeds[i] is not None:
          self.envs[i].seed(self.seeds[i])
        obs[i] = self._steppers[i].reset()

    self._map(reset_chunk)
    self._obs = obs
    self._snapshot(None)
    return obs

  def step(self, actions, goals):
    """actions float32 [N, A] (and the goals g [N, G] they were chosen for, for the videos) -> (observations
    float32 [N, O], rewards float32 [N], discounts float32 [N])."""
    n = len(self.envs)
    obs = np.empty([n, self.obs_dim], np.float32)
    rewards = np.empty([n], np.float32)
    discounts = np.empty([n], np.float32)

    def step_chunk(chunk):
      for i in chunk:
        obs[i], rewards[i], discounts[i], _ = self._steppers[i].step(actions[i])

    self._map(step_chunk)
    if self._record:
      # The sub-goal being pursued during this step, as a point: s_t[:2] + g_t[:2].
      k = self._record
      self._snapshot(self._obs[:k, :2].astype(np.float64) + np.asarray(goals[:k, :2], np.float64))
    self._obs = obs
    return obs, rewards, discounts


def next_goals(low_context, meta_context, meta_agent, goals, targets, t, state, next_state, state_repr,
               next_state_repr):
  """HIRO's goal schedule for one step t -> t + 1 (graph code; `Evaluator` and `uvf.pretrained.HiroPolicy` use it).

  The task target moves with the state in the *_img configurations (the meta context's transition); then the goal
  is the meta policy's on (s_{t+1}, target) when t mod c == 0, else g_t + s_repr_t[:k] - s_repr_{t+1}[:k]
  (`Context.next_goal`).

  Args:
    low_context, meta_context: the low-level and meta `Context`s; meta_agent: the meta agent.
    goals: float32 [N, G], g_t; targets: [N, M], the task targets of step t; t: int32 scalar.
    state, next_state: float32 [N, O], s_t and s_{t+1}; state_repr, next_state_repr: their state preprocess.

  Returns:
    (goals, targets): g_{t+1} float32 [N, G] and the targets of step t + 1 [N, M].
  """
  if meta_context.has_transition:  # the *_img configurations: a relative task target
    targets = meta_context.transition([targets], t, None, state=state, next_state=next_state, state_repr=state_repr,
                                      next_state_repr=next_state_repr)[0]

  def meta_goals():
    return tf.cast(meta_agent.actions(next_state, [targets]), tf.float32)

  return low_context.next_goal(goals, t, state_repr, next_state_repr, meta_goals), targets


class Evaluator(tf.Module):
  """Runs a batch of deterministic HIRO episodes in one `tf.function` call (see the module docstring, step 2).

  Args:
    environments: `ParallelEnvironments`.
    uvf_agent, meta_agent, state_preprocess: as built by `uvf.build.build_agents`.
  """

  def __init__(self, environments, uvf_agent, meta_agent, state_preprocess):
    super().__init__(name='evaluator')
    self.environments = environments
    self._uvf_agent, self._meta_agent = uvf_agent, meta_agent
    self._state_preprocess = state_preprocess
    self._low_context, self._meta_context = uvf_agent.tf_context, meta_agent.tf_context
    if len(self._low_context.vars) != 1 or len(self._meta_context.vars) != 1:
      raise EvalError('HIRO evaluation needs one low-level context (the goal) and one meta context (the target).')
    if not self._low_context.meta_action_every_n or not self._low_context.has_transition:
      raise EvalError('The low Context needs meta_action_every_n and context_transition_fn (gin: '
                      'agent/Context.meta_action_every_n = 10, agent/Context.context_transition_fn = '
                      '@relative_context_transition_fn).')
    spec = uvf_agent.action_spec
    self._action_min = tf.constant(np.asarray(spec.minimum, np.float32))
    self._action_max = tf.constant(np.asarray(spec.maximum, np.float32))
    self.goal_dim = int(self._low_context.context_specs[0].shape[0])
    self.target_dim = int(self._meta_context.context_specs[0].shape[0])
    self._rollout = tf.function(self._rollout_fn)

  @property
  def rollout_function(self):
    """The compiled rollout (for its tracing count)."""
    return self._rollout

  def modes(self):
    """The meta context's sampler modes."""
    return self._meta_context.modes

  def targets(self, mode, num_episodes):
    """float32 [E, M]: the task target of each episode, from the meta context's sampler of `mode`."""
    return self._meta_context.sample_contexts(mode, num_episodes)[0][0]

  def _env_reset(self):
    n, o = len(self.environments), self.environments.obs_dim
    obs = tf.numpy_function(self.environments.reset, [], tf.float32, stateful=True, name='eval_env_reset')
    obs.set_shape([n, o])
    return obs

  def _env_step(self, actions, goals):
    n, o = len(self.environments), self.environments.obs_dim
    obs, rewards, discounts = tf.numpy_function(self.environments.step, [actions, goals],
                                                [tf.float32, tf.float32, tf.float32], stateful=True,
                                                name='eval_env_step')
    obs.set_shape([n, o])
    rewards.set_shape([n])
    discounts.set_shape([n])
    return obs, rewards, discounts

  def _rollout_fn(self, targets, num_steps):
    """One batch of episodes.

    Args:
      targets: float32 [N, M], the task target of each episode.
      num_steps: int32 scalar, T.

    Returns:
      dict: 'rewards', 'meta_rewards', 'discounts' float32 [T, N]; 'goals' float32 [T, N, G] (g_t, the goal
      step t's action was chosen for); 'final_states', 'previous_states' float32 [N, O] (s_T, s_{T-1});
      'final_targets' float32 [N, M] (the target of the final step).
    """
    n = len(self.environments)
    obs = self._env_reset()
    goals = tf.zeros([n, self.goal_dim], tf.float32)
    previous = obs
    final_targets = targets
    reward_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    meta_reward_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    discount_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    goal_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n, self.goal_dim])
    for t in tf.range(num_steps):
      actions = tf.clip_by_value(self._uvf_agent.actions(obs, [goals]), self._action_min, self._action_max)
      next_obs, env_rewards, discounts = self._env_step(actions, goals)
      state_repr, next_state_repr = self._state_preprocess(obs), self._state_preprocess(next_obs)
      low_rewards, _ = self._low_context.compute_rewards(state_repr, actions, env_rewards, next_state_repr, [goals])
      meta_rewards, _ = self._meta_context.compute_rewards(obs, goals, env_rewards, next_obs, [targets])
      final_targets = targets
      goal_array = goal_array.write(t, goals)
      goals, targets = next_goals(self._low_context, self._meta_context, self._meta_agent, goals, targets, t, obs,
                                  next_obs, state_repr, next_state_repr)
      reward_array = reward_array.write(t, tf.cast(tf.reshape(low_rewards, [n]), tf.float32))
      meta_reward_array = meta_reward_array.write(t, tf.cast(tf.reshape(meta_rewards, [n]), tf.float32))
      discount_array = discount_array.write(t, discounts)
      previous = obs
      obs = next_obs
    return {
        'rewards': reward_array.stack(),
        'meta_rewards': meta_reward_array.stack(),
        'discounts': discount_array.stack(),
        'final_states': obs,
        'previous_states': previous,
        'final_targets': final_targets,
        'goals': goal_array.stack()
    }

  def run(self, targets, num_steps, seeds, record=0):
    """Runs len(environments) episodes of `num_steps` steps -> dict of NumPy arrays (see `_rollout_fn`; [N, T]
    for the per-step ones, [N, T, G] for 'goals'). `seeds`: the reset seed of each environment (None entries:
    unseeded)."""
    self.environments.seeds = list(seeds)
    self.environments.record(record)
    out = self._rollout(tf.convert_to_tensor(targets, tf.float32), tf.constant(int(num_steps), tf.int32))
    out = {key: value.numpy() for key, value in out.items()}
    for key in ('rewards', 'meta_rewards', 'discounts'):
      out[key] = out[key].T
    out['goals'] = np.swapaxes(out['goals'], 0, 1)
    return out


def make_environments(environment, num):
  """`environment` and num - 1 more of the same kind (gin: the bound `create_maze_env()`)."""
  envs = [environment]
  for _ in range(num - 1):
    try:
      env = create_maze_env.create_maze_env()
    except ValueError as e:
      raise EvalError(f'evaluate runs its episodes on a batch of environments built with create_maze_env() as '
                      f'bound by gin (create_maze_env.env_name), and that failed: {e}') from None
    if (type(env) is not type(environment) or env.observation_spec() != environment.observation_spec() or
        env.action_spec() != environment.action_spec()):
      raise EvalError(f'evaluate.environment ({type(environment).__name__}, observation '
                      f'{environment.observation_spec().shape}) differs from create_maze_env() as bound by gin '
                      f'({type(env).__name__}, {env.observation_spec().shape}); bind evaluate.environment = '
                      '@create_maze_env().')
    envs.append(env)
  return envs
