"""HIRO evaluation: `evaluate` and `evaluate_checkpoint_repeatedly` (original: efficient-hrl eval.py and
utils/eval_utils.py; hiro.md sections 5.4 and 7).

`evaluate` builds the environment and both agents exactly as training does (`uvf.build.build_agents`, so the variable
names are the original's), then for each policy checkpoint `<checkpoint_dir>/<policy_save_dir>/model.ckpt-<N>` it
chooses (new ones as they appear, a `checkpoint_range`, or one `checkpoint_path`):

  1. restores the policy strictly by name (`uvf.checkpoints.restore_policy`; an original TF1 policy checkpoint works
     too);
  2. per mode of `eval_modes` (AntMaze: eval1, eval2, eval3, the meta context's ConstantSampler targets (16, 0),
     (16, 16), (0, 16)) runs `num_episodes_eval` deterministic episodes of `max_steps_per_episode` steps, all of
     them at once on a batch of environments (`Evaluator`): the low-level actor acts on s (+) g without noise; the
     goal starts at 0 and, after each step t (0-based), becomes the meta actor's goal mu_meta(s_{t+1} (+) T) when
     t mod c == 0 (c = `agent/Context.meta_action_every_n`, 10), else the goal transition h(s_t, g, s_{t+1}) =
     g + s_t[:k] - s_{t+1}[:k] on the state representations (uvf/context). Per step: the low-level reward
     r = low context reward fn (s_repr, g, s'_repr) and the meta reward r_meta = task reward fn (s, s', T)
     (AntMaze: -||s'[0:2] - T||);
  3. per episode (`episode_statistics`): reward = sum_t gamma^t * discount_t * r_t, meta_reward likewise,
     last_reward / last_meta_reward = the values of the final step, final distance = ||s_T[idx] - T|| on the task's
     state indices (task/negative_distance.state_indices; AntMaze [0, 1]) of the final state s_T (T =
     max_steps_per_episode, every step a real step: no reset zero at the end), success = final distance < 5;
  4. writes TensorBoard scalars at the checkpoint's global step under `eval_dir` with the original tags
     (`Reward/average_<mode>_hrl_reward`, `Reward/last_<mode>_hrl_reward`, `Reward/average_<mode>_hrl_meta_reward`,
     `Reward/last_<mode>_hrl_meta_reward`, `Reward/average_<mode>_hrl_success`), prints a per-goal table, appends
     one row per checkpoint x mode to `eval_dir/results.json` and `eval_dir/results.csv`, and with
     `generate_videos` writes `eval_dir/videos/<mode>_hrl_step_<N>.mp4` (ffmpeg) or `.gif` (Pillow).

Checkpoints recorded in `results.json` are not evaluated again by the poller or a `checkpoint_range` (an explicit
`checkpoint_path` always is). A checkpoint that is not complete yet (an `.index` without all its data files) or does
not load is skipped and tried again at the next poll.
"""

import csv
import datetime
import glob
import io
import json
import os
import re
import shutil
import subprocess
import time
from concurrent import futures

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from uvf import checkpoints
from uvf import representation
from uvf import build
from uvf.environments import create_maze_env
from uvf.environments import rendering

# Success: the final distance to the target is below this (the original: last_meta_reward > -5).
SUCCESS_DISTANCE = 5.0
RESULTS_JSON = 'results.json'
RESULTS_CSV = 'results.csv'
VIDEO_DIR = 'videos'
CHECKPOINT_NAME = checkpoints.CHECKPOINT_NAME
# The columns of results.csv (results.json rows also hold the per-episode lists `episodes`).
CSV_FIELDS = ('step', 'mode', 'goal', 'num_episodes', 'episode_steps', 'success_rate', 'mean_reward', 'last_reward',
              'mean_meta_reward', 'last_meta_reward', 'mean_final_distance', 'wall_time_s', 'checkpoint',
              'evaluated_at')
SUMMARY_TAGS = (('Reward/average_%s_reward', 'mean_reward'), ('Reward/last_%s_reward', 'last_reward'),
                ('Reward/average_%s_meta_reward', 'mean_meta_reward'),
                ('Reward/last_%s_meta_reward', 'last_meta_reward'), ('Reward/average_%s_success', 'success_rate'))
# video_settings keys and defaults: frame size in pixels, frames per second of the file (an environment step is
# 0.1 s of simulated time for the ant, so 30 fps plays 3x faster than real time), and one frame every n steps.
VIDEO_DEFAULTS = {'width': 480, 'height': 360, 'fps': 30, 'every_n_steps': 1}
_MARKER_TARGET_RGBA = (0.9, 0.1, 0.1, 0.8)
_MARKER_SUBGOAL_RGBA = (0.1, 0.3, 0.9, 0.6)


class EvalError(ValueError):
  """A user-facing evaluation error (a missing checkpoint, another configuration's checkpoint, a bad setting).

  `user_error` tells the launcher to print the message alone, without a traceback.
  """
  user_error = True


class CheckpointLoadError(checkpoints.NotACheckpointError):
  """A checkpoint could not be read (incomplete or damaged files); the poller tries it again later."""


# What reading a checkpoint that is still being written (or damaged) raises: TF errors, a short read of a data file
# (IndexError: 'Read less bytes than requested'), `uvf.checkpoints.NotACheckpointError`.
LOAD_ERRORS = (checkpoints.NotACheckpointError, tf.errors.OpError, IndexError, EOFError)


# ----------------------------------------------------------------------------------------------------------------------
# Statistics.


