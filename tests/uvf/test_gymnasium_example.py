"""The trained-policy example of docs/hiro/gymnasium.md, run as written: it prints the output the page shows (the
same success; the final distance to within 1, as its last digits depend on the CPU's instruction set) and writes
its GIF."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(REPO, 'docs', 'hiro', 'gymnasium.md')


def example_and_output():
  text = open(PAGE, encoding='utf-8').read()
  section = text[text.index('## Watching a trained policy'):]
  code = re.search(r'```python\n(.*?)```', section, re.S).group(1)
  output = re.search(r'^Output: `(.*)`$', section, re.M).group(1)
  return code, output


@pytest.mark.slow
def test_the_documented_example_prints_its_documented_output(tmp_path):
  code, output = example_and_output()
  result = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=600, env={
      **os.environ, 'PYTHONPATH': REPO,
      'TF_CPP_MIN_LOG_LEVEL': '3'
  })
  assert result.returncode == 0, result.stderr[-3000:]
  pattern = r'final distance (\d+\.\d\d), success (True|False)'
  printed = re.fullmatch(pattern, result.stdout.strip().splitlines()[-1])
  documented = re.fullmatch(pattern, output)
  assert printed and documented, (result.stdout[-500:], output)
  assert printed.group(2) == documented.group(2) == 'True'
  assert abs(float(printed.group(1)) - float(documented.group(1))) < 1.0, (printed.group(0), output)
  assert float(printed.group(1)) < 5.0  # AntPush's success radius
  from PIL import Image  # pylint: disable=g-import-not-at-top
  with Image.open(tmp_path / 'antpush.gif') as gif:
    assert gif.n_frames == 100 and gif.size == (320, 320)
