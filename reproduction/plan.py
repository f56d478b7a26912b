"""The plan of a launch: the configuration and its protocol, every seed's commands and directories (checked by the
launcher as run_train.py and run_eval.py will check them), the manifest `<root>/reproduce.json`, and the results
read back from an earlier aggregate (`--results_from`)."""

import argparse
import csv
import dataclasses
import datetime
import json
import os
from pathlib import Path
import sys
from typing import Any, Dict, List, Optional, Tuple

from reproduction import heldout
from reproduction import outputs
from reproduction import protocol as protocols
from reproduction import results
from reproduction import seeds
from rundir import errors

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = 'reproduce.json'
LOG_DIR = 'logs'
# Bindings the kit sets itself (each has a flag): a --gin_param may not set them.
KIT_BINDINGS = {
    'train_uvf.seed': '--seeds',
    'train_uvf.save_policy_every_n_steps': '--policy_every',
    'train_uvf.num_episodes_train': '--steps',
    'evaluate.num_episodes_eval': '--eval_episodes',
    'evaluate.checkpoint_timeout': '--eval_timeout',
    'evaluate.num_threads': None,
    'evaluate.seed': None,
    'evaluate.checkpoint_path': None,
    'evaluate.checkpoint_range': None
}
# Evaluation is this much faster than training per environment step (docs/hiro/evaluation.md: 6.6x for an
# untrained policy, 12-19x for trained ones): an evaluation's share of a core, for the default --parallel.
EVAL_SPEEDUP = 6.6


class KitError(errors.UserError):
  """A user error: one message, exit status `exit_code` (EXIT_USAGE)."""


@dataclasses.dataclass
class Plan:
  root: str
  name: str
  protocol: protocols.Protocol
  specs: List[seeds.SeedSpec]  # every seed 0..K-1
  resumes: Dict[int, Tuple[bool, ...]]  # seed -> (train resumes, eval resumes)
  manifest: Dict[str, Any]
  parallel: int
  budget: int  # the Table 1 budget, environment steps
  only: Tuple[int, ...] = ()  # --only_seeds: the seeds this launch trains and evaluates; (): all
  # --results_from: seed -> rows evaluated elsewhere; the same for their held-out evaluations.
  imported: Dict[int, List[results.Row]] = dataclasses.field(default_factory=dict)
  imported_heldout: Dict[int, List[results.Row]] = dataclasses.field(default_factory=dict)

  def run_specs(self) -> List[seeds.SeedSpec]:
    """The seeds this launch trains and evaluates (--only_seeds; default all)."""
    return [spec for spec in self.specs if not self.only or spec.seed in self.only]

  def seed_rows(self) -> Dict[int, List[results.Row]]:
    """{seed: results.json rows}: a seed's own evaluations, or, where it has none here, its --results_from rows."""
    return {spec.seed: results.load_results(spec.eval_dir) or self.imported.get(spec.seed, []) for spec in self.specs}

  def heldout_rows(self) -> Dict[int, List[results.Row]]:
    """{seed: the rows of its held-out evaluations}, as `seed_rows`."""
    return {
        spec.seed: results.load_results(spec.heldout_dir) or self.imported_heldout.get(spec.seed, [])
        for spec in self.specs
    }


def _binding_name(binding: str) -> str:
  return binding.split('=', 1)[0].strip()


def default_parallel(cores: int, protocol: protocols.Protocol, eval_episodes: int, policy_every: int,
                     seeds_count: int) -> int:
  """Seeds at once: one training per core, plus each evaluation's share of a core.

  An evaluation of E episodes x T steps x M modes every `policy_every` training steps costs about
  M E T / (6.6 policy_every) of the training's time (evaluation runs ~6.6x faster per step than training): 0.23 for
  AntMaze (3 modes), 0.08 for AntPush / AntFall. So P = round(cores / (1 + that)), between 1 and the seeds.
  """
  share = len(protocol.modes) * eval_episodes * protocol.max_steps_per_episode / (EVAL_SPEEDUP * policy_every)
  return max(1, min(seeds_count, int(round(cores / (1.0 + share)))))


