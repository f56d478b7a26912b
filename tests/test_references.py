"""Citations that resolve: no file points at reference notes outside this repository, and every repository path
mentioned in a comment, a docstring or a Markdown file exists.

(1) No tracked source or doc file names the specification notes that lived outside the repository (`hiro.md`,
    `impala.md`, `peers.md`, `anchors.md`, `style.md`, `stack.md`, anything under `shared/reference` or `../shared`): a reader cannot follow
    them. Cite the paper (e.g. "Nachum et al. 2018, Section 3.3", "Espeholt et al. 2018, Section 4.1, Eq. 1") or the
    original file by repository and path (e.g. "deepmind/scalable_agent experiment.py L312-415") instead.
(2) Every token that looks like a path into this repository (it starts with one of its top-level folders and ends in
    a known extension or `/`) names an existing file or folder; a Markdown link `[text](relative/path)` resolves
    relative to its Markdown file. Placeholders (`configs/<task>.gin`, `docs/NAME.csv`) and files of another
    repository named just before the path (`deepmind/lab docs/users/python_api.md`) are not checked.

The code (`*.py`, `*.gin`, `*.sh`, `*.txt`, `.ci/*`) and the docs (`*.md`, `docs/**/*.json`) are checked by separate
test functions, `test_code_*` and `test_docs_*`.
"""

import ast
import io
import os
import pathlib
import re
import subprocess
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
THIS_FILE = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()

# (1) Names of the notes outside the repository. A mention is allowed only if it is the path of a file that exists
# here (relative to the repository root or to the mentioning file), e.g. a future `docs/impala.md`.
_EXTERNAL_NAME = re.compile(r'(?<![\w\-])(?:hiro|impala|peers|anchors|style|stack)\.md\b')
_EXTERNAL_DIR = re.compile(r'(?:\.\./)?shared/reference|\.\./shared\b')

# (2) Repository paths: a top-level folder of this repository, then path characters. `<`, `>`, `{`, `}`, `*`, `$`,
# `[` and `]` are matched too so that placeholders and globs (`configs/<task>.gin`, `docs/*.json`) can be recognised
# and skipped instead of being cut short. The look-behind keeps out the tail of a longer path or URL
# (`research/efficient-hrl/configs/base_uvf.gin`, `github.com/deepmind/scalable_agent/...`, `../uvf/train.py`).
TOP_LEVEL = ('uvf', 'scalable_agent', 'rundir', 'launcher', 'reproduction', 'scripts', 'benchmarks', 'configs', 'docs',
             'tests')
EXTENSIONS = ('.py', '.md', '.gin', '.png', '.csv', '.json', '.sh', '.txt')
_PATH = re.compile(r'(?<![\w./\-])((?:%s)/[\w./\-<>{}*$\[\]]*)' % '|'.join(TOP_LEVEL))
# Placeholders: `<task>`, `{a,b}`, globs, `$VAR`, and upper-case words such as `docs/results/NAME.csv`, `GAME` in
# `docs/results/impala_atari_GAME_curve.csv` (README, LICENSE and the like are names, not placeholders).
_PLACEHOLDER = re.compile(r'[<>{}*$\[\]]|(?:^|[/_.\-])(?!README|LICENSE|CHANGELOG|CONTRIBUTING)[A-Z][A-Z0-9]{2,}'
                          r'(?=[/_.\-]|$)')
# A path right after the name of another repository is a file of that repository: `deepmind/lab docs/x.md`,
# `tensorflow/models research/...`, efficient-hrl `scripts/local_train.py` (the original HIRO code's own shorthand).
_OTHER_REPOSITORY = re.compile(r'(?:(?<![\w./\-])(?!(?:%s)/)[\w.\-]+/[\w.\-]+|efficient-hrl(?:\'s)?)\s[`\'"]?$' %
                               '|'.join(TOP_LEVEL))
# Where a relative path may resolve besides the repository root and the mentioning file's folder: the config search
# roots of launcher/gin_config.py (`CONFIG_SEARCH_ROOTS`), so `configs/base_uvf.gin` (the original's
# `--config_file` argument) and `uvf/configs/base_uvf.gin` (a gin `include`) name configs/uvf/configs/base_uvf.gin.
SEARCH_ROOTS = ('configs', 'configs/uvf')
_TRAILING = '.,;:!?)\'"`'
# Markdown links and images: [text](target) or [text](target "title").
_MD_LINK = re.compile(r'!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')

# ---------------------------------------------------------------------------------------------------------------------
# Files.


def repository_files():
  """Repository-relative POSIX paths of the files of the working tree that git tracks or would track (not ignored),
  without `.venv`; without git, every file below the root but `.git` and `.venv`."""
  try:
    out = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode('utf-8')
    names = [n for n in out.split('\0') if n]
  except (OSError, subprocess.CalledProcessError):
    names = []
    for directory, subdirs, files in os.walk(ROOT):
      subdirs[:] = [d for d in subdirs if d not in ('.git', '.venv', '__pycache__')]
      names += [pathlib.Path(directory, f).relative_to(ROOT).as_posix() for f in files]
  return sorted({n for n in names if not n.startswith('.venv/') and (ROOT / n).is_file()})