def episode_statistics(rewards, meta_rewards, final_distances, discounts=None, gamma=1.0,
                       success_distance=SUCCESS_DISTANCE):
  """The original's `compute_reward` / `compute_average_reward` on finished episodes.

  Args:
    rewards: float [E, T], the low-level (context) reward of each step of E episodes of T steps.
    meta_rewards: float [E, T], the task (meta) reward of each step.
    final_distances: float [E], the distance to the target at each episode's final state.
    discounts: None (all 1) or float [E, T], the environment's discounts (the maze's are 1).
    gamma: discount of the sums: step t weighs gamma^t (HIRO's eval: 1.0).
    success_distance: an episode succeeds when its final distance is below this.

  Returns:
    dict: per episode (float64 [E] lists) 'episode_rewards' (sum_t gamma^t d_t r_t), 'episode_meta_rewards',
    'episode_last_rewards', 'episode_last_meta_rewards' (r at the last step), 'episode_final_distances',
    'episode_successes' (bool); and their means 'mean_reward', 'last_reward', 'mean_meta_reward',
    'last_meta_reward', 'mean_final_distance', 'success_rate'.
  """
  rewards = np.asarray(rewards, np.float64)
  meta_rewards = np.asarray(meta_rewards, np.float64)
  final_distances = np.asarray(final_distances, np.float64).reshape(-1)
  if rewards.ndim != 2 or rewards.shape != meta_rewards.shape or rewards.shape[0] != final_distances.shape[0]:
    raise ValueError(f'episode_statistics: rewards {rewards.shape} and meta_rewards {meta_rewards.shape} must be '
                     f'[episodes, steps] and final_distances {final_distances.shape} [episodes].')
  if rewards.shape[0] == 0 or rewards.shape[1] == 0:
    raise ValueError('episode_statistics: no episodes or no steps.')
  discounts = np.ones_like(rewards) if discounts is None else np.asarray(discounts, np.float64)
  weights = discounts * gamma ** np.arange(rewards.shape[1], dtype=np.float64)[None]
  episode_rewards = np.sum(rewards * weights, axis=1)
  episode_meta_rewards = np.sum(meta_rewards * weights, axis=1)
  successes = final_distances < success_distance
  return {
      'episode_rewards': episode_rewards.tolist(),
      'episode_meta_rewards': episode_meta_rewards.tolist(),
      'episode_last_rewards': rewards[:, -1].tolist(),
      'episode_last_meta_rewards': meta_rewards[:, -1].tolist(),
      'episode_final_distances': final_distances.tolist(),
      'episode_successes': successes.tolist(),
      'mean_reward': float(np.mean(episode_rewards)),
      'last_reward': float(np.mean(rewards[:, -1])),
      'mean_meta_reward': float(np.mean(episode_meta_rewards)),
      'last_meta_reward': float(np.mean(meta_rewards[:, -1])),
      'mean_final_distance': float(np.mean(final_distances)),
      'success_rate': float(np.mean(successes)),
  }


def final_distances(final_states, previous_states, targets, state_indices, relative=False):
  """The distance to the task target at the final state of each episode: float64 [E].

  Args:
    final_states: [E, O], s_T.
    previous_states: [E, O], s_{T-1} (used only with `relative`).
    targets: [E, M], the task context of the final step.
    state_indices: the M state dimensions compared with the target (AntMaze: [0, 1]).
    relative: the task context is relative to the state (the *_img configurations): the target point is
      s_{T-1}[idx] + T.
  """
  final_states = np.asarray(final_states, np.float64)
  targets = np.asarray(targets, np.float64)
  idx = list(state_indices)
  goal = targets + np.asarray(previous_states, np.float64)[:, idx] if relative else targets
  return np.sqrt(np.sum((final_states[:, idx] - goal) ** 2, axis=-1))


def task_state_indices(target_dim):
  """(state indices, relative) of the task reward (gin `task/negative_distance`): the state dimensions the target is
  compared with (default: the first `target_dim`) and whether the target is relative to the state."""
  def query(name, default):
    try:
      value = gin.query_parameter(f'task/negative_distance.{name}')
    except ValueError:
      return default
    return default if value is None else value
  indices = [int(i) for i in query('state_indices', list(range(target_dim)))]
  if len(indices) != target_dim:
    raise EvalError(f'task/negative_distance.state_indices = {indices} has {len(indices)} entries for a task '
                    f'target of dimension {target_dim} (meta/Context.context_shapes).')
  return indices, bool(query('relative_context', False))


def episode_seed(seed, episode):
  """The reset seed of evaluation episode `episode` (the same start states for every mode and checkpoint), or None
  when `seed` is None (unseeded)."""
  if seed is None:
    return None
  return int(np.random.SeedSequence([int(seed), int(episode)]).generate_state(1)[0])


# ----------------------------------------------------------------------------------------------------------------------
# Environments and the batched rollout.