def _cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def core_slots(parallel: int) -> List[Tuple[int, ...]]:
  """The cores of each of `parallel` training slots: this process's cores in `parallel` equal contiguous groups
  (docs/hiro/training.md, "Process layout": one pinned single-thread process per core is 1.13x two unpinned
  processes at TensorFlow's default threads); [] when there are fewer cores than slots (nothing is pinned)."""
  try:
    cores = sorted(os.sched_getaffinity(0))
  except AttributeError:
    return []
  if parallel < 1 or len(cores) < parallel:
    return []
  size = len(cores) // parallel
  return [tuple(cores[i * size:(i + 1) * size]) for i in range(parallel)]


def _check_args(args: argparse.Namespace) -> Tuple[int, ...]:
  for binding in args.gin_param:
    if _binding_name(binding) in KIT_BINDINGS:
      flag = KIT_BINDINGS[_binding_name(binding)]
      raise KitError(f'--gin_param "{binding}": the kit sets {_binding_name(binding)} itself' +
                     (f' (use {flag}).' if flag else '.'))
  if args.seeds < 1 or args.steps < 1 or args.policy_every < 1 or args.eval_episodes < 1:
    raise KitError('--seeds, --steps, --policy_every and --eval_episodes must be positive.')
  only = parse_only_seeds(args.only_seeds, args.seeds)
  for path in args.results_from:
    if not os.path.isfile(path):
      raise KitError(f'--results_from {path}: no such file (give the per_seed.csv of an earlier aggregate).')
  return only


def _configuration(args: argparse.Namespace) -> Tuple[List[Path], protocols.Protocol, str, str]:
  """(config paths, protocol, gin config text, name) of the command line's configuration, parsed by the launcher."""
  import launcher  # pylint: disable=g-import-not-at-top  (imports TensorFlow: only when planning)
  launcher.prepare_process()
  try:
    config_paths = [launcher.resolve_config_path(p) for p in args.config]
    launcher.register_configurables()
    launcher.parse_gin(config_paths, args.gin_param)
    if not launcher.bound_configurables()['uvf']:
      raise KitError('the kit reproduces HIRO task configs (configs/ant_maze.gin, ant_push.gin, ant_fall.gin, ...); '
                     f'{" ".join(args.config)} is not one.')
    protocol = protocols.protocol_from_gin(args.mode)
  except (launcher.LaunchError, ValueError) as e:
    raise KitError(str(e)) from None
  import gin  # pylint: disable=g-import-not-at-top
  config: str = gin.config_str()
  return config_paths, protocol, config, launcher.config_name(config_paths)


def _resumes(seed: int, train_args: List[str], eval_args: List[str]) -> Tuple[bool, ...]:
  """(train resumes, eval resumes) of a seed's commands, as the launcher plans them; raises KitError."""
  from absl import flags  # pylint: disable=g-import-not-at-top

  import launcher  # pylint: disable=g-import-not-at-top
  checks = []
  for program, program_args in (('train', train_args), ('eval', eval_args)):
    fv = flags.FlagValues()
    launcher.define_flags(fv)
    try:
      checks.append(launcher.plan(program, fv([f'run_{program}.py'] + program_args), fv).resumes)
    except launcher.LaunchError as e:
      raise KitError(f'seed {seed} ({program}): {e}') from None
  return tuple(checks)


