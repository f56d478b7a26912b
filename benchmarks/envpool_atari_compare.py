r"""Our Atari environment (`scalable_agent.atari.AtariEnvironment`) against EnvPool 1.2.5's: observations and speed.

  bash benchmarks/setup_envpool.sh ../venv_envpool      # once: EnvPool in its own venv (outside the repository)
  ../venv_envpool/bin/python benchmarks/envpool_atari_compare.py --compare [--game pong] [--steps 2000] [--life_loss]
  ../venv_envpool/bin/python benchmarks/envpool_atari_compare.py --speed [--game pong] [--envs 1,2,4,8] [--seconds 3]

Run it with the set-up venv's python (EnvPool is not a dependency of this repository; that venv sees this
repository's .venv for TensorFlow, ale-py and NumPy). Both sides: grey 84 x 84 (area resize), a 4-frame stack,
4 emulator frames per agent step, no sticky actions, the minimal action set, no reward clipping, no FIRE on reset.

--compare steps ours and EnvPool side by side on one seeded random action sequence, with 1 no-op at each start (the
only setting whose starts are the same on both: the two draw their no-ops from different generators) and EnvPool's
`env_seed` = our ALE seed. EnvPool returns the terminal observation with `done` and resets on its next step (action
ignored); this script sends that step at once, so both stay aligned (ours returns the next episode's first
observation with `done`). Printed, over steps+1 observations (the first included):
  * route A, EnvPool's own preprocessing (grey, INTER_AREA, stack 4, CHW turned HWC): exactly equal observations,
    max |diff|, the fraction of differing pixels, the |diff| histogram, the steps with |diff| > 3;
  * route B, EnvPool's raw max-pooled RGB 210 x 160 with our preprocessing and stacking on top: exactly equal ones;
  * route C, EnvPool's grey 210 x 160 with our area resize on top, against A: what the resize alone changes;
  * the emulator RAM, rewards and dones per step (the RAM after EnvPool's reset step where it resets), and the first
    step where one of them differs (the desynchronisation).
--life_loss: life loss ends the episode on both sides (ours `terminal_on_life_loss`, EnvPool `episodic_life`: our
training setting); without it whole games (our test mode).

--speed measures agent steps/s of ours stepped in-process (one environment, no child process, one OpenBLAS thread)
and of EnvPool in sync mode with N environments (`step` of N actions; --threads C++ threads), for --seconds each, in
--rounds alternating rounds (so that the machine's load hits both alike); up to 30 no-ops, whole games. Printed: each
measurement, then per system the mean steps/s, frames/s (4 per step) and the ratio to ours.
"""

import argparse
import os
import sys
import time
import types

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
# One OpenBLAS thread for our preprocessing's products, as in training's environment processes (actor.py).
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


def import_envpool():
  """EnvPool with only its Atari environments registered; exits 2 when it is not installed.

  `import envpool` imports every registry (envpool.entry), and the MyoSuite one fails without the metadata package
  envpool-assets-mujoco-large, which the set-up does not install (it is large and has no Atari content). A stand-in
  `envpool.entry` module skips them; only the Atari registry is imported.
  """
  sys.modules.setdefault('envpool.entry', types.ModuleType('envpool.entry'))
  try:
    import envpool  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    import envpool.atari.registration  # noqa: F401  pylint: disable=g-import-not-at-top,import-outside-toplevel
  except ImportError as e:
    print(f'envpool cannot be imported ({e}): run this with the python that benchmarks/setup_envpool.sh prints',
          file=sys.stderr)
    sys.exit(2)
  return envpool


def ale_seed(seed):
  """The ALE `random_seed` that `AtariEnvironment(seed=seed)` sets (its RandomState's first draw)."""
  return int(np.random.RandomState(seed).randint(0, 2**31 - 1))


def make_envpool(envpool, game, num_envs, **settings):
  """EnvPool's gymnasium pool for `game` (e.g. 'pong' -> 'Pong-v5'): our settings, overridden by `settings`."""
  task = ''.join(part.capitalize() for part in game.split('_')) + '-v5'
  kwargs = dict(num_envs=num_envs, batch_size=num_envs, img_height=84, img_width=84, stack_num=4, gray_scale=True,
                use_inter_area_resize=True, frame_skip=4, noop_max=30, use_fire_reset=False, episodic_life=False,
                reward_clip=False, repeat_action_probability=0.0, full_action_space=False, max_episode_steps=27000)
  kwargs.update(settings)
  return envpool.make(task, env_type='gymnasium', **kwargs)