class ParallelEnvironments(object):
  """The Python side of the evaluation: a batch of maze environments stepped together.

  `reset` and `step` are called through `tf.numpy_function` from `Evaluator`'s rollout; the environments are stepped
  by `num_threads` threads (MuJoCo releases the GIL while it simulates). With `record(k)`, the states of the first k
  environments and the sub-goal positions are kept for the videos (rendered afterwards, on the main thread).
  """

  def __init__(self, envs, num_threads=1):
    self.envs = list(envs)
    if not self.envs:
      raise ValueError('ParallelEnvironments needs at least one environment.')
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
        obs[i] = self.envs[i].reset().observation

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
        time_step = self.envs[i].step(actions[i])
        obs[i] = time_step.observation
        rewards[i] = time_step.reward
        discounts[i] = time_step.discount

    self._map(step_chunk)
    if self._record:
      # The sub-goal being pursued during this step, as a point: s_t[:2] + g_t[:2].
      k = self._record
      self._snapshot(self._obs[:k, :2].astype(np.float64) + np.asarray(goals[:k, :2], np.float64))
    self._obs = obs
    return obs, rewards, discounts


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
    self._c = int(self._low_context.meta_action_every_n or 0)
    # The contexts' transition functions (the original Context.step applies them to its variables; here they are
    # applied to the batch).
    self._low_transition = self._low_context._context_transition_fn  # pylint: disable=protected-access
    self._meta_transition = self._meta_context._context_transition_fn  # pylint: disable=protected-access
    if self._c < 1 or self._low_transition is None:
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
      dict: 'rewards', 'meta_rewards', 'discounts' float32 [T, N]; 'final_states', 'previous_states' float32
      [N, O] (s_T, s_{T-1}); 'final_targets' float32 [N, M] (the target of the final step).
    """
    n = len(self.environments)
    obs = self._env_reset()
    goals = tf.zeros([n, self.goal_dim], tf.float32)
    previous = obs
    final_targets = targets
    reward_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    meta_reward_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    discount_array = tf.TensorArray(tf.float32, size=num_steps, element_shape=[n])
    c = self._c
    for t in tf.range(num_steps):
      actions = tf.clip_by_value(self._uvf_agent.actions(obs, [goals]), self._action_min, self._action_max)
      next_obs, env_rewards, discounts = self._env_step(actions, goals)
      state_repr, next_state_repr = self._state_preprocess(obs), self._state_preprocess(next_obs)
      low_rewards, _ = self._low_context.compute_rewards(state_repr, actions, env_rewards, next_state_repr, [goals])
      meta_rewards, _ = self._meta_context.compute_rewards(obs, goals, env_rewards, next_obs, [targets])
      final_targets = targets
      if self._meta_transition is not None:  # the *_img configurations: a relative task target
        targets = self._meta_transition([targets], t, None, state=obs, next_state=next_obs, state_repr=state_repr,
                                        next_state_repr=next_state_repr)[0]
      new_targets = targets

      def meta_goals(states=next_obs, contexts=new_targets):
        return tf.cast(self._meta_agent.actions(states, [contexts]), tf.float32)

      def relative_goals(goals=goals, state_repr=state_repr, next_state_repr=next_state_repr):
        return tf.cast(self._low_transition([goals], t, None, state=state_repr, next_state=next_state_repr)[0],
                       tf.float32)

      goals = tf.cond(tf.equal(t % c, 0), meta_goals, relative_goals)
      reward_array = reward_array.write(t, tf.cast(tf.reshape(low_rewards, [n]), tf.float32))
      meta_reward_array = meta_reward_array.write(t, tf.cast(tf.reshape(meta_rewards, [n]), tf.float32))
      discount_array = discount_array.write(t, discounts)
      previous = obs
      obs = next_obs
    return {'rewards': reward_array.stack(), 'meta_rewards': meta_reward_array.stack(),
            'discounts': discount_array.stack(), 'final_states': obs, 'previous_states': previous,
            'final_targets': final_targets}

  def run(self, targets, num_steps, seeds, record=0):
    """Runs len(environments) episodes of `num_steps` steps -> dict of NumPy arrays (see `_rollout_fn`; [N, T]
    for the per-step ones). `seeds`: the reset seed of each environment (None entries: unseeded)."""
    self.environments.seeds = list(seeds)
    self.environments.record(record)
    out = self._rollout(tf.convert_to_tensor(targets, tf.float32), tf.constant(int(num_steps), tf.int32))
    out = {key: value.numpy() for key, value in out.items()}
    for key in ('rewards', 'meta_rewards', 'discounts'):
      out[key] = out[key].T
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


# ----------------------------------------------------------------------------------------------------------------------
# Videos.


def _frame_text(image, text):
  from PIL import Image, ImageDraw  # pylint: disable=g-import-not-at-top
  picture = Image.fromarray(image)
  draw = ImageDraw.Draw(picture)
  draw.rectangle([0, 0, picture.width, 14], fill=(0, 0, 0))
  draw.text((4, 2), text, fill=(255, 255, 255))
  return np.asarray(picture)


def render_frames(env, recorded_qpos, recorded_subgoals, episode, targets, distances, mode, step, width, height,
                  every_n_steps=1, subgoals=True):
  """The frames of one recorded episode, uint8 [F, height, width, 3].

  The physics states are replayed into a separate `MjData` of `env`'s model and drawn from the maze camera, with
  the task target (red sphere) and the current sub-goal s_t[:2] + g_t[:2] (blue, `subgoals`) added to the scene and a
  caption (mode, checkpoint step, episode step, distance to the target).
  """
  import mujoco  # pylint: disable=g-import-not-at-top
  model = env.wrapped_env.model
  data = mujoco.MjData(model)
  model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
  model.vis.global_.offheight = max(model.vis.global_.offheight, height)
  renderer = rendering.renderer(model, height, width)
  try:
    # Shadows and reflections make OSMesa (CPU) rendering ~10x slower.
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    camera = env._maze_camera() if hasattr(env, '_maze_camera') else -1  # pylint: disable=protected-access
    target = np.asarray(targets[episode], np.float64)
    target_pos = np.array([target[0], target[1], target[2] if target.shape[0] > 2 else 0.5])
    size = 0.05 * getattr(env, 'MAZE_SIZE_SCALING', 8)
    frames = []
    for t in range(0, len(recorded_qpos), every_n_steps):
      data.qpos[:] = recorded_qpos[t][episode]
      mujoco.mj_forward(model, data)
      renderer.update_scene(data, camera=camera)
      markers = [(target_pos, 2 * size, _MARKER_TARGET_RGBA)]
      if subgoals and recorded_subgoals[t] is not None:
        markers.append((np.array([*recorded_subgoals[t][episode], 0.5]), size, _MARKER_SUBGOAL_RGBA))
      scene = renderer.scene
      for pos, radius, rgba in markers:
        if scene.ngeom < scene.maxgeom:
          mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE, np.array([radius, 0., 0.]),
                              pos, np.eye(3).ravel(), np.asarray(rgba, np.float32))
          scene.ngeom += 1
      distance = f'  distance {distances[t - 1]:.2f}' if t > 0 else ''
      frames.append(_frame_text(renderer.render(), f'{mode}  checkpoint {step}  t = {t}{distance}'))
    return np.stack(frames)
  finally:
    renderer.close()


def write_video(frames, path, fps):
  """Writes uint8 [F, H, W, 3] frames to `path` + '.mp4' (ffmpeg on PATH) or else `path` + '.gif' (Pillow, with a
  warning saying how to get MP4). Returns the file written."""
  frames = np.asarray(frames, np.uint8)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  ffmpeg = shutil.which('ffmpeg')
  problem = 'ffmpeg is not on PATH'
  if ffmpeg:
    target = path + '.mp4'
    _, height, width, _ = frames.shape
    tmp = path + '.partial.mp4'  # renamed when complete
    for codec in ('libx264', 'mpeg4'):
      command = [ffmpeg, '-y', '-loglevel', 'error', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s',
                 f'{width}x{height}', '-r', str(fps), '-i', '-', '-an', '-c:v', codec, '-pix_fmt', 'yuv420p',
                 '-f', 'mp4', tmp]
      result = subprocess.run(command, input=frames.tobytes(), capture_output=True, check=False)
      if result.returncode == 0:
        os.replace(tmp, target)
        return target
      if os.path.exists(tmp):
        os.remove(tmp)
      problem = f'ffmpeg failed ({codec}): {result.stderr.decode(errors="replace").strip()[-300:]}'
  from PIL import Image  # pylint: disable=g-import-not-at-top
  logging.warning('Writing the evaluation video as a GIF (%s). For MP4 install ffmpeg, e.g. apt-get install ffmpeg.',
                  problem)
  target = path + '.gif'
  images = [Image.fromarray(frame) for frame in frames]
  tmp = path + '.partial.gif'
  images[0].save(tmp, format='GIF', save_all=True, append_images=images[1:], duration=max(1000 // fps, 20), loop=0)
  os.replace(tmp, target)
  return target


# ----------------------------------------------------------------------------------------------------------------------
# Results.


class Results(object):
  """The results table of an eval directory: `results.json` (a list of rows, with the per-episode values) and
  `results.csv` (the `CSV_FIELDS` columns). Rows are only ever added."""

  def __init__(self, eval_dir):
    self.json_path = os.path.join(eval_dir, RESULTS_JSON)
    self.csv_path = os.path.join(eval_dir, RESULTS_CSV)
    self.rows = []
    if tf.io.gfile.exists(self.json_path):
      try:
        with tf.io.gfile.GFile(self.json_path) as f:
          self.rows = json.load(f)
        if not isinstance(self.rows, list):
          raise ValueError('not a list of rows')
      except ValueError as e:
        raise EvalError(f'{self.json_path} cannot be read ({e}); move it away to start a new results table.') from None

  def evaluated_steps(self, modes):
    """The steps that have a row for every mode of `modes`: the global steps and the <step> of the rows'
    `model.ckpt-<step>` checkpoint names (the same for this port's checkpoints)."""
    by_step = {}
    for row in self.rows:
      steps = {int(row['step'])}
      match = re.search(r'-(\d+)$', str(row.get('checkpoint', '')))
      if match:
        steps.add(int(match.group(1)))
      for step in steps:
        by_step.setdefault(step, set()).add(row['mode'])
    return {step for step, found in by_step.items() if set(modes) <= found}

  def append(self, rows):
    self.rows.extend(rows)
    directory = os.path.dirname(self.json_path)
    tf.io.gfile.makedirs(directory)
    tmp = self.json_path + '.tmp'
    with tf.io.gfile.GFile(tmp, 'w') as f:
      json.dump(self.rows, f, indent=1)
    tf.io.gfile.rename(tmp, self.json_path, overwrite=True)
    new_file = not tf.io.gfile.exists(self.csv_path)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, extrasaction='ignore', lineterminator='\n')
    if new_file:
      writer.writeheader()
    for row in rows:
      writer.writerow(dict(row, goal=json.dumps(row['goal'])))
    with open(self.csv_path, 'a', encoding='utf-8') as f:
      f.write(text.getvalue())


