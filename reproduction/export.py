"""--export_best: the best policy over all seeds (headline mode, within the budget) copied out of its run directory
to be published, with `best_policy.json`: where it comes from, its evaluation, and the command that evaluates it
again; and `config.gin`: its complete gin configuration, flattened (`policy_config`), so that the bundle loads
without the repository's configs/ tree (`uvf.pretrained.load_policy`)."""

import dataclasses
import datetime
import json
import os
import shlex
import shutil
from typing import Any, Dict, List, Optional, Sequence

from reproduction import heldout
from reproduction import plan as plans
from reproduction import progress
from reproduction import results
from rundir import checkpoints

EXPORT_INFO = 'best_policy.json'
POLICY_CONFIG = 'config.gin'


def policy_config(config_files: Sequence[str], bindings: Sequence[str]) -> str:
  """The text of a policy bundle's `config.gin`: a header comment (what it is, the config files and bindings it
  came from), then `gin.config_str()` of `config_files` and `bindings` parsed exactly as run_eval.py parses them
  (`launcher.parse_gin`): the whole configuration, flattened (no include left).

  The text is checked: parsed alone (after `gin.clear_config()`, the configurables registered), it must give the
  same `gin.config_str()`. Replaces this process's gin configuration (it ends parsed from the text) and imports
  TensorFlow (the configurables' modules).

  Args:
    config_files: the gin files, paths as run_eval.py takes them (e.g. ['configs/ant_push.gin']).
    bindings: the extra gin bindings ('NAME.PARAM = VALUE' strings), in order.

  Raises:
    ValueError: a config file or binding is bad (the launcher's message), or the flattened text does not parse back
      to the same configuration.
  """
  import launcher  # pylint: disable=g-import-not-at-top  (imports TensorFlow: only when exporting)
  launcher.prepare_process()
  try:
    paths = [launcher.resolve_config_path(p) for p in config_files]
    launcher.register_configurables()
    launcher.parse_gin(paths, list(bindings))
  except launcher.LaunchError as e:
    raise ValueError(str(e)) from None
  import gin  # pylint: disable=g-import-not-at-top
  flat: str = gin.config_str()
  shown = [_repo_relative(str(p)) for p in paths]
  header = [
      '# config.gin of a trained HIRO policy bundle: the complete gin configuration that run_eval.py parses to',
      '# evaluate this policy, flattened (no includes), so that uvf.pretrained.load_policy builds its agents without',
      "# the repository's configs/ tree. Written by scripts/export_policy_config.py (or the reproduction kit's",
      '# --export_best) as gin.config_str() after launcher.parse_gin of:',
      '#   config files: ' + ', '.join(shown),
      '#   bindings: ' + ('; '.join(bindings) if bindings else '(none)'),
      '#   the config files include (under configs/):',
  ] + ['#     ' + name for path in paths for name in launcher.includes(path)] + [
      '# Do not edit: regenerate it with  python scripts/export_policy_config.py <bundle directory>',
      '',
  ]
  text = '\n'.join(header) + '\n' + flat
  with gin.unlock_config():
    gin.clear_config()
    gin.parse_config(text)
  if gin.config_str() != flat:
    raise ValueError(f'the flattened gin configuration of {", ".join(shown)} does not parse back to the same '
                     'configuration; it cannot be exported as config.gin.')
  return text


def _repo_relative(path: str) -> str:
  root = plans.REPO_ROOT
  return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


