"""scripts/mutation_check.py stays in step with the code it mutates: each mutation's text stands exactly once in its
file (a refactor that rewrites a guarded formula must update the mutation, or the check would report it 'broken')."""

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _mutation_check():
  spec = importlib.util.spec_from_file_location('mutation_check', REPO_ROOT / 'scripts' / 'mutation_check.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_every_mutation_text_stands_exactly_once_in_its_file():
  mutations = _mutation_check().MUTATIONS
  assert len(mutations) >= 30
  counts = {m.name: (REPO_ROOT / m.path).read_text().count(m.original) for m in mutations}
  assert all(n == 1 for n in counts.values()), {name: n for name, n in counts.items() if n != 1}
  for m in mutations:
    assert m.replacement != m.original and all((REPO_ROOT / t.split('::')[0]).exists() for t in m.tests), m.name