def is_doc(name):
  return name.endswith('.md') or (name.startswith('docs/') and name.endswith('.json'))


def is_code(name):
  return name.endswith(('.py', '.gin', '.sh', '.txt')) or name.startswith('.ci/')


def code_files():
  return [n for n in repository_files() if is_code(n) and not is_doc(n) and n != THIS_FILE]


def doc_files():
  return [n for n in repository_files() if is_doc(n) and n != THIS_FILE]


def read(name):
  return (ROOT / name).read_text(encoding='utf-8', errors='replace')


# ---------------------------------------------------------------------------------------------------------------------
# What is checked of each file.


def python_comments_and_docstrings(text):
  """[(line, text)] of the comments and the module / class / function docstrings of Python source `text`."""
  parts = []
  try:
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
      if token.type == tokenize.COMMENT:
        parts.append((token.start[0], token.string))
  except (tokenize.TokenError, IndentationError, SyntaxError):
    pass
  try:
    tree = ast.parse(text)
  except SyntaxError:
    return parts
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
      first = node.body[0]
      if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        parts.append((first.lineno, first.value.value))
  return parts


def hash_comments(text):
  """[(line, text after '#')] of a gin, shell, requirements or CI file."""
  return [(i, line[line.index('#'):]) for i, line in enumerate(text.splitlines(), 1) if '#' in line]


def prose(name, text):
  """[(line, text)] of the parts of a file whose paths must exist: comments and docstrings of code, all of Markdown."""
  if name.endswith('.py'):
    return python_comments_and_docstrings(text)
  if name.endswith('.md'):
    return list(enumerate(text.splitlines(), 1))
  return hash_comments(text)


# ---------------------------------------------------------------------------------------------------------------------
# Checkers (also used on crafted input by test_checkers_catch_dangling_references).


def _exists(path, base_dir, root):
  """Whether `path` names a file or folder relative to the repository root or to `base_dir` (both in `root`)."""
  for candidate in [root / path, root / base_dir / path] + [root / r / path for r in SEARCH_ROOTS]:
    try:
      if candidate.exists():
        return True
    except OSError:
      pass
  return False


def external_citations(name, text, root=ROOT):
  """[(line, mention)] of the mentions in `text` (the content of repository file `name`) of the notes outside the
  repository. A `*.md` name that is the path of an existing file of the repository is not one."""
  base_dir = pathlib.PurePosixPath(name).parent
  found = []
  for number, line in enumerate(text.splitlines(), 1):
    for match in _EXTERNAL_DIR.finditer(line):
      found.append((number, match.group(0)))
    for match in _EXTERNAL_NAME.finditer(line):
      start = match.start()
      while start > 0 and (line[start - 1].isalnum() or line[start - 1] in '_./-'):
        start -= 1
      path = line[start:match.end()]
      if _exists(path, base_dir, root):
        continue
      found.append((number, path))
  return found


def path_tokens(text):
  """The repository paths `text` mentions, without trailing punctuation, placeholders and globs, and only those that
  end in a known extension or `/` (`uvf/train.py:train_uvf` gives `uvf/train.py`; `tests/x.py::test` `tests/x.py`)."""
  tokens = []
  for match in _PATH.finditer(text):
    token = match.group(1)
    if _PLACEHOLDER.search(token) or _OTHER_REPOSITORY.search(text[:match.start()]):
      continue
    token = token.rstrip(_TRAILING)
    while token.endswith('..') or token.endswith('/.'):
      token = token[:-1]
    if token.endswith(EXTENSIONS) or token.endswith('/'):
      tokens.append(token)
  return tokens


def markdown_link_targets(text):
  """The relative targets of the Markdown links of `text`, without `#fragment` (no URLs, mail or in-page links)."""
  targets = []
  for match in _MD_LINK.finditer(text):
    target = match.group(1)
    if re.match(r'^[a-zA-Z][\w+.-]*:', target) or target.startswith('#'):
      continue
    target = target.split('#', 1)[0].split('?', 1)[0]
    if target:
      targets.append(target)
  return targets


def dangling_paths(name, text, root=ROOT):
  """[(line, path)] of the repository paths mentioned in the prose of file `name` (content `text`) that do not exist,
  and, for Markdown, the links that do not resolve relative to the file."""
  base_dir = pathlib.PurePosixPath(name).parent
  found = []
  for number, part in prose(name, text):
    for offset, line in enumerate(part.splitlines() or [part]):
      for token in path_tokens(line):
        if not _exists(token, base_dir, root):
          found.append((number + offset, token))
      if name.endswith('.md'):
        for target in markdown_link_targets(line):
          resolved = root / base_dir / target if not target.startswith('/') else root / target.lstrip('/')
          if not resolved.exists():
            found.append((number + offset, f'[link] {target}'))
  return found


