"""The import rules of docs/architecture.md, read from the source with `ast` (nothing is imported).

Every module of `uvf/` and `scalable_agent/` is parsed; every import in it counts, at any depth (inside functions,
classes, `try` and `if` blocks), with relative imports resolved against the module's package. The rules:
  * no import cycle among the modules of each package;
  * no module of either package imports the entry scripts (`launcher`, `run_train`, `run_eval`, `console`) or the
    other package.
The walker is checked itself on a small package written here (a cycle through a function-level relative import).
"""

import ast
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ('uvf', 'scalable_agent')
ENTRY_MODULES = ('launcher', 'run_train', 'run_eval', 'console')


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


def forbidden_imports(imports, package):
  """(module, imported name) pairs that break the rules: the entry scripts, or the other package."""
  banned = set(ENTRY_MODULES) | (set(PACKAGES) - {package})
  return sorted((module, name) for module, names in imports.items() for name in names
                if name.split('.')[0] in banned)


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
  (pkg / 'c.py').write_text('import os\n')
  graph, imports = import_graph(tmp_path, 'pkg')
  assert find_cycles(graph) == [] and forbidden_imports(imports, 'pkg') == []


@pytest.mark.parametrize('package', PACKAGES)
def test_no_import_cycle(package):
  graph, _ = import_graph(REPO_ROOT, package)
  assert len(graph) > 10, f'{package}: only {sorted(graph)} found'
  cycles = find_cycles(graph)
  details = ['; '.join(f'{m} imports {sorted(graph[m] & set(c))}' for m in c) for c in cycles]
  assert not cycles, f'import cycles in {package}/:\n' + '\n'.join(details)


@pytest.mark.parametrize('package', PACKAGES)
def test_no_import_of_the_entry_scripts_or_the_other_package(package):
  _, imports = import_graph(REPO_ROOT, package)
  bad = forbidden_imports(imports, package)
  assert not bad, f'{package}/ must not import {ENTRY_MODULES} or the other package: ' + ', '.join(
      f'{os.path.join(*m.split("."))}.py imports {n}' for m, n in bad)
