"""The shallow feed-forward agent's one-step inference in NumPy, for the actors (`experiment.actor_inference`).

With `experiment.actor_inference = 'numpy'` each actor computes its own policy step with NumPy on a copy of the
agent's parameters, instead of sending it through `dynamic_batching` to one TensorFlow call on the learner's
variables ('batched', the original's design). The function is the same: `networks.FeedForwardAgent` with the shallow
torso (conv 8x8/4 16 -> ReLU -> conv 4x4/2 32 -> ReLU -> linear 256 -> ReLU -> policy logits, baseline; VALID
padding), on the same parameters, to float32 rounding (tests/scalable_agent/test_numpy_agent.py compares it with the
TensorFlow agent); the action is drawn from Categorical(logits) with the actor's own NumPy generator.

Why: a TensorFlow call costs about 1.5 ms of CPU whatever its batch (the price of the call, not of the ~3 M
multiply-adds), and with 2-4 actors the batches are nearly single calls; this forward pass costs about 0.3 ms in the
actor's own thread (docs/impala/atari.md, "Where the Atari time goes").

Parameters: `ParameterCopy.refresh()` copies the variables after each learner step (the learner's thread), so an
actor acts with the parameters of the last finished step, as the batched inference reads them between steps.

Usage:
  parameters = ParameterCopy(agent)                  # a copy of the variables now
  policy = NumpyPolicy(parameters, seed=(seed, i))   # one per actor (its own generator)
  agent_output, core_state = policy(last_action, env_output, core_state)   # as `actor.numpy_policy`'s callable
  parameters.refresh()                               # after each learner step
"""

import contextlib
import ctypes

import numpy as np

from scalable_agent import agent as agent_lib
from scalable_agent import networks

NETWORKS = ('shallow',)  # The `agent_network.network`s this module runs.
# The variables the forward pass reads, in this order (`FeedForwardAgent.tf1_variables` names).
_VARIABLES = ('agent/torso/convnet/conv_2d/w', 'agent/torso/convnet/conv_2d/b', 'agent/torso/convnet/conv_2d_1/w',
              'agent/torso/convnet/conv_2d_1/b', 'agent/torso/linear/w', 'agent/torso/linear/b',
              'agent/policy_logits/w', 'agent/policy_logits/b', 'agent/baseline/w', 'agent/baseline/b')


def openblas_thread_functions():
  """(get, set) of the OpenBLAS that NumPy loaded in this process (its 64-bit-integer builds suffix the names with
  `64_`); None where NumPy uses another BLAS or the platform has no /proc/self/maps."""
  try:
    with open('/proc/self/maps') as maps:
      paths = sorted({line.split()[-1] for line in maps if 'openblas' in line.rsplit('/', 1)[-1].lower()})
  except OSError:
    return None
  for path in paths:
    try:
      library = ctypes.CDLL(path)  # Already loaded: this only finds it.
    except OSError:
      continue
    for suffix in ('64_', ''):
      get = getattr(library, f'openblas_get_num_threads{suffix}', None)
      set_ = getattr(library, f'openblas_set_num_threads{suffix}', None)
      if get is not None and set_ is not None:
        return get, set_
  return None


@contextlib.contextmanager
def single_threaded_blas():
  """NumPy's OpenBLAS on one thread while the block runs (the previous count after it).

  Each actor's products are small (a batch of one frame); OpenBLAS would split them over its threads and spend
  more CPU waiting for them (0.5 against 0.3 ms per step on 2 cores) than it saves. Other BLAS builds: no change.
  """
  functions = openblas_thread_functions()
  if functions is None:
    yield
    return
  get, set_ = functions
  previous = get()
  set_(1)
  try:
    yield
  finally:
    set_(previous)


def supports(agent):
  """Whether `agent` can run in NumPy: a `networks.FeedForwardAgent` with the shallow torso."""
  return isinstance(agent, networks.FeedForwardAgent) and agent.torso == 'shallow'


