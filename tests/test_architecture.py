"""The import rules of docs/design/architecture.md, read from the source with `ast` (nothing is imported).

Every module of the six packages is parsed; every import in it counts, at any depth (inside functions, classes,
`try` and `if` blocks), with relative imports resolved against the module's package. The rules:
  * no import cycle among the modules of each package;
  * each package imports only the project packages below it (`ALLOWED`): `rundir` and `figures` (the charts)
    nothing of the project; `uvf` and `scalable_agent` only `rundir` (never each other, nor `figures`); `launcher`
    the run-directory library and the two systems; the reproduction kit `rundir`, `figures`, `launcher` and `uvf`;
    nothing imports the entry scripts (`run_train`, `run_eval`) or `scripts/`;
  * no source file of the project (tests aside) is longer than `MAX_LINES`.
The walker is checked itself on a small package written here (a cycle through a function-level relative import).
"""

import ast
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# What each project package may import of the others (the layers, bottom up).
ALLOWED = {
    'rundir': set(),
    'figures': set(),
    'uvf': {'rundir'},
    'scalable_agent': {'rundir'},
    'launcher': {'rundir', 'uvf', 'scalable_agent'},
    'reproduction': {'rundir', 'figures', 'launcher', 'uvf'},
}
PACKAGES = tuple(ALLOWED)
ENTRY_MODULES = ('run_train', 'run_eval', 'scripts', 'benchmarks', 'console')  # `console` lives in `launcher` now
PROJECT_NAMES = set(PACKAGES) | set(ENTRY_MODULES)
MAX_LINES = 520  # "about 500": the longest file may not grow past this
MIN_MODULES = {'figures': 2}  # the modules each package has at least (5 unless named), so that a renamed one is seen


def module_files(root, package):
  """{dotted module name: path} of every .py file of `package` under `root` (`pkg/__init__.py` is `pkg`)."""
  modules = {}
  for path in sorted((Path(root) / package).rglob('*.py')):
    parts = list(path.relative_to(root).with_suffix('').parts)
    if parts[-1] == '__init__':
      parts = parts[:-1]
    modules['.'.join(parts)] = path
  return modules


def imported_names(module, path, is_package):
  """The dotted names imported anywhere in the file: `import a.b` gives 'a.b', `from a import b` gives 'a.b' and
  'a' (b may be a module or a name in a), relative imports resolved from `module`."""
  tree = ast.parse(Path(path).read_text(), filename=str(path))
  package = module.split('.') if is_package else module.split('.')[:-1]
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        base = package[:len(package) - (node.level - 1)]
        source = '.'.join(base + ([node.module] if node.module else []))
      else:
        source = node.module
      names.add(source)
      names.update(f'{source}.{alias.name}' for alias in node.names)
  return names


def import_graph(root, package):
  """{module: set of modules of the same package it imports}, and {module: every dotted name it imports}."""
  modules = module_files(root, package)
  graph, imports = {}, {}
  for module, path in modules.items():
    names = imported_names(module, path, path.name == '__init__.py')
    imports[module] = names
    # Importing a.b.c imports the packages a and a.b first: their __init__ modules count.
    targets = set()
    for name in names:
      parts = name.split('.')
      for i in range(1, len(parts) + 1):
        candidate = '.'.join(parts[:i])
        if candidate in modules and candidate != module:
          targets.add(candidate)
    # A module does not cycle with the packages above it (their __init__ runs first, by Python's rule).
    graph[module] = {t for t in targets if not module.startswith(t + '.')}
  return graph, imports


def find_cycles(graph):
  """The strongly connected components with more than one module (or a module importing itself), sorted."""
  index, low, stack, on_stack, result = {}, {}, [], set(), []
  counter = [0]

  def visit(node):
    index[node] = low[node] = counter[0]
    counter[0] += 1
    stack.append(node)
    on_stack.add(node)
    for other in sorted(graph.get(node, ())):
      if other not in index:
        visit(other)
        low[node] = min(low[node], low[other])
      elif other in on_stack:
        low[node] = min(low[node], index[other])
    if low[node] == index[node]:
      component = []
      while True:
        other = stack.pop()
        on_stack.discard(other)
        component.append(other)
        if other == node:
          break
      if len(component) > 1 or node in graph.get(node, ()):
        result.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return sorted(result)