def envpool_step(env, action):
  """One agent step of a 1-environment pool, with its reset step sent at once after `done`.

  Returns (observation [C, H, W] uint8, reward float, done bool, RAM uint8 [128] after the step (after the reset)).
  """
  obs, reward, terminated, truncated, info = env.step(np.array([action]))
  done = bool(terminated[0] or truncated[0])
  if done:
    obs, reset_reward, terminated, truncated, info = env.step(np.array([0]))
    assert reset_reward[0] == 0 and not (terminated[0] or truncated[0]), 'EnvPool: no reset step after done'
  return obs[0], float(reward[0]), done, info['ram'][0]


def compare(envpool, game, steps, life_loss, seed):
  """Prints the agreement of ours and EnvPool over `steps` agent steps (see the module docstring)."""
  from scalable_agent.atari import AtariEnvironment  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  ours = AtariEnvironment(game, seed=seed, noop_max=1, grayscale=True, frame_stack=4, terminal_on_life_loss=life_loss)
  ours_on_rgb = AtariEnvironment(game, seed=seed, noop_max=1, grayscale=True, frame_stack=4)  # route B's pipeline
  common = dict(batch_size=1, num_threads=1, env_seed=[ale_seed(seed)], noop_max=1, episodic_life=life_loss)
  env_a = make_envpool(envpool, game, 1, **common)
  env_b = make_envpool(envpool, game, 1, img_height=210, img_width=160, stack_num=1, gray_scale=False, **common)
  env_c = make_envpool(envpool, game, 1, img_height=210, img_width=160, stack_num=1, **common)
  assert env_a.action_space.n == ours.num_actions, (env_a.action_space.n, ours.num_actions)
  stacker_c = AtariEnvironment(game, seed=seed, noop_max=1, grayscale=True, frame_stack=4)  # route C's stack

  # pylint: disable=protected-access
  def route_b(rgb_chw, new_episode):  # our preprocessing of a max-pooled RGB screen, and our stack: uint8 [84, 84, 4]
    ours_on_rgb._screens[0] = rgb_chw.transpose(1, 2, 0)
    return ours_on_rgb._observe(ours_on_rgb._frame(0, 1), new_episode)

  def route_c(grey_chw, new_episode):  # our area resize (and rounding) of a grey screen, and our stack
    resized = ours_on_rgb._resize_rows @ grey_chw[0].astype(np.float32) @ ours_on_rgb._resize_columns_t
    return stacker_c._observe((resized + 0.5).astype(np.uint8)[:, :, None], new_episode)

  # pylint: enable=protected-access

  hist, hist_ca = np.zeros(256, np.int64), np.zeros(256, np.int64)
  exact_a = exact_b = ram_equal = reward_equal = done_equal = dones_ours = dones_envpool = 0
  large, desync = [], None

  def observe(t, ours_obs, obs_a, obs_b, obs_c, new_episode):
    nonlocal exact_a, exact_b
    diff = np.abs(ours_obs.astype(np.int16) - obs_a.transpose(1, 2, 0))
    hist[:] += np.bincount(diff.ravel(), minlength=256)
    exact_a += int(not diff.any())
    exact_b += int(np.array_equal(route_b(obs_b, new_episode), ours_obs))
    diff_ca = np.abs(route_c(obs_c, new_episode).astype(np.int16) - obs_a.transpose(1, 2, 0))
    hist_ca[:] += np.bincount(diff_ca.ravel(), minlength=256)
    if diff.max() > 3:
      large.append(t)

  ours_obs = ours.initial()[0]
  observe(0, ours_obs, env_a.reset()[0][0], env_b.reset()[0][0], env_c.reset()[0][0], True)
  start = time.perf_counter()
  for t, action in enumerate(np.random.default_rng(seed).integers(0, ours.num_actions, steps), 1):
    frame_before = ours.episode_frame_number
    reward, done, (ours_obs, _) = ours.step(int(action))
    frames = ours.episode_frame_number - frame_before  # emulator frames of the step (unless a new game started)
    obs_a, reward_a, done_a, ram = envpool_step(env_a, action)
    obs_b, _, done_b, _ = envpool_step(env_b, action)
    obs_c, _, done_c, _ = envpool_step(env_c, action)
    same = (np.array_equal(ours.ale.getRAM(), ram), float(reward) == reward_a, bool(done) == done_a)
    ram_equal, reward_equal, done_equal = ram_equal + same[0], reward_equal + same[1], done_equal + same[2]
    dones_ours, dones_envpool = dones_ours + int(done), dones_envpool + int(done_a)
    if not all(same) and desync is None:
      desync = (f'step {t}, ' + ' and '.join(n for n, s in zip(('RAM', 'reward', 'done'), same) if not s) +
                f' not equal (ours: reward {float(reward):g}, done {bool(done)}' +
                (f', played {frames} of 4 emulator frames' if frames >= 0 else '') +
                f'; EnvPool: reward {reward_a:g}, done {done_a})')
    observe(t, ours_obs, obs_a, obs_b, obs_c, bool(done))
    assert done_b == done_c == done_a, 'EnvPool routes out of step'
  n, total = steps + 1, hist.sum()
  print(f'{game}, {steps} steps ({time.perf_counter() - start:.0f} s), life loss = end of episode: {life_loss}, '
        f'ALE seed {ale_seed(seed)}')
  print(f'  A, EnvPool grey 84x84 stack 4: exactly equal observations {exact_a}/{n}, '
        f'max |diff| {np.flatnonzero(hist).max()}, pixels differing {(total - hist[0]) / total:.4%}')
  print(f'    |diff| histogram: 0: {hist[0]}, 1: {hist[1]}, 2: {hist[2]}, 3: {hist[3]}, >3: {hist[4:].sum()}')
  print(f'    steps with |diff| > 3: {len(large)}' + (f', the first ones {large[:8]}' if large else ''))
  print(f'  B, EnvPool raw RGB + our preprocessing and stack: exactly equal observations {exact_b}/{n}')
  print(f'  C, EnvPool grey 210x160 + our area resize, against A: pixels differing {hist_ca[1:].sum()} of '
        f'{hist_ca.sum()}, max |diff| {np.flatnonzero(hist_ca).max()}')
  print(f'  RAM equal {ram_equal}/{steps}, reward equal {reward_equal}/{steps}, done equal {done_equal}/{steps} '
        f'(dones: ours {dones_ours}, EnvPool {dones_envpool}); first desynchronisation: {desync or "none"}')