def make_plan(args: argparse.Namespace) -> Plan:
  """Resolves the configuration and checks every seed's run and eval directories with the launcher (as run_train.py
  and run_eval.py will); writes nothing. Raises KitError."""
  only = _check_args(args)
  config_paths, protocol, base_config, name = _configuration(args)
  root = os.path.abspath(args.root or os.path.join('runs', f'reproduce_{name}'))
  if os.path.exists(root) and not os.path.isdir(root):
    raise KitError(f'--root {root} exists and is not a directory.')
  episodes = protocols.num_episodes_for_steps(args.steps, protocol.max_steps_per_episode)
  length = protocols.run_length(episodes, protocol.max_steps_per_episode)
  cores = _cores()
  parallel = args.parallel or default_parallel(cores, protocol, args.eval_episodes, args.policy_every, args.seeds)
  threads = max(1, cores // parallel)
  configs = [str(p) for p in config_paths]
  user = [arg for binding in args.gin_param for arg in ('--gin_param', binding)]
  python, run_eval = sys.executable, os.path.join(REPO_ROOT, 'run_eval.py')
  specs: List[seeds.SeedSpec] = []
  resumes: Dict[int, Tuple[bool, ...]] = {}
  for seed in range(args.seeds):
    train_dir = os.path.join(root, f'seed_{seed}')
    eval_dir = os.path.join(train_dir, 'eval')
    train_args = configs + ['--train_dir', train_dir] + user + [
        '--gin_param', f'train_uvf.seed = {seed}', '--gin_param',
        f'train_uvf.save_policy_every_n_steps = {args.policy_every}', '--gin_param',
        f'train_uvf.num_episodes_train = {episodes}'
    ]
    eval_args = configs + ['--train_dir', train_dir, '--eval_dir', eval_dir] + user + [
        '--gin_param', f'evaluate.num_episodes_eval = {args.eval_episodes}', '--gin_param',
        f'evaluate.checkpoint_timeout = {args.eval_timeout}', '--gin_param', f'evaluate.num_threads = {threads}'
    ]
    resumes[seed] = _resumes(seed, train_args, eval_args)
    heldout_dir = os.path.join(train_dir, heldout.HELDOUT_DIR)
    heldout_args = configs + ['--train_dir', train_dir, '--eval_dir', heldout_dir] + user + [
        '--gin_param', f'evaluate.num_episodes_eval = {heldout.HELDOUT_EPISODES}', '--gin_param',
        f'evaluate.seed = {heldout.HELDOUT_SEED}', '--gin_param', f"evaluate.eval_modes = ['{protocol.primary_mode}']",
        '--gin_param', f'evaluate.num_threads = {threads}'
    ]
    specs.append(
        seeds.SeedSpec(seed=seed, train_dir=train_dir, eval_dir=eval_dir,
                       train_command=[python, os.path.join(REPO_ROOT, 'run_train.py')] + train_args,
                       eval_command=[python, run_eval] + eval_args, log_dir=os.path.join(root, LOG_DIR),
                       run_length=length, modes=list(protocol.modes), poll_secs=args.poll_secs,
                       max_restarts=args.max_restarts, detach=args.backend == 'local', repo_root=REPO_ROOT,
                       threads=threads, heldout_dir=heldout_dir, budget=args.budget or args.steps,
                       primary_mode=protocol.primary_mode, heldout_command=[python, run_eval] + heldout_args))
  manifest = {
      'config_files': configs,
      'bindings': list(args.gin_param),
      'gin_config': base_config,
      'policy_every': args.policy_every,
      'eval_episodes': args.eval_episodes,
      'protocol': protocol.to_json(),
      'steps': args.steps,
      'num_episodes_train': episodes,
      'run_length': length,
      'seeds': args.seeds,
  }
  imported: Dict[int, List[results.Row]] = {}
  imported_heldout: Dict[int, List[results.Row]] = {}
  for path in args.results_from:
    for seed, rows in load_per_seed_csv(path, protocol, args.seeds).items():
      imported.setdefault(seed, []).extend(rows)
    heldout_csv = os.path.join(os.path.dirname(path), 'heldout.csv')  # written beside it by the same aggregate
    if os.path.isfile(heldout_csv):
      for seed, rows in load_per_seed_csv(heldout_csv, protocol, args.seeds).items():
        imported_heldout.setdefault(seed, []).extend(rows)
  return Plan(root=root, name=name, protocol=protocol, specs=specs, resumes=resumes, manifest=manifest,
              parallel=parallel, budget=args.budget or args.steps, only=only, imported=imported,
              imported_heldout=imported_heldout)


def parse_only_seeds(value: Optional[str], seeds_count: int) -> Tuple[int, ...]:
  """--only_seeds '2' or '1,2' -> (1, 2); None -> (). Raises KitError."""
  if value is None:
    return ()
  try:
    only = tuple(sorted({int(part) for part in value.split(',') if part.strip()}))
  except ValueError:
    only = ()
  if not only or any(not 0 <= seed < seeds_count for seed in only):
    raise KitError(f'--only_seeds {value}: give seeds of 0..{seeds_count - 1} (--seeds {seeds_count}) separated by '
                   'commas, e.g. --only_seeds 2.')
  return only


def load_per_seed_csv(path: str, protocol: protocols.Protocol, seeds_count: int) -> Dict[int, List[results.Row]]:
  """--results_from: the rows of a per_seed.csv written by an earlier aggregate (`outputs.write_outputs`), as
  results.json rows by seed (seeds 0..seeds_count-1 only), each marked 'imported_from': path. Raises KitError when
  the file is not such a table or is of another task (a mode this protocol lacks, or another goal)."""
  out: Dict[int, List[results.Row]] = {}
  try:
    with open(path, newline='', encoding='utf-8') as f:
      reader = csv.DictReader(f)
      missing = [c for c in outputs.PER_SEED_FIELDS if c not in (reader.fieldnames or ())]
      if missing:
        raise KitError(f'--results_from {path}: not a per_seed.csv of the kit (no column {", ".join(missing)}).')
      for line, record in enumerate(reader, start=2):
        mode = record['mode']
        try:
          goal = json.loads(record['goal'])
          row = {
              'step': int(record['step']),
              'mode': mode,
              'goal': goal,
              'success_rate': float(record['success_rate']),
              'mean_final_distance': float(record['mean_final_distance']),
              'num_episodes': int(record['num_episodes']),
              'imported_from': path
          }
          seed = int(record['seed'])
        except (ValueError, TypeError):
          raise KitError(f'--results_from {path}, line {line}: not a result row ({dict(record)}).') from None
        expected = protocol.goals.get(mode)
        if mode not in protocol.modes or (expected is not None and
                                          not (isinstance(goal, list) and protocols.same_point(goal, expected))):
          raise KitError(f'--results_from {path}: its {mode} goal {record["goal"]} is not this task\'s '
                         f'({protocol.task}: {json.dumps(protocol.goals)}); it is the results of another task.')
        if 0 <= seed < seeds_count:
          out.setdefault(seed, []).append(row)
  except OSError as e:
    raise KitError(f'--results_from {path}: {e.strerror}.') from None
  return out


def check_manifest(plan: Plan) -> Optional[Dict[str, Any]]:
  """Refuses a root that holds a reproduction of another configuration (reproduce.json); returns the old one."""
  path = os.path.join(plan.root, MANIFEST)
  if not os.path.exists(path):
    return None
  with open(path, encoding='utf-8') as f:
    old: Dict[str, Any] = json.load(f)
  keys = ('gin_config', 'policy_every', 'eval_episodes')
  differ = [k for k in keys if old.get(k) != plan.manifest[k]]
  if old.get('protocol', {}).get('primary_mode') != plan.protocol.primary_mode:
    differ.append('primary mode (--mode)')
  if differ:
    raise KitError(f'{plan.root} holds a reproduction of another configuration ({MANIFEST}: {", ".join(differ)} '
                   f'differ; it was {" ".join(old.get("config_files", []))} {old.get("bindings")}). Nothing was '
                   'changed: use another --root, or the same config, --gin_param, --policy_every, --eval_episodes and '
                   '--mode as before.')
  return old


def write_manifest(plan: Plan, old: Optional[Dict[str, Any]], args: argparse.Namespace) -> None:
  """Records the reproduction in <root>/reproduce.json; earlier launches are kept in its 'launches' list."""
  data = dict(plan.manifest)
  launches = list(old.get('launches', [])) if old else []
  launches.append({
      'time': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': sys.argv,
      'seeds': args.seeds,
      'steps': args.steps,
      'parallel': plan.parallel,
      'backend': args.backend
  })
  data['launches'] = launches
  data['seeds'] = max(args.seeds, old.get('seeds', 0) if old else 0)
  os.makedirs(plan.root, exist_ok=True)
  tmp = os.path.join(plan.root, MANIFEST + '.tmp')
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(data, f, indent=1)
    f.write('\n')
  os.replace(tmp, os.path.join(plan.root, MANIFEST))