def forbidden_imports(imports, package, allowed=None):
  """(module, imported name) pairs that break the rules: a project package or entry module that `package` may not
  import (`allowed`: the project names it may import; by default `ALLOWED[package]`)."""
  allowed = ALLOWED.get(package, set()) if allowed is None else allowed
  banned = PROJECT_NAMES - set(allowed) - {package}
  return sorted((module, name) for module, names in imports.items() for name in names if name.split('.')[0] in banned)


def test_the_walker_finds_a_cycle_through_a_function_level_relative_import(tmp_path):
  pkg = tmp_path / 'pkg'
  (pkg / 'sub').mkdir(parents=True)
  (pkg / '__init__.py').write_text('')
  (pkg / 'sub' / '__init__.py').write_text('')
  (pkg / 'a.py').write_text('from pkg.sub import b\n')
  (pkg / 'sub' / 'b.py').write_text('def f():\n  if True:\n    from .. import c\n')
  (pkg / 'c.py').write_text('import os\nclass C:\n  def g(self):\n    import pkg.a\n    import launcher\n')
  (pkg / 'd.py').write_text('from . import a\n')  # imports into the cycle, is not part of it
  graph, imports = import_graph(tmp_path, 'pkg')
  assert graph['pkg.a'] == {'pkg.sub', 'pkg.sub.b'}
  assert graph['pkg.sub.b'] == {'pkg.c'}
  assert find_cycles(graph) == [['pkg.a', 'pkg.c', 'pkg.sub.b']]
  assert forbidden_imports(imports, 'pkg') == [('pkg.c', 'launcher')]
  assert forbidden_imports(imports, 'pkg', allowed={'launcher'}) == []  # a package allowed to import it
  (pkg / 'c.py').write_text('import os\n')
  graph, imports = import_graph(tmp_path, 'pkg')
  assert find_cycles(graph) == [] and forbidden_imports(imports, 'pkg') == []


@pytest.mark.parametrize('package', PACKAGES)
def test_no_import_cycle(package):
  graph, _ = import_graph(REPO_ROOT, package)
  assert len(graph) >= MIN_MODULES.get(package, 5), f'{package}: only {sorted(graph)} found'
  cycles = find_cycles(graph)
  details = ['; '.join(f'{m} imports {sorted(graph[m] & set(c))}' for m in c) for c in cycles]
  assert not cycles, f'import cycles in {package}/:\n' + '\n'.join(details)


@pytest.mark.parametrize('package', PACKAGES)
def test_each_package_imports_only_the_layers_below_it(package):
  _, imports = import_graph(REPO_ROOT, package)
  bad = forbidden_imports(imports, package)
  assert not bad, f'{package}/ may import only {sorted(ALLOWED[package]) or "nothing of the project"}: ' + ', '.join(
      f'{os.path.join(*m.split("."))}.py imports {n}' for m, n in bad)


def test_the_layers_have_no_cycle():
  """The allowed imports between packages form a hierarchy: no package may import one that may import it."""
  order = []
  remaining = dict(ALLOWED)
  while remaining:
    ready = sorted(p for p, below in remaining.items() if below <= set(order))
    assert ready, f'the layers cycle among {sorted(remaining)}'
    order += ready
    for p in ready:
      del remaining[p]
  assert set(order[:2]) == {'figures', 'rundir'} and order[-1] == 'reproduction'


def test_no_source_file_is_longer_than_the_limit():
  files = [p for name in PACKAGES + ('scripts', 'benchmarks') for p in (REPO_ROOT / name).rglob('*.py')]
  files += [REPO_ROOT / 'run_train.py', REPO_ROOT / 'run_eval.py']
  assert len(files) > 60
  long = sorted((len(p.read_text().splitlines()), str(p.relative_to(REPO_ROOT)))
                for p in files
                if len(p.read_text().splitlines()) > MAX_LINES)
  assert not long, f'files over {MAX_LINES} lines (split them by job): {long}'
