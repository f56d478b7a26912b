r"""Writes `<bundle>/config.gin` for trained HIRO policy bundles: the complete gin configuration of the policy.

A policy bundle (docs/reproduction/<task>/best_policy/, written by the reproduction kit's --export_best) holds a policy
checkpoint and `best_policy.json`, which names the config files and gin bindings the policy was trained and evaluated
with (e.g. configs/ant_push.gin). This script parses them exactly as run_eval.py does (`launcher.parse_gin`) and writes
`gin.config_str()`, flattened (no includes) under a header comment, as `<bundle>/config.gin`, after checking that the
text parsed alone gives the same configuration. `uvf.pretrained.load_policy` reads it, so that an installed package
loads the policy without the repository's configs/ tree.

Usage:
  python scripts/export_policy_config.py docs/reproduction/ant_push/best_policy [BUNDLE ...]
  python scripts/export_policy_config.py --check docs/reproduction/*/best_policy   # exit 1 if one is missing / stale

Exit status 0; 1 with --check when a config.gin is missing or differs from what would be written; 2 with one line
`error: ...` on stderr for a bad bundle or configuration.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reproduction import export  # pylint: disable=g-import-not-at-top,wrong-import-position


def bundle_config(bundle):
  """The config.gin text of the bundle directory `bundle` (from its best_policy.json). Raises ValueError."""
  info_path = os.path.join(bundle, export.EXPORT_INFO)
  if not os.path.isfile(info_path):
    raise ValueError(f'{bundle} is not a policy bundle: it has no {export.EXPORT_INFO}.')
  with open(info_path, encoding='utf-8') as f:
    info = json.load(f)
  if not info.get('config_files'):
    raise ValueError(f'{info_path} names no config_files.')
  return export.policy_config(info['config_files'], info.get('bindings') or [])


def main(argv=None):
  parser = argparse.ArgumentParser(
      prog='python scripts/export_policy_config.py', description=__doc__.split('\n')[0],
      epilog='Example: python scripts/export_policy_config.py '
      'docs/reproduction/ant_push/best_policy')
  parser.add_argument('bundles', nargs='+', metavar='BUNDLE',
                      help='a policy bundle directory (holding best_policy.json and the checkpoint)')
  parser.add_argument('--check', action='store_true',
                      help='write nothing; exit 1 if a config.gin is missing or differs from what would be written')
  args = parser.parse_args(argv)
  stale = []
  for bundle in args.bundles:
    try:
      text = bundle_config(bundle)
    except (ValueError, OSError) as e:
      print(f'error: {e}', file=sys.stderr)
      return 2
    path = os.path.join(bundle, export.POLICY_CONFIG)
    old = open(path, encoding='utf-8').read() if os.path.isfile(path) else None
    if args.check:
      state = 'up to date' if old == text else ('missing' if old is None else 'stale')
      if old != text:
        stale.append(path)
      print(f'{path}: {state}')
    elif old == text:
      print(f'{path}: up to date')
    else:
      with open(path, 'w', encoding='utf-8') as f:
        f.write(text)
      print(f'wrote {path} ({len(text.splitlines())} lines)')
  return 1 if stale else 0


if __name__ == '__main__':
  sys.exit(main())
