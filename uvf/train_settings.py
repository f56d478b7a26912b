"""The settings `train_uvf` (uvf/train.py) hands to the training step and to the run loop, one typed record each.

Job of this module: name every number that crosses from `train_uvf`'s gin parameters into the training code, with its
unit, so that the step (`uvf.train_step.HiroTrainer`) and the loop (`uvf.run_loop.TrainingLoop`) read them by name,
never by position. `train_uvf` keeps the original's gin parameters (names and defaults) and builds these from them:

  UpdateSettings  what the compiled training step needs: batch size, discounts, reward scale, schedule, relabelling
  LoopSettings    what the Python loop between compiled calls needs: the step budget, checkpoint, summary and
                  progress periods, the initial collection, `load_path`

Units: "steps" are environment steps (the global step counts them); "secs" are wall-clock seconds.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class UpdateSettings:
  """The training step's settings (`uvf.train_step.HiroTrainer`); train_uvf's parameters of the same names.

  Attributes:
    batch_size: B, transitions per replay batch of each update, both levels (HIRO: 100).
    gamma: the low level's discount per environment step, multiplied by the low context's discounts (0.99).
    meta_gamma: the meta level's discount per meta transition (c environment steps), multiplied by the meta
      context's discounts (0.99; the original's gin value may be a 1-tuple, train_uvf passes its element).
    reward_scale_factor: multiplies the stored rewards (only the meta level trains on stored rewards; 1.0).
    target_update_period: updates per delayed actor step and target update, both levels (TD3's d; 2).
    num_updates_per_observation: low-level updates per loop iteration (1).
    num_collect_per_update: collection steps per loop iteration (1).
    num_collect_per_meta_update: N, the meta update's period in environment steps: one meta update when
      global_step // N changes during an iteration (10).
    goal_sample_strategy: the off-policy correction's candidates: 'sample' (original), 'FuN' or 'None'.
    seed: None (non-deterministic) or the run's seed; the collector's noise uses seed + 1, the relabeller's seed + 2.
    jit_compile: compile each level's TD3 update with XLA.
    skip_delayed_actor_step: `Td3Update.skip_delayed_actor_step` (False: the original's Adam step on the delayed
      actor updates).
  """
  batch_size: int
  gamma: float
  meta_gamma: float
  reward_scale_factor: float
  target_update_period: int
  num_updates_per_observation: int
  num_collect_per_update: int
  num_collect_per_meta_update: int
  goal_sample_strategy: str
  seed: Optional[int] = None
  jit_compile: bool = False
  skip_delayed_actor_step: bool = False


@dataclasses.dataclass(frozen=True)
class LoopSettings:
  """The run loop's settings (`uvf.run_loop.TrainingLoop`); train_uvf's parameters, `total_steps` derived.

  Attributes:
    total_steps: the global step (environment steps) at which training stops: num_episodes_train x
      max_steps_per_episode + 100, as the original.
    initial_steps: environment steps collected by the untrained noisy policies before the first update, in a fresh
      run (HIRO: initial_episodes x max_steps_per_episode = 2500).
    max_steps_per_episode: the episode length in environment steps (500); a full checkpoint is written at an
      episode end, where the environment's state is exact.
    steps_per_call: loop iterations (environment steps) per compiled call at most; speed only, results do not
      depend on it (100).
    log_every_n_steps: environment steps between progress lines and progress-file records (0: none; 100).
    save_summaries_secs: wall-clock seconds between TensorBoard summaries (30).
    save_interval_secs: wall-clock seconds between full checkpoints (written at the next episode end; 300).
    policy_save_dir: the policy checkpoints' directory, relative to the run directory ('policy').
    save_policy_every_n_steps: environment steps between policy checkpoints (0: none; 1000).
    save_policy_interval_secs: wall-clock seconds slept after each policy checkpoint (0).
    max_policies_to_save: policy checkpoints kept, newest first (None: all).
    load_path: None, or a checkpoint (TF1 names) whose low-level actor and critics a fresh run starts from.
  """
  total_steps: int
  initial_steps: int
  max_steps_per_episode: int
  steps_per_call: int
  log_every_n_steps: int = 0
  save_summaries_secs: float = 30
  save_interval_secs: float = 300
  policy_save_dir: str = 'policy'
  save_policy_every_n_steps: int = 0
  save_policy_interval_secs: float = 0
  max_policies_to_save: Optional[int] = None
  load_path: Optional[str] = None
