"""The HIRO numbers that README.md and docs/results.md state are the committed aggregates' (docs/reproduction/*/
summary.json), rendered by the reproduction kit or recomputed here from the per-seed data, so the docs cannot drift from
the data."""

import json
import os

import numpy as np
import pytest

from reproduction import report
from reproduction import summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The aggregates behind docs/results.md's per-task tables (every seed, finished or running).
RESULTS_PAGE_AGGREGATES = ('ant_maze', 'ant_push/five_seeds', 'ant_fall/five_seeds')

# The aggregates behind the headline rows (README.md's Results table and docs/results.md's first table): the seeds
# that ran to the full budget.
HEADLINE_AGGREGATES = {'AntMaze': 'ant_maze', 'AntPush': 'ant_push/five_seeds', 'AntFall': 'ant_fall/five_seeds'}


def _read(*path):
  with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
    return f.read()


def _summary(aggregate):
  return json.loads(_read('docs', 'reproduction', aggregate, 'summary.json'))


def _row(text, start):
  """The one Markdown table row of `text` that starts with `start`."""
  rows = [line for line in text.splitlines() if line.startswith(start)]
  assert len(rows) == 1, f'expected one row starting {start!r}, found {len(rows)}'
  return rows[0]


@pytest.mark.parametrize('aggregate', RESULTS_PAGE_AGGREGATES)
def test_results_page_shows_the_committed_aggregates(aggregate):
  """docs/results.md carries each task's tables exactly as the kit renders them from the committed summary.json."""
  result, page = _summary(aggregate), _read('docs', 'results.md')
  for table in (report.views_table(result), report.seeds_table(result)):
    assert '\n'.join(table[2:]) in page, f'docs/results.md does not show {aggregate}/summary.json\'s table'


@pytest.mark.parametrize('task', sorted(HEADLINE_AGGREGATES))
def test_headline_rows_state_the_committed_table1_view(task):
  """README's and the results page's headline success of each task: the mean ± standard error over seeds of each
  seed's best evaluation within the budget, recomputed here with NumPy from the per-seed evaluations, with the seed
  count and budget; and the paper's number beside it."""
  result = _summary(HEADLINE_AGGREGATES[task])
  per_seed = result['modes'][result['primary_mode']]['per_seed']
  best = np.array(
      [max(row['success'] for row in rows if row['step'] <= result['budget']) for rows in per_seed.values()])
  ours = f'**{best.mean():.2f} ± {best.std(ddof=1) / np.sqrt(len(best)):.2f}**'
  budget, seeds = summary.steps_label(result['budget']), f'{len(best)} seeds'
  paper = result['paper']
  paper_text = f'{paper["success"]:.2f} ± {paper["standard_error"]:.2f}'
  readme_row = _row(_read('README.md'), f'| HIRO | {task}, success |')
  assert f'{ours} ({budget}, {seeds})' in readme_row
  assert f'{paper_text} ({summary.steps_label(paper["steps"])}, {paper["seeds"]} seeds)' in readme_row
  page_row = _row(_read('docs', 'results.md'), f'| HIRO | {task}, success at ')
  assert f'{ours} ({seeds}, ' in page_row and budget in page_row and paper_text in page_row


def test_readme_states_the_best_held_out_policies():
  """README's sentence on the held-out re-evaluation gives each task's best held-out success over its seeds."""
  scores = []
  for task in ('AntMaze', 'AntPush', 'AntFall'):
    held_out = _summary(HEADLINE_AGGREGATES[task])['heldout']['per_seed'].values()
    scores.append(f'{task} {max(s["best_heldout"] for s in held_out if s["best_heldout"] is not None):.2f}')
  readme = ' '.join(_read('README.md').split())
  assert f'the best policies score {", ".join(scores[:2])}, {scores[2]}; they ship with the package' in readme
