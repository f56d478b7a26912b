"""HIRO evaluation: `evaluate` and `evaluate_checkpoint_repeatedly` (original: eval.py and
utils/eval_utils.py in tensorflow/models research/efficient-hrl).

`evaluate` builds the environment and both agents exactly as training does (`uvf.build.build_agents`, so the variable
names are the original's), then for each policy checkpoint `<checkpoint_dir>/<policy_save_dir>/model.ckpt-<N>` it
chooses (new ones as they appear, a `checkpoint_range`, or one `checkpoint_path`):

  1. restores the policy strictly by name (`uvf.checkpoints.restore_policy`; an original TF1 policy checkpoint works
     too);
  2. per mode of `eval_modes` (AntMaze: eval1, eval2, eval3, the meta context's ConstantSampler targets (16, 0),
     (16, 16), (0, 16)) runs `num_episodes_eval` deterministic episodes of `max_steps_per_episode` steps, all of
     them at once on a batch of environments (`uvf.rollout.Evaluator`): the low-level actor acts on s (+) g
     without noise; the goal starts at 0 and, after each step t (0-based), becomes the meta actor's goal
     mu_meta(s_{t+1} (+) T) when t mod c == 0 (c = `agent/Context.meta_action_every_n`, 10), else the goal
     transition h(s_t, g, s_{t+1}) = g + s_t[:k] - s_{t+1}[:k] on the state representations (`Context.next_goal`
     in uvf/context/context.py, the goal schedule that collection applies too). Per step: the low-level reward
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
     `generate_videos` writes `eval_dir/videos/<mode>_hrl_step_<N>.mp4` (ffmpeg) or `.gif` (Pillow; uvf/videos.py).

`CheckpointEvaluation` does steps 1-4 for one checkpoint; `evaluate` builds it and picks the checkpoints.

Checkpoints recorded in `results.json` are not evaluated again by the poller or a `checkpoint_range` (an explicit
`checkpoint_path` always is). A checkpoint that is not complete yet (an `.index` without all its data files) or does
not load is skipped and tried again at the next poll.
"""

import datetime
import os
import re
import time
from typing import Dict

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from uvf import build
from uvf import checkpoints
from uvf import eval_results
from uvf import protocol
from uvf import representation
from uvf import rollout
from uvf import videos

SUMMARY_TAGS = (('Reward/average_%s_reward', 'mean_reward'), ('Reward/last_%s_reward', 'last_reward'),
                ('Reward/average_%s_meta_reward', 'mean_meta_reward'),
                ('Reward/last_%s_meta_reward', 'last_meta_reward'), ('Reward/average_%s_success', 'success_rate'))

# (goal setting, observation dim O, meta context dim M), as `uvf.checkpoints.describe_shapes` reads them from a
# checkpoint -> the configurations of this repository with those shapes: named in the message of a checkpoint that
# does not match the configuration evaluating it (`restore_policy(..., known_configs=...)`).
CONFIGS_BY_SHAPES = {
    ('hiro_orig', 30, 2): ['configs/ant_maze.gin', 'configs/ant_push.gin'],
    ('hiro_orig', 30, 3): ['configs/ant_fall.gin'],
    ('hiro_xy', 30, 2): ['configs/ant_maze_xy.gin'],
    ('hiro_xy', 33, 2): ['configs/ant_block.gin', 'configs/ant_block_maze.gin'],
    ('hiro_xy', 7, 2): ['configs/point_maze.gin'],
    ('hiro_repr', 30, 2): ['configs/ant_maze_repr.gin', 'configs/ant_push_repr.gin'],
    ('hiro_repr', 30, 3): ['configs/ant_fall_repr.gin'],
    ('hiro_repr', 33, 2): ['configs/ant_block_repr.gin', 'configs/ant_block_maze_repr.gin'],
    ('hiro_repr', 7, 2): ['configs/point_maze_repr.gin'],
}


class CheckpointLoadError(checkpoints.NotACheckpointError):
  """A checkpoint could not be read (incomplete or damaged files); the poller tries it again later."""


# What reading a checkpoint that is still being written (or damaged) raises: TF errors, a short read of a data file
# (IndexError: 'Read less bytes than requested'), `uvf.checkpoints.NotACheckpointError`.
LOAD_ERRORS = (checkpoints.NotACheckpointError, tf.errors.OpError, IndexError, EOFError)

# ----------------------------------------------------------------------------------------------------------------------
# Checkpoint selection.