def format_table(rows):
  """The per-goal table printed after each checkpoint."""
  lines = [f'{"mode":<8} {"goal":<16} {"success":>8} {"reward":>11} {"meta_reward":>12} {"final_dist":>11} '
           f'{"time_s":>7}']
  for row in rows:
    goal = json.dumps(row['goal']) if not isinstance(row['goal'], str) else row['goal']
    lines.append(f'{row["mode"]:<8} {goal:<16} {row["success_rate"]:>8.2f} {row["mean_reward"]:>11.2f} '
                 f'{row["mean_meta_reward"]:>12.2f} {row["mean_final_distance"]:>11.2f} {row["wall_time_s"]:>7.1f}')
  return '\n'.join(lines)


# ----------------------------------------------------------------------------------------------------------------------
# Checkpoint selection.


def list_checkpoints(directory):
  """[(step, prefix)] of the `model.ckpt-<step>.index` files in `directory`, by step."""
  return checkpoints.list_checkpoints(directory, CHECKPOINT_NAME)


def checkpoint_complete(prefix):
  """True when the checkpoint `prefix` has its index and all its data shards."""
  if not tf.io.gfile.exists(prefix + '.index'):
    return False
  shards = tf.io.gfile.glob(glob.escape(prefix) + '.data-*-of-*')
  if not shards:
    return False
  match = re.search(r'-of-(\d+)$', shards[0])
  return match is not None and len(shards) == int(match.group(1))