def speed(envpool, game, env_counts, seconds, rounds, threads):
  """Prints agent steps/s of ours in-process (1 env) and of EnvPool sync with N envs, in alternating rounds."""
  from scalable_agent.atari import AtariEnvironment  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rng = np.random.default_rng(0)

  def ours_rate():
    env = AtariEnvironment(game, seed=1, grayscale=True, frame_stack=4, noop_max=30, terminal_on_life_loss=False)
    env.initial()
    actions, steps, start = [int(a) for a in rng.integers(0, env.num_actions, 100)], 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
      for action in actions:
        env.step(action)
      steps += 100
    return steps / (time.perf_counter() - start)

  def envpool_rate(num_envs):
    env = make_envpool(envpool, game, num_envs, num_threads=threads, seed=1)
    env.reset()
    actions, steps, start = rng.integers(0, env.action_space.n, (100, num_envs)), 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
      for action in actions:
        env.step(action)
      steps += 100 * num_envs
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate

  rates = {'ours': []} | {n: [] for n in env_counts}
  for r in range(rounds):
    for system in rates:
      rates[system].append(ours_rate() if system == 'ours' else envpool_rate(system))
      print(
          f'round {r + 1}: {"ours in-process" if system == "ours" else f"EnvPool sync N={system}"}: '
          f'{rates[system][-1]:.0f} steps/s', flush=True)
  base = np.mean(rates['ours'])
  print(f'{game}, {rounds} rounds of {seconds:g} s, EnvPool num_threads={threads} (0: min(N, cores)); means:')
  for system, values in rates.items():
    name = 'ours in-process, 1 env' if system == 'ours' else f'EnvPool sync, N={system}'
    print(f'  {name:24s} {np.mean(values):6.0f} steps/s {4 * np.mean(values):7.0f} frames/s '
          f'{np.mean(values) / base:5.2f}x ours')


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  mode = parser.add_mutually_exclusive_group(required=True)
  mode.add_argument('--compare', action='store_true', help='step by step agreement of the observations and dynamics')
  mode.add_argument('--speed', action='store_true', help='agent steps/s of ours and of EnvPool sync')
  parser.add_argument('--game', default='pong', help='ale-py ROM id (EnvPool task <Game>-v5)')
  parser.add_argument('--seed', type=int, default=1, help='--compare: our seed (EnvPool gets its ALE seed), actions')
  parser.add_argument('--steps', type=int, default=2000, help='--compare: agent steps')
  parser.add_argument('--life_loss', action='store_true', help='--compare: life loss ends the episode on both sides')
  parser.add_argument('--envs', default='1,2,4,8', help='--speed: EnvPool pool sizes N, comma-separated')
  parser.add_argument('--seconds', type=float, default=3., help='--speed: seconds per measurement')
  parser.add_argument('--rounds', type=int, default=2, help='--speed: alternating rounds')
  parser.add_argument('--threads', type=int, default=0, help='--speed: EnvPool num_threads (0: min(N, cores))')
  args = parser.parse_args()
  envpool = import_envpool()
  if args.compare:
    compare(envpool, args.game, args.steps, args.life_loss, args.seed)
  else:
    speed(envpool, args.game, [int(n) for n in args.envs.split(',')], args.seconds, args.rounds, args.threads)


if __name__ == '__main__':
  main()
