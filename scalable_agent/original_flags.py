"""The command-line flags of the original `experiment.py` (deepmind/scalable_agent, L48-90)
and the two flags of multi-machine training: for each, its default, its help and, for a choice, its values.

This is the one place their defaults are written: `settings.Settings` and `experiment.experiment` take theirs from
here, and the launcher defines its command-line flags from it (`--batch_size` is the gin parameter
`experiment.batch_size`, with this default). It imports nothing of the project and no TensorFlow, so that the
launcher can read it before TensorFlow loads.
"""

import dataclasses
from typing import Any, Dict, Optional, Tuple, Union


@dataclasses.dataclass(frozen=True)
class Flag:
  """One flag: its default (its type is the flag's: int, float or str), its help text and, for a flag that takes
  one of a few values, those values."""
  default: Union[int, float, str]
  help: str
  choices: Optional[Tuple[str, ...]] = None


# The original flags with their original defaults, in the original's order.
ORIGINAL = {
    'mode': Flag('train', 'training or test mode.', ('train', 'test')),
    'test_num_episodes': Flag(10, 'number of episodes per level in test mode.'),
    'task': Flag(-1, 'task id; -1 for local (single-machine) training.'),
    'job_name': Flag('learner', 'job name; ignored when task is -1.', ('learner', 'actor')),
    'total_environment_frames': Flag(int(1e9), 'total environment frames to train for.'),
    'num_actors': Flag(4, 'number of actors.'),
    'batch_size': Flag(2, 'batch size for training.'),
    'unroll_length': Flag(100, 'unroll length in agent steps.'),
    'num_action_repeats': Flag(4, 'number of action repeats.'),
    'seed': Flag(1, 'random seed.'),
    'entropy_cost': Flag(0.00025, 'entropy cost/multiplier.'),
    'baseline_cost': Flag(.5, 'baseline cost/multiplier.'),
    'discounting': Flag(.99, 'discounting factor.'),
    'reward_clipping': Flag('abs_one', 'reward clipping.', ('abs_one', 'soft_asymmetric')),
    'dataset_path': Flag('', 'path to the dataset needed for psychlab_* levels.'),
    'level_name': Flag('explore_goal_locations_small', 'level name, or "dmlab30" for the full DMLab-30 suite.'),
    'width': Flag(96, 'observation width.'),
    'height': Flag(72, 'observation height.'),
    'learning_rate': Flag(0.00048, 'learning rate.'),
    'decay': Flag(.99, 'RMSProp optimizer decay.'),
    'momentum': Flag(0., 'RMSProp momentum.'),
    'epsilon': Flag(.1, 'RMSProp epsilon.'),
}

# Multi-machine training (not in the original): scalable_agent/distributed.py, docs/impala/distributed.md.
DISTRIBUTED = {
    'learner_address':
        Flag(
            '', 'IMPALA actor jobs (--job_name=actor --task=i): HOST:PORT of the learner\'s Reverb '
            'server (experiment.learner_address).'),
    'reverb_port':
        Flag(
            8000, 'IMPALA learner job (--job_name=learner --task=0): port of its Reverb server; 0 picks a '
            'free one (experiment.reverb_port).'),
    'actors_per_process':
        Flag(
            1, 'IMPALA actor jobs: actor tasks this process runs, each in a thread of its own: --task=i runs '
            'tasks i .. i + K - 1 (experiment.actors_per_process).'),
}

# {name: default} of every flag above.
DEFAULTS: Dict[str, Any] = {name: flag.default for name, flag in {**ORIGINAL, **DISTRIBUTED}.items()}