def _no_checkpoint_message(directory):
  try:
    every = gin.query_parameter('train_uvf.save_policy_every_n_steps')
  except ValueError:
    every = None
  every = f' ({every})' if every else ''
  return (f'no policy checkpoint in {directory} (looked for {CHECKPOINT_NAME}-<step>.index). Training writes one '
          f'into <train_dir>/policy every train_uvf.save_policy_every_n_steps{every} environment steps; pass the '
          f'training directory as --train_dir / --checkpoint_dir, or one checkpoint with --checkpoint_path.')


@gin.configurable
def evaluate_checkpoint_repeatedly(checkpoint_dir,
                                   evaluate_checkpoint_fn,
                                   eval_interval_secs=600,
                                   max_number_of_evaluations=None,
                                   checkpoint_timeout=None,
                                   timeout_fn=None,
                                   already_evaluated=()):
  """Evaluates each new checkpoint of `checkpoint_dir`, oldest first, as it appears.

  Every `eval_interval_secs` seconds the directory is listed; each complete `model.ckpt-<step>` not evaluated yet is
  passed to `evaluate_checkpoint_fn(prefix)`, which returns True to stop. A checkpoint still being written (an index
  without all its data files) or one that fails to load (`uvf.checkpoints.NotACheckpointError`, TF errors) is
  skipped and tried again at the next poll (`LOAD_ERRORS`). Other exceptions (a checkpoint of another
  configuration) propagate.

  Args:
    checkpoint_dir: the directory of the `model.ckpt-<step>` checkpoints (`<train_dir>/policy`).
    evaluate_checkpoint_fn: fn(checkpoint prefix) -> bool, True to stop.
    eval_interval_secs: seconds between two listings of the directory.
    max_number_of_evaluations: None (no limit) or stop after this many evaluations.
    checkpoint_timeout: None (wait forever) or, after this many seconds without a new checkpoint, call `timeout_fn`.
    timeout_fn: None (stop at the timeout) or fn() -> bool: True stops, False waits `checkpoint_timeout` more.
    already_evaluated: the steps not to evaluate (new; `evaluate` passes those recorded in its results).

  Returns:
    The number of checkpoints evaluated.
  """
  if max_number_of_evaluations is not None and max_number_of_evaluations <= 0:
    raise ValueError('`max_number_of_evaluations` must be either None or a positive number.')
  done = set(int(step) for step in already_evaluated)
  failures = {}
  evaluations = 0
  last_found = time.time()
  waiting_logged = False
  while True:
    for step, prefix in list_checkpoints(checkpoint_dir):
      if step in done:
        continue
      if not checkpoint_complete(prefix):
        _log_skip(failures, prefix, 'its data files are not complete yet (being written?)')
        continue
      try:
        should_stop = evaluate_checkpoint_fn(prefix)
      except LOAD_ERRORS as e:
        _log_skip(failures, prefix, f'it does not load ({type(e).__name__}: {str(e).strip()[:300]})')
        continue
      done.add(step)
      evaluations += 1
      last_found = time.time()
      waiting_logged = False
      if should_stop:
        logging.info('Evaluation stopped after %s (evaluate_checkpoint_fn returned True).', prefix)
        return evaluations
      if max_number_of_evaluations is not None and evaluations >= max_number_of_evaluations:
        logging.info('Evaluated %d checkpoints (max_number_of_evaluations); stopping.', evaluations)
        return evaluations
    if checkpoint_timeout is not None and time.time() - last_found >= checkpoint_timeout:
      logging.info('No new checkpoint in %s for %.0f s (checkpoint_timeout).', checkpoint_dir, checkpoint_timeout)
      if timeout_fn is None or timeout_fn():
        return evaluations
      last_found = time.time()
    if not waiting_logged:
      if checkpoint_timeout is None:
        logging.info('Waiting for new policy checkpoints in %s (looking every %s s; Ctrl-C stops). To stop after the '
                     'existing checkpoints instead, run with --gin_param "evaluate.checkpoint_timeout = 0".',
                     checkpoint_dir, eval_interval_secs)
      else:
        logging.info('Waiting up to %s s for a new policy checkpoint in %s (looking every %s s; Ctrl-C stops).',
                     checkpoint_timeout, checkpoint_dir, eval_interval_secs)
      waiting_logged = True
    time.sleep(eval_interval_secs)


def _log_skip(failures, prefix, why):
  count = failures[prefix] = failures.get(prefix, 0) + 1
  if count == 1 or count % 100 == 0:
    logging.warning('Skipping %s for now: %s. It is tried again at the next poll.', prefix, why)


# ----------------------------------------------------------------------------------------------------------------------
# evaluate.


