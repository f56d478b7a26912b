"""figures.curves: the charts' PNG (valid, deterministic bytes, no timestamp), what it reports it drew (also stored in
the PNG), the step labels and round ticks, and matplotlib's global state left alone (no pyplot, same backend and
rcParams)."""

import os
import subprocess
import sys

import numpy as np
from PIL import Image
import pytest

from figures import curves

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('value, label', [(0, '0'), (700, '700'), (50_000, '50k'), (500_000, '500k'), (1_000_000, '1M'),
                                          (2_500_000, '2.5M'), (41_144_320, '41.14M'), (1.2e9, '1.2B'), (-20, '-20')])
def test_steps_label(value, label):
  assert curves.steps_label(value) == label


def _panels():
  steps = np.arange(1, 61) * 50_000  # 50k to 3M
  seed = np.clip((steps - 1e6) / 1.5e6, 0, 1)
  mean, se = seed * 0.9, np.full(60, 0.05)
  return [
      curves.Panel('success rate, eval2', 'success rate', [
          curves.Series(steps,
                        list(seed[:-1]) + [None], 'seed 0', color='tab:orange', marker='o'),
          curves.Series(steps, mean, 'mean ± s.e.', color=curves.MEAN, linewidth=2.5, band=(mean - se, mean + se)),
          curves.Series([3_000_000], [0.86], 'held out', colors=['tab:orange'], marker='D', linewidth=0,
                        edgecolor='black')
      ], hlines=[(0.92, 'paper: 0.92 ± 0.04 at 10M')], ylim=(-0.03, 1.03)),
      curves.Panel('final distance', 'maze units', [curves.Series(steps, 20 - 15 * seed, 'mean', yerr=se)],
                   hlines=[curves.HLine(5, 'success: distance < 5', curves.THRESHOLD)])
  ]


def test_draw_writes_a_deterministic_png_and_reports_what_it_drew(tmp_path):
  first, second = str(tmp_path / 'a.png'), str(tmp_path / 'b.png')
  drawn = curves.draw(first, _panels(), 'AntPush: 1 seed, 3M steps; paper 0.92 ± 0.04 at 10M (Table 1)',
                      'environment steps', notes=['one note ' * 40], width=800, panel_height=200)
  assert curves.draw(second, _panels(), 'AntPush: 1 seed, 3M steps; paper 0.92 ± 0.04 at 10M (Table 1)',
                     'environment steps', notes=['one note ' * 40], width=800, panel_height=200) == drawn
  with open(first, 'rb') as f, open(second, 'rb') as g:
    data = f.read()
    assert data == g.read()  # the same bytes: no timestamp, no software version
  assert b'tIME' not in data and b'Software' not in data and b'matplotlib' not in data
  with Image.open(first) as image:
    image.load()
    assert image.format == 'PNG' and list(image.size) == drawn['size']
  assert drawn['size'][0] == 800 and not os.path.exists(first + '.tmp.png')
  assert curves.read_png(first) == {'size': drawn['size'], 'description': drawn}
  assert len(drawn['notes']) == 1  # one note, wrapped on the chart
  success, distance = drawn['panels']
  assert [(s['label'], s['points']) for s in success['series']] == [('seed 0', 59), ('mean ± s.e.', 60),
                                                                    ('held out', 1)]
  assert success['series'][1]['x'] == [50_000, 3_000_000] and success['series'][1]['y'] == [0, pytest.approx(0.9)]
  assert success['hlines'] == [{'value': 0.92, 'label': 'paper: 0.92 ± 0.04 at 10M'}]
  assert success['legend'] == ['seed 0', 'mean ± s.e.', 'held out', 'paper: 0.92 ± 0.04 at 10M']
  assert success['ylim'] == [-0.03, 1.03] and success['yticks'] == [0, 0.2, 0.4, 0.6, 0.8, 1]
  assert distance['hlines'] == [{'value': 5, 'label': 'success: distance < 5'}]
  assert distance['ylim'][0] <= 5 and distance['ylim'][1] >= 20  # fitted to the data, the error bars and the line
  # Round ticks, labelled as steps are read; x from 0 to the last step + 1%.
  assert drawn['xlim'] == [0, pytest.approx(3_030_000)]
  assert drawn['xticks'] == ['0', '500k', '1M', '1.5M', '2M', '2.5M', '3M']


def test_read_png_of_other_files(tmp_path):
  Image.new('RGB', (3, 2)).save(tmp_path / 'plain.png')
  assert curves.read_png(str(tmp_path / 'plain.png')) == {'size': [3, 2], 'description': None}
  (tmp_path / 'text.png').write_text('not a PNG')
  with pytest.raises(ValueError, match='is not a PNG file'):
    curves.read_png(str(tmp_path / 'text.png'))


def test_a_series_of_mismatched_lengths_is_refused(tmp_path):
  with pytest.raises(ValueError, match="series 'bad': 3 x values, 2 y values"):
    curves.draw(str(tmp_path / 'x.png'), [curves.Panel('', 'y', [curves.Series([1, 2, 3], [1, 2], 'bad')])], 't', 'x')
  assert os.listdir(tmp_path) == []


def test_matplotlib_global_state_is_left_alone(tmp_path):
  """No pyplot (no display needed), and the rcParams (the backend among them) as they were, in a fresh
  interpreter."""
  # dict.items: the stored values (reading rcParams['backend'] would resolve the backend, importing pyplot).
  script = ('import sys, matplotlib\n'
            'params = dict(dict.items(matplotlib.rcParams))\n'
            'from figures import curves\n'
            f'curves.draw({str(tmp_path / "x.png")!r}, [curves.Panel("t", "y", [curves.Series([0, 1], [0, 1], "s")])],'
            ' "title", "x")\n'
            'assert "matplotlib.pyplot" not in sys.modules\n'
            'assert dict(dict.items(matplotlib.rcParams)) == params\n'
            'print("ok")\n')
  result = subprocess.run([sys.executable, '-c', script], cwd=REPO, capture_output=True, text=True, timeout=120, env={
      **os.environ, 'DISPLAY': '',
      'MPLBACKEND': ''
  })
  assert result.returncode == 0 and result.stdout == 'ok\n', result.stderr
