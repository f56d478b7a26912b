"""Mutation check of the training-path tests: does the suite catch one-line changes to the formulas it guards?

Each mutation below replaces one exact piece of text in one file (a formula of HIRO's training path: the TD3 update,
the rewards and discounts, the off-policy correction, the exploration noise, ...) by a wrong one. The script copies
the repository (its git-tracked and untracked, not ignored, files) into a temporary directory, applies each mutation
there in turn, runs the tests listed for it and restores the file. A mutation is

  caught    when its tests fail (pytest exit status 1),
  survived  when they all pass (a hole in the suite),
  broken    when pytest cannot even collect them (the mutation does not import: fix the list),
  timeout   when they run past --timeout.

The working tree is never modified. First the listed tests run once on the unmutated copy (skip with
--no-baseline): a failure there makes every "caught" meaningless.

  python scripts/mutation_check.py                 # every mutation, a markdown table on stdout (20-45 min)
  python scripts/mutation_check.py --list          # the mutations and their tests
  python scripts/mutation_check.py --only meta_,l1_  # the mutations whose name contains 'meta_' or 'l1_'
  python scripts/mutation_check.py --repo ../other --tests tests/uvf/test_train.py  # another checkout, other tests

Exit status: 0 if every mutation was caught, 1 otherwise (2: bad arguments or a mutation whose text is not found).
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Mutation = collections.namedtuple('Mutation', ['name', 'path', 'original', 'replacement', 'tests'])

# Tests (pytest node ids) of the training path.
META_BATCH = 'tests/uvf/test_train.py::test_meta_update_trains_on_relabelled_goals_scaled_rewards_and_meta_discounts'
LOW_BATCH = 'tests/uvf/test_train.py::test_low_level_reward_recomputed_at_train_time'
TF1_LOW = 'tests/uvf/test_train_tf1.py::test_low_level_update_matches_the_original_graph'
TF1_META = 'tests/uvf/test_train_tf1.py::test_meta_update_with_relabelled_goals_matches_the_original_graph'
DDPG = 'tests/uvf/test_ddpg_agent.py'
AGENT = 'tests/uvf/test_agent.py'
REWARDS = 'tests/uvf/test_rewards_functions.py'
CORRECTION = 'tests/uvf/test_off_policy_correction.py'
CONTEXT = 'tests/uvf/test_context.py'
COLLECT = 'tests/uvf/test_collect.py'
TRAIN = 'uvf/train_step.py'  # the compiled training step (HiroTrainer): the updates' inputs
TD3 = 'uvf/agents/ddpg_agent.py'
TD3_UPDATE = 'uvf/agents/td3_update.py'
OPC = 'uvf/off_policy_correction.py'

MUTATIONS = [
    # The meta-level update (uvf/train_step.py): relabelling, rewards, discounts, merged states.
    Mutation(
        'meta_relabelling_skipped', TRAIN,
        'goals = self.relabeler(batch.states, batch.next_states, batch.goals, batch.low_states, '
        'batch.low_actions,\n                           self._low_actor, '
        'candidate_actor_fn=self._low_actor_candidates)', 'goals = tf.identity(batch.goals)', [META_BATCH, TF1_META]),
    Mutation('meta_reward_negated', TRAIN, '    rewards = batch.rewards * self._reward_scale_factor\n',
             '    rewards = -batch.rewards * self._reward_scale_factor\n', [META_BATCH, TF1_META]),
    Mutation('meta_reward_scale_dropped', TRAIN, '    rewards = batch.rewards * self._reward_scale_factor\n',
             '    rewards = batch.rewards * 1.0\n', [META_BATCH, TF1_META]),
    Mutation('meta_gamma_dropped', TRAIN, '[batch.contexts], self._meta_gamma)', '[batch.contexts], 1.0)',
             [META_BATCH, TF1_META]),
    Mutation('meta_gamma_is_gamma', TRAIN, '[batch.contexts], self._meta_gamma)', '[batch.contexts], self._gamma)',
             [META_BATCH, TF1_META]),
    Mutation('meta_next_state_with_old_target', TRAIN, 'merged_states(batch.next_states, [batch.next_contexts])',
             'merged_states(batch.next_states, [batch.contexts])', [META_BATCH, TF1_META]),
    # The low-level update (uvf/train_step.py).
    Mutation('low_gamma_dropped', TRAIN, '[batch.goals], self._gamma)', '[batch.goals], 1.0)', [LOW_BATCH, TF1_LOW]),
    Mutation('low_trains_on_stored_reward', TRAIN, 'return (states, batch.actions, context_rewards, discounts,',
             'return (states, batch.actions, batch.rewards, discounts,', [LOW_BATCH, TF1_LOW]),
    Mutation('low_next_state_with_old_goal', TRAIN, 'merged_states(batch.next_states, [batch.next_goals])',
             'merged_states(batch.next_states, [batch.goals])', [LOW_BATCH, TF1_LOW]),
    # TD3 (uvf/agents/ddpg_agent.py, uvf/agents/td3_update.py).
    Mutation('td3_twin_max', TD3, 'return tf.minimum(q1, q2)', 'return tf.maximum(q1, q2)', [DDPG]),
    Mutation('td3_target_discount_dropped', TD3, 'td_targets = target_q_values * discounts + rewards',
             'td_targets = target_q_values + rewards', [DDPG]),
    Mutation('td3_target_noise_clip_removed', TD3,
             'return tf.clip_by_value(noise, -self._target_policy_noise_clip, self._target_policy_noise_clip)',
             'return noise', [DDPG]),
    Mutation('td3_target_q_clipping_disabled', TD3, 'if self._target_q_clipping is not None:', 'if False:', [DDPG]),
    Mutation('td3_dqda_clipping_disabled', TD3, 'if self._dqda_clipping > 0:', 'if False:', [DDPG]),
    Mutation('td3_actions_regularizer_disabled', TD3, 'if self._actions_regularizer:', 'if False:', [DDPG]),
    Mutation('td3_actor_gradient_sign', TD3, 'tf.stop_gradient(dqda + actions)', 'tf.stop_gradient(actions - dqda)',
             [DDPG]),
    Mutation('td3_soft_update_swapped', TD3, 'target.assign((1.0 - tau) * target + tau * source)',
             'target.assign((1.0 - tau) * source + tau * target)', [DDPG]),
    Mutation('td3_no_zero_gradient_actor_step', TD3_UPDATE,
             '    else:\n      self._actor_optimizer.apply_gradients(zip(actor_grads, self._actor_vars))',
             '    elif actor_on:\n      self._actor_optimizer.apply_gradients(zip(actor_grads, self._actor_vars))',
             [DDPG, TF1_LOW]),
    Mutation('td3_targets_every_call', TD3_UPDATE, 'if self._target_counter % self._period == 0:',
             'if self._target_counter % 1 == 0:', [DDPG, TF1_LOW]),
    Mutation('td3_actor_on_odd_calls', TD3_UPDATE, 'actor_on = tf.equal(self._num_updates % self._period, 0)',
             'actor_on = tf.equal(self._num_updates % self._period, 1)', [DDPG, TF1_LOW]),
    # Exploration and the meta regulariser (uvf/agent.py).
    Mutation('low_noise_clip_removed', 'uvf/agent.py',
             'def add_noise_fn(self, action_fn, stddev=1.0, debug=False, clip=True, global_step=None, rng=None):',
             'def add_noise_fn(self, action_fn, stddev=1.0, debug=False, clip=False, global_step=None, rng=None):',
             [AGENT]),
    Mutation('meta_actions_reg_disabled', 'uvf/agent.py', 'if self._actions_reg:', 'if False:', [AGENT]),
    Mutation('meta_actions_reg_wrong_dims', 'uvf/agent.py', 'tf.abs(actions[:, self._k:])',
             'tf.abs(actions[:, :self._k])', [AGENT]),
    # Rewards (uvf/context/rewards_functions.py) and goal transitions.
    Mutation('l1_epsilon_outside_sqrt', 'uvf/context/rewards_functions.py', 'dist = tf.sqrt(sq_dists + epsilon)',
             'dist = tf.sqrt(sq_dists) + epsilon', [REWARDS]),
    Mutation('l2_epsilon_outside_sqrt', 'uvf/context/rewards_functions.py', 'dist = tf.sqrt(dist + epsilon)',
             'dist = tf.sqrt(dist) + epsilon', [REWARDS]),
    Mutation('relative_goal_sign', 'uvf/context/rewards_functions.py', 'goals = states + goals',
             'goals = states - goals', [REWARDS, LOW_BATCH]),
    Mutation('termination_discount_always_one', 'uvf/context/rewards_functions.py',
             'discounts = dist > termination_epsilon', 'discounts = dist > 0.0', [REWARDS]),
    Mutation('goal_transition_sign', 'uvf/context/context_transition_functions.py',
             'goal[..., :k] + state[..., :k] - next_state[..., :k]',
             'goal[..., :k] - state[..., :k] + next_state[..., :k]', [CONTEXT]),
    Mutation('step_goals_not_relative', 'uvf/context/context_transition_functions.py',
             'relative = tf.expand_dims(goal[:, :k] + states[:, 0, :k], 1) - states[:, :, :k]',
             'relative = tf.expand_dims(goal[:, :k], 1) + 0.0 * states[:, :, :k]', [CORRECTION, CONTEXT]),
    Mutation('goal_schedule_off_by_one', 'uvf/context/context.py',
             'tf.equal(tf.math.floormod(timer, self.meta_action_every_n), 0)',
             'tf.equal(tf.math.floormod(timer, self.meta_action_every_n), 1)', [CONTEXT, 'tests/uvf/test_rollout.py']),
    Mutation('meta_reward_scale_not_0.1', 'uvf/collect.py', 'META_REWARD_SCALE = 0.1', 'META_REWARD_SCALE = 1.0',
             [COLLECT]),
    # The off-policy correction (uvf/off_policy_correction.py).
    Mutation('correction_sample_scale', OPC, 'num_samples=self.num_candidates, scale=0.5',
             'num_samples=self.num_candidates, scale=0.1', [CORRECTION, META_BATCH]),
    Mutation('correction_loc_sign', OPC, 'loc = tf.cast(next_state_reprs - state_reprs, tf.float32)',
             'loc = tf.cast(state_reprs - next_state_reprs, tf.float32)', [CORRECTION]),
    Mutation('correction_candidates_not_clipped', OPC, 'return clip_goals(samples, goal_minimum, goal_maximum)',
             'return samples', [CORRECTION]),
    Mutation('correction_argmin', OPC, 'best = tf.argmax(log_probs, axis=0, output_type=tf.int32)',
             'best = tf.argmin(log_probs, axis=0, output_type=tf.int32)', [CORRECTION]),
    Mutation('correction_ignores_representation', OPC,
             'self._state_repr_fn = state_repr_fn if state_repr_fn is not None else tf.identity',
             'self._state_repr_fn = tf.identity', [CORRECTION]),
]


def _project_files(repo):
  """Paths (relative) of the git-tracked and untracked, not ignored files."""
  out = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '-z'], cwd=repo,
                       capture_output=True, check=True).stdout.decode()
  return [p for p in out.split('\0') if p and os.path.isfile(os.path.join(repo, p))]


def _copy_repo(repo, destination):
  for path in _project_files(repo):
    target = os.path.join(destination, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(os.path.join(repo, path), target)


def _run_tests(copy, tests, timeout):
  """Runs pytest on `tests` in `copy` (stopping at the first failure).

  Returns:
    (exit status or 'timeout', seconds, the first failing test's name or '', last output lines).
  """
  start = time.monotonic()
  command = [sys.executable, '-m', 'pytest', '-q', '-x', '-rfE', '-p', 'no:cacheprovider'] + list(tests)
  try:
    result = subprocess.run(command, cwd=copy, capture_output=True, text=True, timeout=timeout, check=False)
  except subprocess.TimeoutExpired:
    return 'timeout', time.monotonic() - start, '', ''
  lines = (result.stdout + result.stderr).strip().splitlines()
  failed = [line.split()[1] for line in lines if line.startswith(('FAILED ', 'ERROR ')) and len(line.split()) > 1]
  first = failed[0].split('::', 1)[-1] if failed else ''
  return result.returncode, time.monotonic() - start, first, '\n'.join(lines[-5:])


def _verdict(status):
  if status == 'timeout':
    return 'timeout'
  return {0: 'survived', 1: 'caught'}.get(status, 'broken')


def _check_texts(mutations, repo):
  """Every original text must occur exactly once in its file (else the list is out of date)."""
  problems = []
  for m in mutations:
    with open(os.path.join(repo, m.path)) as f:
      count = f.read().count(m.original)
    if count != 1:
      problems.append(f'{m.name}: the original text occurs {count} times in {m.path}')
  return problems


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--only', default='', help='comma-separated: run the mutations whose name contains one of '
                      'these strings')
  parser.add_argument('--repo', default=REPO, help='the checkout to copy and mutate (default: this one)')
  parser.add_argument('--tests', nargs='+', help='run these tests for every mutation instead of its own')
  parser.add_argument('--list', action='store_true', help='list the mutations and their tests, run nothing')
  parser.add_argument('--no-baseline', action='store_true', help='skip the run of the tests on the unmutated copy')
  parser.add_argument('--timeout', type=float, default=900, help='seconds per pytest run (default 900)')
  parser.add_argument('--verbose', action='store_true', help='print the last lines of pytest output per mutation')
  args = parser.parse_args(argv)
  patterns = args.only.split(',')
  mutations = [m for m in MUTATIONS if any(p in m.name for p in patterns)]
  if args.tests:
    mutations = [m._replace(tests=args.tests) for m in mutations]
  if not mutations:
    print(f'No mutation name contains {args.only!r}; --list shows them.', file=sys.stderr)
    return 2
  problems = _check_texts(mutations, args.repo)
  if problems:
    print('\n'.join(problems), file=sys.stderr)
    return 2
  if args.list:
    for m in mutations:
      print(f'{m.name}: {m.path}: {m.original.strip()!r} -> {m.replacement.strip()!r}\n    tests: {" ".join(m.tests)}')
    return 0
  with tempfile.TemporaryDirectory(prefix='mutation_check_') as copy:
    _copy_repo(args.repo, copy)
    if not args.no_baseline:
      tests = sorted({t for m in mutations for t in m.tests})
      status, seconds, _, tail = _run_tests(copy, tests, args.timeout * 2)
      print(f'baseline ({len(tests)} test selections, unmutated): pytest exit {status} in {seconds:.0f} s',
            file=sys.stderr)
      if status != 0:
        print(tail, file=sys.stderr)
        print('The tests fail without any mutation: fix them first.', file=sys.stderr)
        return 1
    rows = []
    for m in mutations:
      path = os.path.join(copy, m.path)
      with open(path) as f:
        source = f.read()
      with open(path, 'w') as f:
        f.write(source.replace(m.original, m.replacement))
      try:
        status, seconds, failed, tail = _run_tests(copy, m.tests, args.timeout)
      finally:
        with open(path, 'w') as f:
          f.write(source)
      verdict = _verdict(status)
      rows.append((m, verdict, failed if verdict == 'caught' else '', seconds))
      print(f'{m.name}: {verdict} {failed} ({seconds:.0f} s)', file=sys.stderr)
      if args.verbose or verdict == 'broken':
        print(tail, file=sys.stderr)
  print('| mutation | file | change | tests run | result | first failing test | s |')
  print('|---|---|---|---|---|---|---|')
  for m, verdict, failed, seconds in rows:
    tests = ', '.join(t.replace('tests/uvf/', '').replace('tests/', '') for t in m.tests)
    change = ' '.join(f'`{m.original.strip()}` -> `{m.replacement.strip()}`'.split()).replace('|', '\\|')
    print(f'| {m.name} | {m.path} | {change} | {tests} | {verdict} | {failed} | {seconds:.0f} |')
  caught = sum(verdict == 'caught' for _, verdict, _, _ in rows)
  print(f'\n{caught} of {len(rows)} mutations caught.')
  return 0 if caught == len(rows) else 1


if __name__ == '__main__':
  sys.exit(main())