def _check_arguments(environment, agent_class, meta_agent_class, state_preprocess_class, max_steps_per_episode,
                     num_episodes_eval, num_episodes_videos, generate_videos, eval_modes, evaluate_nohrl,
                     eval_model_rollout, video_settings):
  for name, value in (('environment', environment), ('agent_class', agent_class),
                      ('meta_agent_class', meta_agent_class), ('state_preprocess_class', state_preprocess_class)):
    if value is None:
      raise EvalError(f'evaluate needs {name} (bound by configs/uvf/configs/eval_uvf.gin; include it).')
  if not max_steps_per_episode:
    raise EvalError('evaluate.max_steps_per_episode must be set (HIRO: %RESET_EPISODE_PERIOD = 500, bound by '
                    'configs/uvf/configs/eval_uvf.gin).')
  if agent_class.ACTION_TYPE != 'continuous' or meta_agent_class.ACTION_TYPE != 'continuous':
    raise EvalError('HIRO evaluates continuous-action agents only.')
  if not isinstance(num_episodes_eval, (int, np.integer)) or num_episodes_eval < 1:
    raise EvalError(f'evaluate.num_episodes_eval must be a positive int, got {num_episodes_eval!r}.')
  if generate_videos and (not isinstance(num_episodes_videos, (int, np.integer)) or num_episodes_videos < 1):
    raise EvalError(f'evaluate.num_episodes_videos must be a positive int, got {num_episodes_videos!r}.')
  if isinstance(eval_modes, str) or not eval_modes:
    raise EvalError(f'evaluate.eval_modes must be a non-empty list of modes, got {eval_modes!r}.')
  if evaluate_nohrl:
    raise NotImplementedError('evaluate.evaluate_nohrl (the low level alone, without goals from the meta agent) is '
                              'not ported; no HIRO configuration uses it.')
  if eval_model_rollout:
    raise NotImplementedError('evaluate.eval_model_rollout (the critic as a dynamics model, a legacy option) is not '
                              'ported; no HIRO configuration uses it.')
  settings = dict(VIDEO_DEFAULTS)
  unknown = sorted(set(video_settings or {}) - set(VIDEO_DEFAULTS))
  if unknown:
    raise EvalError(f'evaluate.video_settings: unknown keys {unknown}; valid: {sorted(VIDEO_DEFAULTS)}.')
  settings.update(video_settings or {})
  for key, value in settings.items():
    if not isinstance(value, (int, np.integer)) or value < 1:
      raise EvalError(f'evaluate.video_settings[{key!r}] must be a positive int, got {value!r}.')
  # Even frame sizes: H.264 with yuv420p needs them.
  settings['width'] -= settings['width'] % 2
  settings['height'] -= settings['height'] % 2
  return settings


def _check_rendering(videos_optional):
  """Picks the OpenGL back end of the videos before any episode runs; returns whether videos are made."""
  try:
    name = rendering.backend()
  except rendering.RenderingUnavailableError as e:
    if videos_optional:
      logging.warning('Evaluating without videos (evaluate.videos_optional = True): %s', e)
      return False
    raise rendering.RenderingUnavailableError(
        f'{e}\nTo evaluate without videos instead: --gin_param "evaluate.videos_optional = True" (videos when '
        'rendering works, none otherwise) or "evaluate.generate_videos = False".', e.attempts) from None
  logging.info('Evaluation videos: MuJoCo renders through MUJOCO_GL=%s.', name)
  return True