def _report(problems):
  return '\n'.join(f'  {name}:{line}: {what}' for name, line, what in problems)


def _collect(names, check):
  return [(name, line, what) for name in names for line, what in check(name, read(name))]


# ---------------------------------------------------------------------------------------------------------------------
# Tests.


def test_code_cites_no_reference_notes_outside_the_repository():
  problems = _collect(code_files(), external_citations)
  assert not problems, ('Citations of notes outside the repository (cite the paper or the original file by '
                        'repository and path instead):\n' + _report(problems))


def test_code_comments_and_docstrings_name_existing_repository_paths():
  problems = _collect(code_files(), dangling_paths)
  assert not problems, 'Repository paths in comments / docstrings that do not exist:\n' + _report(problems)


def test_docs_cite_no_reference_notes_outside_the_repository():
  problems = _collect(doc_files(), external_citations)
  assert not problems, ('Citations of notes outside the repository in the docs (cite the paper or the original '
                        'file by repository and path instead):\n' + _report(problems))


def test_docs_name_existing_repository_paths_and_links_resolve():
  problems = _collect(doc_files(), dangling_paths)
  assert not problems, 'Repository paths and Markdown links in the docs that do not exist:\n' + _report(problems)


def test_checkers_catch_dangling_references(tmp_path):
  """The checkers flag what they should, on crafted files in a scratch repository, and pass what they should."""
  (tmp_path / 'uvf').mkdir()
  (tmp_path / 'uvf' / 'train.py').write_text('')
  (tmp_path / 'docs' / 'hiro').mkdir(parents=True)
  (tmp_path / 'docs' / 'hiro' / 'training.md').write_text('')
  (tmp_path / 'docs' / 'impala.md').write_text('')

  code = ('"""Training (hiro.md section 3.3; ../shared/reference/impala.md 13.3).\n\n'
          'See uvf/train.py:train_uvf, `uvf/train.py`, uvf/, docs/hiro/training.md. and tests/missing.py::test_x.\n'
          'Not paths: configs/<task>.gin, docs/*.json, research/efficient-hrl/configs/base_uvf.gin, uvf/agents.\n'
          '"""\n\n'
          'x = "docs/not_checked_outside_comments.md"  # but uvf/gone.py is\n')
  assert external_citations('uvf/a.py', code, tmp_path) == [(1, '../shared/reference'), (1, 'hiro.md'),
                                                            (1, '../shared/reference/impala.md')]
  assert sorted(dangling_paths('uvf/a.py', code, tmp_path)) == [(3, 'tests/missing.py'), (7, 'uvf/gone.py')]

  gin = '# Atari (anchors.md; docs/atari.md)\nexperiment.unroll_length = 20  # configs/nothing.gin\n'
  assert external_citations('configs/x.gin', gin, tmp_path) == [(1, 'anchors.md')]
  assert dangling_paths('configs/x.gin', gin, tmp_path) == [(1, 'docs/atari.md'), (2, 'configs/nothing.gin')]

  markdown = ('# Training\n\n'
              'As in [training](hiro/training.md), [missing](hiro/evaluation.md#goals) and [web](https://x.org/a.md).\n'
              'Files: docs/hiro/training.md, docs/impala.md and scripts/gone.sh; [root](../uvf/train.py).\n'
              'A path docs/impala.md exists here, a bare peers.md does not.\n')
  assert external_citations('docs/index.md', markdown, tmp_path) == [(5, 'peers.md')]
  assert dangling_paths('docs/index.md', markdown, tmp_path) == [(3, '[link] hiro/evaluation.md'),
                                                                 (4, 'scripts/gone.sh')]

  # Other repositories' files, placeholders and the config search roots are not dangling; a near miss is.
  (tmp_path / 'configs' / 'uvf' / 'configs').mkdir(parents=True)
  (tmp_path / 'configs' / 'uvf' / 'configs' / 'base_uvf.gin').write_text('')
  others = (
      '# deepmind/lab docs/users/python_api.md; efficient-hrl `scripts/local_train.py`; docs/results/NAME.csv;\n'
      '# docs/results/impala_atari_GAME_curve.csv; configs/base_uvf.gin; uvf/configs/base_uvf.gin; docs/README.md;\n'
      '# uvf/train.py docs/gone.md; configs/base_uvf.gin.bak.gin\n')
  assert dangling_paths('configs/y.gin', others, tmp_path) == [(2, 'docs/README.md'), (3, 'docs/gone.md'),
                                                               (3, 'configs/base_uvf.gin.bak.gin')]

  # And the real checkers on a dangling file in a scratch copy of a repository layout.
  (tmp_path / 'scripts').mkdir()
  (tmp_path / 'scripts' / 'run.sh').write_text('# runs scripts/absent.py (stack.md)\n')
  text = (tmp_path / 'scripts' / 'run.sh').read_text()
  assert dangling_paths('scripts/run.sh', text, tmp_path) == [(1, 'scripts/absent.py')]
  assert external_citations('scripts/run.sh', text, tmp_path) == [(1, 'stack.md')]