def export_checkpoint(prefix: str, out_dir: str, info: Dict[str, Any], files: Optional[Dict[str, str]] = None) -> str:
  """Copies the checkpoint `prefix` (its `.index` and every data shard) into `out_dir` with a TensorFlow `checkpoint`
  state file naming it, `info` as `best_policy.json` and `files` ({file name: text}, e.g. `config.gin`), replacing
  an earlier export there.

  The new export is written beside `out_dir` and swapped in, so that a fault leaves the old export or the new one.
  `out_dir` must not exist, be empty or hold an earlier export (a `best_policy.json`): nothing else is overwritten.

  Returns:
    The exported prefix, `<out_dir>/<basename of prefix>`.

  Raises:
    ValueError: `out_dir` holds something else, or the checkpoint is not complete.
  """
  out_dir = os.path.abspath(out_dir)
  if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or
                                  (os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, EXPORT_INFO)))):
    raise ValueError(f'{out_dir} exists and is not an earlier export (no {EXPORT_INFO} in it); choose a new or '
                     'empty directory.')
  name = os.path.basename(prefix)
  shards = checkpoints.complete_shards(prefix)
  if shards is None:
    raise ValueError(f'{prefix} is not a complete checkpoint (its .index and data shards).')
  parent = os.path.dirname(out_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = f'{out_dir}.tmp-{os.getpid()}'
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for path in [prefix + '.index'] + shards:
    shutil.copyfile(path, os.path.join(tmp, os.path.basename(path)))
  with open(os.path.join(tmp, 'checkpoint'), 'w', encoding='utf-8') as f:
    f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
  with open(os.path.join(tmp, EXPORT_INFO), 'w', encoding='utf-8') as f:
    json.dump(info, f, indent=1)
    f.write('\n')
  for name, text in (files or {}).items():
    with open(os.path.join(tmp, name), 'w', encoding='utf-8') as f:
      f.write(text)
  old = f'{out_dir}.old-{os.getpid()}'
  if os.path.exists(out_dir):
    os.replace(out_dir, old)
  os.replace(tmp, out_dir)
  shutil.rmtree(old, ignore_errors=True)
  return os.path.join(out_dir, name)


def export_best(plan: plans.Plan, out_dir: str) -> List[str]:
  """--export_best DIR: copies the task's best policy checkpoint over all seeds (headline mode, within the budget)
  to DIR with best_policy.json (where it comes from, its evaluation, its held-out evaluation when the kit has made it
  (`heldout`: HELDOUT_EPISODES episodes from evaluate.seed HELDOUT_SEED; else None), the command that evaluates it
  again).
  Returns the lines to print. Raises `plan.KitError`."""
  protocol, rows = plan.protocol, plan.seed_rows()
  found = results.best_policy(rows, protocol.primary_mode, plan.budget)
  if found is None:
    raise plans.KitError(f'no policy of {plan.root} is evaluated in {protocol.primary_mode} within '
                         f'{plan.budget:,} steps yet: nothing to export.')
  seed, row = found
  if 'imported_from' in row:
    raise plans.KitError(f'the best {protocol.primary_mode} policy within {plan.budget:,} steps is seed {seed}\'s at '
                         f'step {int(row["step"]):,} (success {float(row["success_rate"]):.2f}), evaluated elsewhere '
                         f'({row["imported_from"]}): its checkpoint is not under {plan.root}. Nothing was exported; '
                         'an export made where that seed ran stays the best one.')
  source = os.path.join(plan.specs[seed].train_dir, progress.POLICY_DIR, os.path.basename(row['checkpoint']))
  step = int(row['step'])
  same = {
      r['mode']: {
          'goal': r.get('goal'),
          'success_rate': r['success_rate'],
          'mean_final_distance': r['mean_final_distance'],
          'num_episodes': r['num_episodes']
      } for r in rows[seed] if int(r['step']) == step
  }
  heldout_rows = [
      r for r in plan.heldout_rows().get(seed, []) if int(r['step']) == step and r['mode'] == protocol.primary_mode
  ]
  again = ({
      'success_rate': heldout_rows[-1]['success_rate'],
      'mean_final_distance': heldout_rows[-1]['mean_final_distance'],
      'num_episodes': heldout_rows[-1]['num_episodes'],
      'eval_seed': heldout.HELDOUT_SEED
  } if heldout_rows else None)
  root = plans.REPO_ROOT
  configs = [os.path.relpath(p, root) if p.startswith(root + os.sep) else p for p in plan.manifest['config_files']]
  exported = os.path.join(out_dir, os.path.basename(source))
  command = (['python', 'run_eval.py'] + configs +
             ['--checkpoint_path', exported, '--eval_dir', f'runs/reevaluate_{plan.name}'] +
             [a for b in plan.manifest['bindings'] for a in ('--gin_param', b)] +
             ['--gin_param', f'evaluate.num_episodes_eval = {plan.manifest["eval_episodes"]}'])
  info = {
      'task': protocol.task,
      'config_files': configs,
      'bindings': plan.manifest['bindings'],
      'mode': protocol.primary_mode,
      'goal': protocol.goals.get(protocol.primary_mode),
      'budget': plan.budget,
      'seed': seed,
      'step': step,
      'success_rate': row['success_rate'],
      'mean_final_distance': row['mean_final_distance'],
      'num_episodes': row['num_episodes'],
      'heldout': again,
      'evaluations_at_this_step': same,
      'seeds_evaluated': sorted(s for s, r in rows.items() if r),
      'paper_table1': dataclasses.asdict(protocol.paper) if protocol.paper else None,
      'source': source,
      'exported_at': datetime.datetime.now().isoformat(timespec='seconds'),
      'reevaluate': shlex.join(command),
  }
  try:
    config = policy_config(plan.manifest['config_files'], plan.manifest['bindings'])
    export_checkpoint(source, out_dir, info, {POLICY_CONFIG: config})
  except (OSError, ValueError) as e:
    raise plans.KitError(str(e)) from None
  return [
      f'exported the best {protocol.primary_mode} policy within {plan.budget:,} steps: seed {seed}, step '
      f'{step:,}, success {row["success_rate"]:.2f} (mean final distance {row["mean_final_distance"]:.2f}, '
      f'{row["num_episodes"]} episodes) -> {exported}', f'evaluate it again: {shlex.join(command)}'
  ]