@gin.configurable
def evaluate(checkpoint_dir,
             eval_dir,
             environment=None,
             num_bin_actions=3,
             agent_class=None,
             meta_agent_class=None,
             state_preprocess_class=None,
             gamma=1.0,
             num_episodes_eval=10,
             eval_interval_secs=60,
             max_number_of_evaluations=None,
             checkpoint_timeout=None,
             timeout_fn=None,
             tuner_hook=None,
             generate_videos=False,
             generate_summaries=True,
             num_episodes_videos=5,
             video_settings=None,
             eval_modes=('eval',),
             eval_model_rollout=False,
             policy_save_dir='policy',
             checkpoint_range=None,
             checkpoint_path=None,
             max_steps_per_episode=None,
             evaluate_nohrl=False,
             seed=0,
             num_threads=None,
             videos_optional=False):
  """Evaluates the policy checkpoints of `checkpoint_dir` in each eval mode, writing results to `eval_dir`.

  Args (the original's, as bound by configs/uvf/configs/eval_uvf.gin; hiro.md 5.4):
    checkpoint_dir: the training directory (the checkpoints are in its `policy_save_dir`).
    eval_dir: where the summaries, results.json / results.csv and videos/ go.
    environment: the maze `PyEnvironment` (gin: @create_maze_env()); the other environments of the batch are built
      by the same gin-bound create_maze_env().
    num_bin_actions: accepted and ignored (discrete actions; unused by the original too).
    agent_class, meta_agent_class, state_preprocess_class: UvfAgent, MetaAgent, StatePreprocess.
    gamma: discount of the episode reward sums (1.0).
    num_episodes_eval: episodes per mode and checkpoint (50).
    eval_interval_secs: seconds between two polls of the checkpoint directory (1).
    max_number_of_evaluations: None, or stop polling after this many checkpoints (the original ignored it).
    checkpoint_timeout, timeout_fn: stop polling after this many seconds without a new checkpoint, unless
      timeout_fn() returns False (see `evaluate_checkpoint_repeatedly`).
    tuner_hook: None or fn(best average reward over the modes, global step) -> True to stop.
    generate_videos: write `num_episodes_videos` episodes per mode to videos/<mode>_hrl_step_<N>.mp4 (or .gif).
    generate_summaries: write the TensorBoard scalars (the results table is always written).
    num_episodes_videos: episodes per video (the first episodes of the evaluation batch, one after the other).
    video_settings: None or a dict with any of 'width', 'height' (pixels; 480 x 360), 'fps' (30) and
      'every_n_steps' (1: a frame per step).
    eval_modes: the meta context sampler modes to evaluate (%EVAL_MODES; AntMaze eval1, eval2, eval3).
    eval_model_rollout, evaluate_nohrl: legacy options, not ported (NotImplementedError when True).
    policy_save_dir: the checkpoints' sub-directory of checkpoint_dir ('policy'; '' or None: checkpoint_dir itself).
    checkpoint_range: None or (first step, last step): evaluate the checkpoints in that range (inclusive) once.
    checkpoint_path: None or one checkpoint to evaluate, relative to <checkpoint_dir>/<policy_save_dir> or a path.
    max_steps_per_episode: T, the episode length (%RESET_EPISODE_PERIOD = 500).
  New args:
    seed: episode i of every mode and checkpoint starts from the reset seeded by `episode_seed(seed, i)`, so that an
      evaluation is deterministic and checkpoints are compared on the same start states; None: unseeded.
    num_threads: threads stepping the environments (None: min(8, CPU count)).
    videos_optional: with generate_videos, what to do when no OpenGL back end renders here
      (`rendering.backend()`): False stops at the start with the message that says what to install; True evaluates
      without videos, after a warning.

  Returns:
    The list of result rows written by this call (dicts, see `CSV_FIELDS`; the JSON rows also hold 'episodes').

  Raises:
    EvalError (a ValueError): no checkpoint to evaluate, a checkpoint of another configuration, an unknown eval
      mode, or a bad setting; the message says what to change.
    rendering.RenderingUnavailableError: generate_videos, no OpenGL back end renders and not videos_optional.
  """
  del num_bin_actions
  video = _check_arguments(environment, agent_class, meta_agent_class, state_preprocess_class, max_steps_per_episode,
                           num_episodes_eval, num_episodes_videos, generate_videos, eval_modes, evaluate_nohrl,
                           eval_model_rollout, video_settings)
  if generate_videos:
    generate_videos = _check_rendering(videos_optional)
  eval_modes = list(eval_modes)
  policy_dir = os.path.join(checkpoint_dir, policy_save_dir) if policy_save_dir else checkpoint_dir

  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(
      environment, agent_class, meta_agent_class, state_preprocess_class, representation.InverseDynamics)
  modes = meta_agent.tf_context.modes
  unknown = [mode for mode in eval_modes if mode not in modes]
  if unknown:
    raise EvalError(f'unknown eval mode(s) {unknown}: the meta context (meta/Context.samplers) has the modes '
                    f'{modes}. Set EVAL_MODES / evaluate.eval_modes to some of them (AntMaze: eval1, eval2, eval3).')
  counters = [tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
              for name in ('global_step', 'num_episodes', 'num_resets')]
  global_step = counters[0]
  variables = build.policy_variables_by_tf1_name(uvf_agent, meta_agent, state_preprocess, *counters)

  num_envs = max(num_episodes_eval, num_episodes_videos if generate_videos else 0)
  if num_threads is None:
    num_threads = min(8, os.cpu_count() or 1)
  environments = ParallelEnvironments(make_environments(environment, num_envs), num_threads)
  evaluator = Evaluator(environments, uvf_agent, meta_agent, state_preprocess)
  state_indices, relative_target = task_state_indices(evaluator.target_dim)
  seeds = [episode_seed(seed, i) for i in range(num_envs)]
  results = Results(eval_dir)
  writers = []  # the summary writer, created with the first summary
  written = []

  def evaluate_checkpoint(path, explicit=False):
    """Evaluates one checkpoint in every mode; returns True to stop (tuner_hook). `explicit` (checkpoint_path): a
    full training checkpoint, the original's or this port's, is read as well as a policy checkpoint."""
    try:
      kind = checkpoints.checkpoint_kind(path) if explicit else checkpoints.KIND_POLICY
      if kind == checkpoints.KIND_FULL:
        path = build.restore_policy_from_full_checkpoint(checkpoints.resolve_checkpoint_path(path), uvf_agent,
                                                         meta_agent, state_preprocess, *counters)
      else:
        path = checkpoints.restore_policy(path, variables, allow_extra=kind == checkpoints.KIND_FULL_TF1)
    except checkpoints.CheckpointMismatchError as e:
      raise EvalError(f'{e}\nThe checkpoint was written by another configuration than the one evaluating it; '
                      'run run_eval.py with the gin configuration it was trained with.') from None
    except LOAD_ERRORS as e:
      raise CheckpointLoadError(f'{path} could not be read ({type(e).__name__}: {str(e).strip()}).') from e
    step = int(global_step.numpy())
    logging.info('Evaluating %s (global step %d): %d episodes x %d steps per mode, modes %s.', path, step,
                 num_episodes_eval, max_steps_per_episode, ', '.join(eval_modes))
    rows = []
    for mode in eval_modes:
      start = time.time()
      targets = evaluator.targets(mode, num_envs).numpy()
      record = min(num_episodes_videos, num_envs) if generate_videos else 0
      out = evaluator.run(targets, max_steps_per_episode, seeds, record=record)
      n = num_episodes_eval
      distances = final_distances(out['final_states'][:n], out['previous_states'][:n], out['final_targets'][:n],
                                  state_indices, relative_target)
      stats = episode_statistics(out['rewards'][:n], out['meta_rewards'][:n], distances, out['discounts'][:n],
                                 gamma=gamma)
      wall = time.time() - start
      goal = targets[:n].tolist()
      goal = goal[0] if all(g == goal[0] for g in goal) else 'per-episode'
      row = {'step': step, 'mode': mode, 'goal': goal, 'num_episodes': n, 'episode_steps': int(max_steps_per_episode),
             'success_rate': stats['success_rate'], 'mean_reward': stats['mean_reward'],
             'last_reward': stats['last_reward'], 'mean_meta_reward': stats['mean_meta_reward'],
             'last_meta_reward': stats['last_meta_reward'], 'mean_final_distance': stats['mean_final_distance'],
             'wall_time_s': round(wall, 3), 'checkpoint': path,
             'evaluated_at': datetime.datetime.now().isoformat(timespec='seconds'),
             'episodes': {key[len('episode_'):]: value for key, value in stats.items() if key.startswith('episode_')}}
      rows.append(row)
      tag = f'{mode}_hrl'
      for name in ('mean_reward', 'last_reward', 'mean_meta_reward', 'last_meta_reward', 'success_rate'):
        logging.info('[%s] %s = %f', tag, name, stats[name])
      if generate_summaries:
        if not writers:
          writers.append(tf.summary.create_file_writer(eval_dir))
        writer = writers[0]
        with writer.as_default(step=step):
          for pattern, key in SUMMARY_TAGS:
            tf.summary.scalar(pattern % tag, stats[key])
        writer.flush()
      if generate_videos:
        video_start = time.time()
        k = record
        frames = np.concatenate([
            render_frames(environments.envs[i], environments.recorded_qpos, environments.recorded_subgoals, i,
                          targets, -out['meta_rewards'][i], mode, step, video['width'], video['height'],
                          video['every_n_steps'], subgoals=not getattr(state_preprocess, 'trainable', False))
            for i in range(k)])
        file = write_video(frames, os.path.join(eval_dir, VIDEO_DIR, f'{tag}_step_{step}'), video['fps'])
        logging.info('Wrote %s (%d episodes, %d frames, %.1f s).', file, k, len(frames), time.time() - video_start)
    environments.record(0)
    results.append(rows)
    written.extend(rows)
    table = format_table(rows)
    print(f'Evaluation of {path} (global step {step}): {num_episodes_eval} episodes x {max_steps_per_episode} '
          f'steps per goal; success = final distance < {SUCCESS_DISTANCE:g}\n{table}', flush=True)
    if tuner_hook is not None:
      return bool(tuner_hook(max(row['mean_reward'] for row in rows), step))
    return False

  logging.info('Evaluating policies at %s; running episodes for %d steps.', policy_dir, max_steps_per_episode)
  try:
    if checkpoint_path is not None:
      candidates = [os.path.join(policy_dir, checkpoint_path), checkpoint_path]
      found = next((c for c in candidates if tf.io.gfile.exists(re.sub(r'\.index$', '', c) + '.index') or
                    tf.io.gfile.isdir(c)), None)
      if found is None:
        present = ', '.join(os.path.basename(p) for _, p in list_checkpoints(policy_dir)) or 'none'
        raise EvalError(f'checkpoint_path {checkpoint_path}: no checkpoint at {candidates[0]} nor {candidates[1]} '
                        f'(checkpoints in {policy_dir}: {present}).')
      try:
        evaluate_checkpoint(found, explicit=True)
      except checkpoints.NotACheckpointError as e:
        raise EvalError(str(e)) from None
    elif checkpoint_range is not None:
      first, last = checkpoint_range
      present = list_checkpoints(policy_dir)
      if not present:
        raise EvalError(_no_checkpoint_message(policy_dir))
      chosen = [(s, p) for s, p in present if first <= s <= last]
      if not chosen:
        raise EvalError(f'no policy checkpoint in {policy_dir} with a step in checkpoint_range {list(checkpoint_range)}'
                        f'; its checkpoints have the steps {[s for s, _ in present]}.')
      done = results.evaluated_steps(eval_modes)
      logging.info('Evaluating %d policies at %s.', len([s for s, _ in chosen if s not in done]), policy_dir)
      for step, prefix in chosen:
        if step in done:
          logging.info('Step %d was already evaluated (%s); skipping it.', step, results.json_path)
          continue
        try:
          if evaluate_checkpoint(prefix):
            break
        except checkpoints.NotACheckpointError as e:
          raise EvalError(str(e)) from None
    else:
      done = results.evaluated_steps(eval_modes)
      if done:
        logging.info('%d checkpoints are already evaluated in %s; they are skipped.', len(done), results.json_path)
      if not list_checkpoints(policy_dir):
        logging.info('%s', _no_checkpoint_message(policy_dir).replace('no policy checkpoint', 'No policy checkpoint '
                                                                       'yet', 1) + ' Waiting for one.')
      count = evaluate_checkpoint_repeatedly(
          policy_dir, evaluate_checkpoint, eval_interval_secs=eval_interval_secs,
          max_number_of_evaluations=max_number_of_evaluations, checkpoint_timeout=checkpoint_timeout,
          timeout_fn=timeout_fn, already_evaluated=done)
      if count == 0 and not done and not list_checkpoints(policy_dir):
        raise EvalError(_no_checkpoint_message(policy_dir) + ' (Gave up after checkpoint_timeout = '
                        f'{checkpoint_timeout} s.)')
  finally:
    environments.close()
    for writer in writers:
      writer.close()
  return written