class ParameterCopy:
  """NumPy copies of a shallow `FeedForwardAgent`'s variables, shared by the actors' `NumpyPolicy`s."""

  def __init__(self, agent):
    """Args:
      agent: a shallow `networks.FeedForwardAgent` (`supports(agent)`).

    Raises:
      ValueError: another agent network.
    """
    if not supports(agent):
      raise ValueError("experiment.actor_inference = 'numpy' runs the shallow feed-forward agent only "
                       "(agent_network.network = 'shallow'); use experiment.actor_inference = 'batched' for the "
                       'other networks.')
    variables = agent.tf1_variables()
    self._variables = [variables[name] for name in _VARIABLES]
    self.weights = None
    self.refresh()

  def refresh(self):
    """Copies the variables' current values (call it when no update runs, e.g. after a learner step).

    The copy replaces `weights` in one assignment: an actor reading it gets one step's parameters, never a mix.
    """
    w1, b1, w2, b2, *dense = [np.array(v.numpy(), dtype=np.float32) for v in self._variables]
    # Convolution kernels [k, k, C_in, C_out] as matrices [k·k·C_in, C_out], matching `_conv`'s patch layout.
    self.weights = (w1.reshape(-1, w1.shape[-1]), b1, w1.shape[0], w2.reshape(-1,
                                                                              w2.shape[-1]), b2, w2.shape[0], *dense)


def _conv(x, kernel_matrix, bias, kernel_size, stride):
  """VALID convolution as one product: x float32 [N, H, W, C] -> [N, (H - k) // s + 1, (W - k) // s + 1, C_out]."""
  n, height, width, channels = x.shape
  out_height, out_width = (height - kernel_size) // stride + 1, (width - kernel_size) // stride + 1
  s_n, s_h, s_w, s_c = x.strides
  patches = np.lib.stride_tricks.as_strided(x, (n, out_height, out_width, kernel_size, kernel_size, channels),
                                            (s_n, s_h * stride, s_w * stride, s_h, s_w, s_c), writeable=False)
  y = patches.reshape(n * out_height * out_width, kernel_size * kernel_size * channels) @ kernel_matrix
  y += bias
  return y.reshape(n, out_height, out_width, -1)


def forward(weights, frame):
  """The shallow agent's logits and baseline.

  Args:
    weights: `ParameterCopy.weights`.
    frame: uint8 [N, H, W, C].

  Returns:
    (policy_logits float32 [N, A], baseline float32 [N]).
  """
  w1, b1, k1, w2, b2, k2, linear_w, linear_b, logits_w, logits_b, baseline_w, baseline_b = weights
  (_, _, stride1), (_, _, stride2) = networks.SHALLOW_CONVS
  x = np.asarray(frame, dtype=np.float32) / np.float32(255.)  # A new array, as the agent's cast and division.
  x = np.maximum(_conv(x, w1, b1, k1, stride1), 0.)
  x = np.maximum(_conv(x, w2, b2, k2, stride2), 0.)
  x = x.reshape(x.shape[0], -1) @ linear_w
  x += linear_b
  np.maximum(x, 0., out=x)
  policy_logits = x @ logits_w + logits_b
  baseline = (x @ baseline_w + baseline_b)[:, 0]
  return policy_logits, baseline


def sample(policy_logits, generator):
  """Actions ~ Categorical(softmax(logits)) per row: int32 [N] from float [N, A], drawn by inverse CDF in float64."""
  logits = np.asarray(policy_logits, dtype=np.float64)
  probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
  cumulative = np.cumsum(probabilities, axis=1)
  thresholds = generator.random(logits.shape[0]) * cumulative[:, -1]
  actions = (cumulative <= thresholds[:, None]).sum(axis=1)
  return np.minimum(actions, logits.shape[1] - 1).astype(np.int32)


class NumpyPolicy:
  """An actor's policy step in NumPy: the interface of `actor.numpy_policy`'s callable."""

  def __init__(self, parameters, seed=None):
    """Args:
      parameters: the shared `ParameterCopy`.
      seed: seeds this policy's generator (`np.random.default_rng`); None: fresh entropy.
    """
    self._parameters = parameters
    self._generator = np.random.default_rng(seed)

  def __call__(self, last_action, env_output, core_state):
    """One step for a batch.

    Args:
      last_action: int32 [B] (not used, as by the feed-forward agent).
      env_output: `environments.StepOutput` whose observation is (frame uint8 [B, H, W, C], instruction).
      core_state: (c, h) float32 [B, 256] each, returned unchanged.

    Returns:
      (AgentOutput(action int32 [B], policy_logits float32 [B, A], baseline float32 [B]), LSTMState(c, h)).
    """
    del last_action
    policy_logits, baseline = forward(self._parameters.weights, env_output.observation[0])
    action = sample(policy_logits, self._generator)
    return agent_lib.AgentOutput(action, policy_logits, baseline), agent_lib.LSTMState(*core_state)
