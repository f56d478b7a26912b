"""A small stand-in for DeepMind Lab's Python module `deepmind_lab`, for tests (the real one cannot be installed here).

It implements the documented API (google-deepmind/lab docs/users/python_api.md) that the IMPALA wrapper
uses, checks its arguments as the real module does, and records every call so that tests can check what the wrapper
passed:

  env = deepmind_lab.Lab(level, observations, config={...}, renderer='software', level_cache=None)
  env.reset(seed=None, episode=-1)
  env.observations()  -> {'RGB_INTERLEAVED': uint8 [height, width, 3], 'INSTR': str, ...}
  env.step(action, num_steps=1) -> float reward; `action` np.intc [7]
  env.is_running(), env.close(), env.action_spec(), env.observation_spec(), env.num_steps()

Dynamics (deterministic): every episode lasts `EPISODE_FRAMES` frames; `step` runs min(num_steps, frames left)
frames and returns, per frame, 1.0 if the action moves forward (MOVE_BACK_FORWARD = +1) plus 10.0 if it fires. Frame
pixels: channel 0 = frames played in the episode, channel 1 = episode seed % 256, channel 2 = episodes started % 256.
The instruction is 'episode <seed>'.
"""

import numbers

import numpy as np

IS_FAKE = True
EPISODE_FRAMES = 10
# Every Lab created, in order (tests clear it).
INSTANCES = []

_ACTIONS = (  # (name, min, max), DMLab's order.
    ('LOOK_LEFT_RIGHT_PIXELS_PER_FRAME', -512, 512),
    ('LOOK_DOWN_UP_PIXELS_PER_FRAME', -512, 512),
    ('STRAFE_LEFT_RIGHT', -1, 1),
    ('MOVE_BACK_FORWARD', -1, 1),
    ('FIRE', 0, 1),
    ('JUMP', 0, 1),
    ('CROUCH', 0, 1),
)
_OBSERVATIONS = ('RGB_INTERLEAVED', 'RGBD_INTERLEAVED', 'INSTR')


class Lab:
  """A fake DeepMind Lab environment (module docstring)."""

  def __init__(self, level, observations, config=None, renderer='software', level_cache=None):
    config = {} if config is None else config
    for key, value in config.items():
      if not isinstance(key, str) or not isinstance(value, str):
        raise TypeError(f'config keys and values must be str, got {key!r}: {value!r}')
    for name in observations:
      if name not in _OBSERVATIONS:
        raise ValueError(f'Unknown observation {name!r}')
    if renderer not in ('software', 'hardware'):
      raise ValueError(f'renderer must be software or hardware, got {renderer!r}')
    self.level = level
    self.observation_names = list(observations)
    self.config = dict(config)
    self.renderer = renderer
    self.level_cache = level_cache
    self.width = int(config.get('width', 320))
    self.height = int(config.get('height', 240))
    self.calls = []  # (method name, arguments) in call order.
    self.reset_seeds = []
    self.actions = []  # Each action given to step, as passed.
    self.closed = False
    self._running = False
    self._episodes = 0
    self._seed = None
    self._frame = 0
    INSTANCES.append(self)

  def _check_open(self):
    if self.closed:
      raise RuntimeError('Environment is closed')

  def reset(self, seed=None, episode=-1):
    self._check_open()
    self.calls.append(('reset', {'seed': seed, 'episode': episode}))
    self.reset_seeds.append(seed)
    self._seed = seed
    self._frame = 0
    self._episodes += 1
    self._running = True
    return True

  def is_running(self):
    self.calls.append(('is_running', {}))
    return self._running

  def observations(self):
    self._check_open()
    self.calls.append(('observations', {}))
    if not self._running:
      raise RuntimeError('Environment in wrong status for call to observations()')
    frame = np.zeros((self.height, self.width, 3), np.uint8)
    frame[:, :, 0] = self._frame % 256
    frame[:, :, 1] = (self._seed or 0) % 256
    frame[:, :, 2] = self._episodes % 256
    result = {
        'RGB_INTERLEAVED': frame,
        'RGBD_INTERLEAVED': np.zeros((self.height, self.width, 4), np.uint8),
        'INSTR': f'episode {self._seed}'
    }
    return {name: result[name] for name in self.observation_names}

  def step(self, action, num_steps=1):
    self._check_open()
    self.calls.append(('step', {'action': action, 'num_steps': num_steps}))
    if not self._running:
      raise RuntimeError('Environment in wrong status for call to step()')
    if not isinstance(action, np.ndarray) or action.dtype != np.intc or action.shape != (len(_ACTIONS),):
      raise ValueError(f'action must be a numpy array of dtype intc and shape [7], got {action!r}')
    for value, (name, low, high) in zip(action, _ACTIONS):
      if not low <= value <= high:
        raise ValueError(f'action {name} = {value} outside [{low}, {high}]')
    if isinstance(num_steps, bool) or not isinstance(num_steps, numbers.Integral) or num_steps < 1:
      raise ValueError(f'num_steps must be a positive int, got {num_steps!r}')
    self.actions.append(action.copy())
    frames = min(num_steps, EPISODE_FRAMES - self._frame)
    self._frame += frames
    if self._frame >= EPISODE_FRAMES:
      self._running = False
    return float(frames * ((action[3] == 1) * 1.0 + action[4] * 10.0))

  def num_steps(self):
    return self._frame

  def close(self):
    self.calls.append(('close', {}))
    self.closed = True
    return True

  def action_spec(self):
    return [{'name': name, 'min': low, 'max': high} for name, low, high in _ACTIONS]

  def observation_spec(self):
    return [{
        'name': 'RGB_INTERLEAVED',
        'dtype': np.uint8,
        'shape': (self.height, self.width, 3)
    }, {
        'name': 'RGBD_INTERLEAVED',
        'dtype': np.uint8,
        'shape': (self.height, self.width, 4)
    }, {
        'name': 'INSTR',
        'dtype': str,
        'shape': ()
    }]


def set_runfiles_path(path):
  """Recorded in `RUNFILES_PATHS`."""
  RUNFILES_PATHS.append(path)


RUNFILES_PATHS = []