def _no_checkpoint_message(directory):
  try:
    every = gin.query_parameter('train_uvf.save_policy_every_n_steps')
  except ValueError:
    every = None
  every = f' ({every})' if every else ''
  return (f'no policy checkpoint in {directory} (looked for {run_checkpoints.CHECKPOINT_NAME}-<step>.index). Training '
          f'writes one into <train_dir>/policy every train_uvf.save_policy_every_n_steps{every} environment steps; '
          f'pass the training directory as --train_dir / --checkpoint_dir, or one checkpoint with --checkpoint_path.')


@gin.configurable
def evaluate_checkpoint_repeatedly(checkpoint_dir, evaluate_checkpoint_fn, eval_interval_secs=600,
                                   max_number_of_evaluations=None, checkpoint_timeout=None, timeout_fn=None,
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
  failures: Dict[str, int] = {}
  evaluations = 0
  last_found = time.time()
  waiting_logged = False
  while True:
    for step, prefix in run_checkpoints.list_checkpoints(checkpoint_dir):
      if step in done:
        continue
      if not run_checkpoints.is_complete(prefix):
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
        logging.info(
            'Waiting for new policy checkpoints in %s (looking every %s s; Ctrl-C stops). To stop after the '
            'existing checkpoints instead, run with --gin_param "evaluate.checkpoint_timeout = 0".', checkpoint_dir,
            eval_interval_secs)
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
  """Checks evaluate's settings before anything is built; returns the video settings (`videos.check_settings`)."""
  for name, value in (('environment', environment), ('agent_class', agent_class),
                      ('meta_agent_class', meta_agent_class), ('state_preprocess_class', state_preprocess_class)):
    if value is None:
      raise rollout.EvalError(f'evaluate needs {name} (bound by configs/uvf/configs/eval_uvf.gin; include it).')
  if not max_steps_per_episode:
    raise rollout.EvalError('evaluate.max_steps_per_episode must be set (HIRO: %RESET_EPISODE_PERIOD = 500, bound '
                            'by configs/uvf/configs/eval_uvf.gin).')
  if agent_class.ACTION_TYPE != 'continuous' or meta_agent_class.ACTION_TYPE != 'continuous':
    raise rollout.EvalError('HIRO evaluates continuous-action agents only.')
  if not isinstance(num_episodes_eval, (int, np.integer)) or num_episodes_eval < 1:
    raise rollout.EvalError(f'evaluate.num_episodes_eval must be a positive int, got {num_episodes_eval!r}.')
  if generate_videos and (not isinstance(num_episodes_videos, (int, np.integer)) or num_episodes_videos < 1):
    raise rollout.EvalError(f'evaluate.num_episodes_videos must be a positive int, got {num_episodes_videos!r}.')
  if isinstance(eval_modes, str) or not eval_modes:
    raise rollout.EvalError(f'evaluate.eval_modes must be a non-empty list of modes, got {eval_modes!r}.')
  if evaluate_nohrl:
    raise NotImplementedError('evaluate.evaluate_nohrl (the low level alone, without goals from the meta agent) is '
                              'not ported; no HIRO configuration uses it.')
  if eval_model_rollout:
    raise NotImplementedError('evaluate.eval_model_rollout (the critic as a dynamics model, a legacy option) is not '
                              'ported; no HIRO configuration uses it.')
  try:
    return videos.check_settings(video_settings)
  except ValueError as e:
    raise rollout.EvalError(str(e)) from None


class CheckpointEvaluation(object):
  """Evaluates policy checkpoints, one at a time, on one set of agents and environments (`evaluate`'s work).

  Calling it with a checkpoint restores the policy, runs `num_episodes_eval` episodes per mode (`rollout.Evaluator`),
  writes the summaries, the results rows and the videos, prints the table, and returns True to stop (`tuner_hook`).

  Args:
    agents: (meta_agent, uvf_agent, state_preprocess) as built by `uvf.build.build_agents`.
    environments: the `rollout.ParallelEnvironments` of the episodes (max(num_episodes_eval, video episodes)).
    eval_dir: where the summaries, results and videos go.
    eval_modes: list of the meta context's modes to evaluate.
    num_episodes_eval, max_steps_per_episode, gamma, seed: as `evaluate`'s.
    generate_summaries: write the TensorBoard scalars.
    num_video_episodes: 0 (no videos) or the episodes per video.
    video: `videos.check_settings`' dict.
    tuner_hook: None or fn(best average reward over the modes, global step) -> True to stop.
  """

  def __init__(self, agents, environments, eval_dir, eval_modes, num_episodes_eval, max_steps_per_episode, gamma, seed,
               generate_summaries, num_video_episodes, video, tuner_hook):
    self.meta_agent, self.uvf_agent, self.state_preprocess = agents
    self.environments = environments
    self.eval_dir, self.eval_modes = eval_dir, list(eval_modes)
    self.num_episodes, self.num_steps, self.gamma = num_episodes_eval, max_steps_per_episode, gamma
    self.generate_summaries, self.num_video_episodes, self.video = generate_summaries, num_video_episodes, video
    self.tuner_hook = tuner_hook
    self.counters = [
        tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
        for name in ('global_step', 'num_episodes', 'num_resets')
    ]
    self.variables = build.policy_variables_by_tf1_name(self.uvf_agent, self.meta_agent, self.state_preprocess,
                                                        *self.counters)
    self.evaluator = rollout.Evaluator(environments, self.uvf_agent, self.meta_agent, self.state_preprocess)
    self.state_indices, self.relative_target = eval_results.task_state_indices(self.evaluator.target_dim)
    self.seeds = [rollout.episode_seed(seed, i) for i in range(len(environments))]
    self.results = eval_results.Results(eval_dir)
    self.written = []  # the rows written by this evaluation
    self._writer = None  # the summary writer, created with the first summary

  def close(self):
    self.environments.close()
    if self._writer is not None:
      self._writer.close()

  def restore(self, path, explicit=False):
    """Restores the policy from `path` and returns the prefix read. `explicit` (checkpoint_path): a full training
    checkpoint, the original's or this port's, is read as well as a policy checkpoint."""
    try:
      kind = checkpoints.checkpoint_kind(path) if explicit else checkpoints.KIND_POLICY
      if kind == checkpoints.KIND_FULL:
        return build.restore_policy_from_full_checkpoint(checkpoints.resolve_checkpoint_path(path), self.uvf_agent,
                                                         self.meta_agent, self.state_preprocess, *self.counters)
      return checkpoints.restore_policy(path, self.variables, allow_extra=kind == checkpoints.KIND_FULL_TF1,
                                        known_configs=CONFIGS_BY_SHAPES)
    except checkpoints.CheckpointMismatchError as e:
      raise rollout.EvalError(f'{e}\nThe checkpoint was written by another configuration than the one evaluating '
                              'it; run run_eval.py with the gin configuration it was trained with.') from None
    except LOAD_ERRORS as e:
      raise CheckpointLoadError(f'{path} could not be read ({type(e).__name__}: {str(e).strip()}).') from e

  def evaluate_mode(self, mode, step, path):
    """Runs the episodes of one mode -> its results row (see `protocol.CSV_FIELDS`, plus 'episodes')."""
    start = time.time()
    n = self.num_episodes
    targets = self.evaluator.targets(mode, len(self.environments)).numpy()
    out = self.evaluator.run(targets, self.num_steps, self.seeds, record=self.num_video_episodes)
    distances = eval_results.final_distances(out['final_states'][:n], out['previous_states'][:n],
                                             out['final_targets'][:n], self.state_indices, self.relative_target)
    stats = eval_results.episode_statistics(out['rewards'][:n], out['meta_rewards'][:n], distances,
                                            out['discounts'][:n], gamma=self.gamma)
    wall = time.time() - start
    goal = targets[:n].tolist()
    goal = goal[0] if all(g == goal[0] for g in goal) else 'per-episode'
    row = {
        'step': step,
        'mode': mode,
        'goal': goal,
        'num_episodes': n,
        'episode_steps': int(self.num_steps),
        'success_rate': stats['success_rate'],
        'mean_reward': stats['mean_reward'],
        'last_reward': stats['last_reward'],
        'mean_meta_reward': stats['mean_meta_reward'],
        'last_meta_reward': stats['last_meta_reward'],
        'mean_final_distance': stats['mean_final_distance'],
        'wall_time_s': round(wall, 3),
        'checkpoint': path,
        'evaluated_at': datetime.datetime.now().isoformat(timespec='seconds'),
        'episodes': {
            key[len('episode_'):]: value for key, value in stats.items() if key.startswith('episode_')
        }
    }
    tag = f'{mode}_hrl'
    for name in ('mean_reward', 'last_reward', 'mean_meta_reward', 'last_meta_reward', 'success_rate'):
      logging.info('[%s] %s = %f', tag, name, stats[name])
    if self.generate_summaries:
      self._write_summaries(tag, stats, step)
    if self.num_video_episodes:
      videos.write_mode_video(self.environments, self.num_video_episodes, targets, -out['meta_rewards'], tag[:-4], step,
                              self.video, self.eval_dir,
                              subgoals=not getattr(self.state_preprocess, 'trainable', False))
    return row

  def _write_summaries(self, tag, stats, step):
    if self._writer is None:
      self._writer = tf.summary.create_file_writer(self.eval_dir)
    with self._writer.as_default(step=step):
      for pattern, key in SUMMARY_TAGS:
        tf.summary.scalar(pattern % tag, stats[key])
    self._writer.flush()

  def __call__(self, path, explicit=False):
    """Evaluates the checkpoint `path` in every mode; returns True to stop (tuner_hook)."""
    path = self.restore(path, explicit)
    step = int(self.counters[0].numpy())
    logging.info('Evaluating %s (global step %d): %d episodes x %d steps per mode, modes %s.', path, step,
                 self.num_episodes, self.num_steps, ', '.join(self.eval_modes))
    rows = [self.evaluate_mode(mode, step, path) for mode in self.eval_modes]
    self.environments.record(0)
    self.results.append(rows)
    self.written.extend(rows)
    print(
        f'Evaluation of {path} (global step {step}): {self.num_episodes} episodes x {self.num_steps} '
        f'steps per goal; success = final distance < {protocol.SUCCESS_DISTANCE:g}\n'
        f'{eval_results.format_table(rows)}', flush=True)
    if self.tuner_hook is not None:
      return bool(self.tuner_hook(max(row['mean_reward'] for row in rows), step))
    return False


def _evaluate_path(evaluation, policy_dir, checkpoint_path):
  """`checkpoint_path`: one checkpoint, relative to the policy directory or a path, evaluated (again) once."""
  candidates = [os.path.join(policy_dir, checkpoint_path), checkpoint_path]
  found = next(
      (c for c in candidates if tf.io.gfile.exists(re.sub(r'\.index$', '', c) + '.index') or tf.io.gfile.isdir(c)),
      None)
  if found is None:
    present = ', '.join(os.path.basename(p) for _, p in run_checkpoints.list_checkpoints(policy_dir)) or 'none'
    raise rollout.EvalError(f'checkpoint_path {checkpoint_path}: no checkpoint at {candidates[0]} nor '
                            f'{candidates[1]} (checkpoints in {policy_dir}: {present}).')
  try:
    evaluation(found, explicit=True)
  except checkpoints.NotACheckpointError as e:
    raise rollout.EvalError(str(e)) from None


def _evaluate_range(evaluation, policy_dir, checkpoint_range):
  """`checkpoint_range`: the checkpoints with a step in [first, last], those not in the results yet, once."""
  first, last = checkpoint_range
  present = run_checkpoints.list_checkpoints(policy_dir)
  if not present:
    raise rollout.EvalError(_no_checkpoint_message(policy_dir))
  chosen = [(s, p) for s, p in present if first <= s <= last]
  if not chosen:
    raise rollout.EvalError(f'no policy checkpoint in {policy_dir} with a step in checkpoint_range '
                            f'{list(checkpoint_range)}; its checkpoints have the steps {[s for s, _ in present]}.')
  done = evaluation.results.evaluated_steps(evaluation.eval_modes)
  logging.info('Evaluating %d policies at %s.', len([s for s, _ in chosen if s not in done]), policy_dir)
  for step, prefix in chosen:
    if step in done:
      logging.info('Step %d was already evaluated (%s); skipping it.', step, evaluation.results.json_path)
      continue
    try:
      if evaluation(prefix):
        break
    except checkpoints.NotACheckpointError as e:
      raise rollout.EvalError(str(e)) from None


def _evaluate_new(evaluation, policy_dir, **polling):
  """Polls `policy_dir`: each new checkpoint, not in the results yet, as it appears (`evaluate_checkpoint_repeatedly`
  with `polling`'s eval_interval_secs, max_number_of_evaluations, checkpoint_timeout, timeout_fn)."""
  done = evaluation.results.evaluated_steps(evaluation.eval_modes)
  if done:
    logging.info('%d checkpoints are already evaluated in %s; they are skipped.', len(done),
                 evaluation.results.json_path)
  if not run_checkpoints.list_checkpoints(policy_dir):
    logging.info(
        '%s',
        _no_checkpoint_message(policy_dir).replace('no policy checkpoint', 'No policy checkpoint '
                                                   'yet', 1) + ' Waiting for one.')
  count = evaluate_checkpoint_repeatedly(policy_dir, evaluation, already_evaluated=done, **polling)
  if count == 0 and not done and not run_checkpoints.list_checkpoints(policy_dir):
    raise rollout.EvalError(
        _no_checkpoint_message(policy_dir) + ' (Gave up after checkpoint_timeout = '
        f'{polling["checkpoint_timeout"]} s.)')


@gin.configurable
def evaluate(checkpoint_dir, eval_dir, environment=None, num_bin_actions=3, agent_class=None, meta_agent_class=None,
             state_preprocess_class=None, gamma=1.0, num_episodes_eval=10, eval_interval_secs=60,
             max_number_of_evaluations=None, checkpoint_timeout=None, timeout_fn=None, tuner_hook=None,
             generate_videos=False, generate_summaries=True, num_episodes_videos=5, video_settings=None,
             eval_modes=('eval',), eval_model_rollout=False, policy_save_dir='policy', checkpoint_range=None,
             checkpoint_path=None, max_steps_per_episode=None, evaluate_nohrl=False, seed=0, num_threads=None,
             videos_optional=False):
  """Evaluates the policy checkpoints of `checkpoint_dir` in each eval mode, writing results to `eval_dir`.

  Args (the original's, as bound by configs/uvf/configs/eval_uvf.gin):
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
    seed: episode i of every mode and checkpoint starts from the reset seeded by `rollout.episode_seed(seed, i)`, so
      that an evaluation is deterministic and checkpoints are compared on the same start states; None: unseeded.
    num_threads: threads stepping the environments (None: min(8, CPU count)).
    videos_optional: with generate_videos, what to do when no OpenGL back end renders here
      (`rendering.backend()`): False stops at the start with the message that says what to install; True evaluates
      without videos, after a warning.

  Returns:
    The list of result rows written by this call (dicts, see `protocol.CSV_FIELDS`; the JSON rows also hold
    'episodes').

  Raises:
    rollout.EvalError (a ValueError): no checkpoint to evaluate, a checkpoint of another configuration, an unknown eval
      mode, or a bad setting; the message says what to change.
    rendering.RenderingUnavailableError: generate_videos, no OpenGL back end renders and not videos_optional.
  """
  del num_bin_actions
  video = _check_arguments(environment, agent_class, meta_agent_class, state_preprocess_class, max_steps_per_episode,
                           num_episodes_eval, num_episodes_videos, generate_videos, eval_modes, evaluate_nohrl,
                           eval_model_rollout, video_settings)
  if generate_videos:
    generate_videos = videos.check_rendering(videos_optional)
  eval_modes = list(eval_modes)
  policy_dir = os.path.join(checkpoint_dir, policy_save_dir) if policy_save_dir else checkpoint_dir

  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(environment, agent_class, meta_agent_class,
                                                                  state_preprocess_class,
                                                                  representation.InverseDynamics)
  modes = meta_agent.tf_context.modes
  unknown = [mode for mode in eval_modes if mode not in modes]
  if unknown:
    raise rollout.EvalError(f'unknown eval mode(s) {unknown}: the meta context (meta/Context.samplers) has the '
                            f'modes {modes}. Set EVAL_MODES / evaluate.eval_modes to some of them (AntMaze: eval1, '
                            'eval2, eval3).')
  num_envs = max(num_episodes_eval, num_episodes_videos if generate_videos else 0)
  if num_threads is None:
    num_threads = min(8, os.cpu_count() or 1)
  environments = rollout.ParallelEnvironments(rollout.make_environments(environment, num_envs), num_threads)
  evaluation = CheckpointEvaluation((meta_agent, uvf_agent, state_preprocess), environments, eval_dir, eval_modes,
                                    num_episodes_eval, max_steps_per_episode, gamma, seed, generate_summaries,
                                    min(num_episodes_videos, num_envs) if generate_videos else 0, video, tuner_hook)

  logging.info('Evaluating policies at %s; running episodes for %d steps.', policy_dir, max_steps_per_episode)
  try:
    if checkpoint_path is not None:
      _evaluate_path(evaluation, policy_dir, checkpoint_path)
    elif checkpoint_range is not None:
      _evaluate_range(evaluation, policy_dir, checkpoint_range)
    else:
      _evaluate_new(evaluation, policy_dir, eval_interval_secs=eval_interval_secs,
                    max_number_of_evaluations=max_number_of_evaluations, checkpoint_timeout=checkpoint_timeout,
                    timeout_fn=timeout_fn)
  finally:
    evaluation.close()
  return evaluation.written
