"""Every shell command in README.md, CONTRIBUTING.md and docs/**/*.md is checked: a few run for real with tiny settings.

Extraction (`fenced_blocks`, `commands_in_markdown`). The fenced code blocks of those files:

- ```bash / ```sh / ```shell / ```zsh / ```console blocks hold commands; so does a block without a language when any
  of its lines starts with a known program (the first words of the table below); other bare blocks are output
  (tables, trees, logs) and ```python / ```text / ... blocks are not shell;
- the `$ ` convention: where a block has lines starting with `$ `, only those (and their continuations) are commands,
  the other lines are their output;
- `\\` continuations are joined; `# comments` are dropped (shell quoting respected: shlex); `&&`, `||`, `;`, `&`
  and `|` separate commands; a redirection (`> FILE`) is dropped with its target;
- `for VAR in A B ...; do BODY; done` runs BODY once per value (`$VAR` substituted); other shell variables are
  placeholders with a documented value (`PLACEHOLDERS`: `$i` of the actor command is actor 0); an unknown one fails;
- wrappers `taskset -c N`, `nice [-n N]` and `VAR=value` prefixes are dropped.

Each command is one test, its id `<file>:<line>` (the line where the command starts; `[k]` numbers several commands
on one line, `[VAR=value]` a loop's body). Classification (`classify`) and check (`check_command`):

| kind         | commands                                            | check                                           |
|--------------|-----------------------------------------------------|-------------------------------------------------|
| launcher     | `python run_train.py ...`, `python run_eval.py ...` | the command's flags parsed by the scripts'      |
|              |                                                     | flag definitions and `launcher.plan` (configs,  |
|              |                                                     | bindings, system, pre-flight, run directory; it |
|              |                                                     | writes nothing) in an empty working directory   |
|              |                                                     | (relative run directories land there, absolute  |
|              |                                                     | ones are moved under it); a fake                |
|              |                                                     | `deepmind_lab` module where it is not installed |
|              |                                                     | (DMLab commands say they need it). `REAL_RUNS`  |
|              |                                                     | run for real, tiny (below)                      |
| reproduce    | `python scripts/reproduce.py ...`                   | the kit's parser accepts the command; then      |
|              |                                                     | `reproduction.cli.main` in an empty working     |
|              |                                                     | directory (`--root` lands there, an absolute    |
|              |                                                     | one is moved under it): `--status`              |
|              |                                                     | as written (it writes nothing), otherwise with  |
|              |                                                     | `--dry_run` in place of the action (`--export_  |
|              |                                                     | best DIR`, `--aggregate`, `--stop`, none: start |
|              |                                                     | the seeds); exit status 0                       |
| script       | `python scripts/*.py`, `python benchmarks/*.py`     | the file exists; `--help` exits 0; every        |
|              |                                                     | `--flag` of the command is in the help; a       |
|              |                                                     | positional with choices (`{start,stop}`) is one |
| bash script  | `bash <repository file>.sh ...`                     | the file exists; `bash -n` (syntax) passes      |
| pytest       | `python -m pytest PATHS ...`                        | the paths exist (the suite is not run from      |
|              |                                                     | inside itself)                                  |
| external     | `pip ...` (any `.../pip`), `python3.X -m venv`,     | not run: only the repository files they name    |
|              | `python -m pip`, `. FILE` / `source FILE`, `cd`,    | exist (`requirements*.txt`, ...)                |
|              | `sed`, `tensorboard`, `git`, `bazel`, `apt-get`,    |                                                 |
|              | `nvidia-smi`, `wait`, `ruff`, `yapf`, `mypy`,       |                                                 |
|              | `pre-commit`                                        |                                                 |
| outside      | a command after a `cd` out of the repository in     | nothing (e.g. DeepMind Lab's own build script)  |
|              | the same block                                      |                                                 |

Every command, whatever its kind, also passes the path check: an argument (or `--flag=value`) whose first component
is a top-level entry of the repository (`configs/`, `docs/`, `scripts/`, `requirements.txt`, ...) names a file or
directory that exists (a checkpoint prefix: its `.index`; a glob: a match). A launcher's config arguments are left to
the launcher, which resolves the original `--config_file=configs/base_uvf.gin` under `configs/uvf/`.

A command of no kind above fails its test with its file and line: a new kind of command in the docs must be given a
kind here.

Run for real (`REAL_RUNS`, the README's), each in a subprocess of the real script from an empty working directory
(so the default `runs/...` directories land there, as the README's order of commands expects):

- `python run_train.py configs/ant_maze.gin`: HIRO, 150 steps (50-step episodes, the tiny bindings of
  tests/test_reliability.py), a policy checkpoint at step 100;
- `python run_eval.py configs/ant_maze.gin`: evaluates that checkpoint (1 episode of 10 steps per goal, no waiting:
  the bindings of scripts/behaviour_check.py), results.json written;
- `python run_train.py configs/impala_atari.gin`: IMPALA on Pong, 200 environment frames, 2 actors, batches of 2
  unrolls of 5.
"""

import contextlib
import dataclasses
import functools
import glob
import importlib.util
import io
import os
from pathlib import Path
import re
import shlex
import subprocess
import sys
import types
from typing import List, Tuple

from absl import flags
import pytest

import launcher

REPO = launcher.REPO_ROOT
SHELL_LANGUAGES = ('bash', 'sh', 'shell', 'zsh', 'console', 'shell-session')
# Shell variables the docs use as placeholders, and the value their commands are checked with.
PLACEHOLDERS = {'i': '0'}  # docs/impala/distributed.md: the actor command, "for i = 0 .. num_actors - 1"
EXTERNAL = ('pip', 'pip3', 'tensorboard', 'git', 'bazel', 'apt-get', 'apt', 'nvidia-smi', 'sed', '.', 'source', 'cd',
            'wait', 'ruff', 'yapf', 'mypy', 'pre-commit', 'ray')
# The first words that make a block without a language a block of commands (see the module docstring).
PROGRAMS = EXTERNAL + ('bash', 'sh', 'taskset', 'nice', 'for')
PYTHON = re.compile(r'^python(\d+(\.\d+)?)?$')
OPERATORS = (';', '&&', '||', '&', '|')
KINDS = ('launcher', 'reproduce', 'script', 'bash script', 'pytest', 'external', 'outside')
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')

# Tiny settings of the real runs. HIRO: tests/test_reliability.py's 50-step episodes and small buffers (n episodes:
# n * 50 + 100 steps); evaluation: scripts/behaviour_check.py's EVAL_BINDINGS, and 10-step episodes.
HIRO_TINY = [
    a for b in [
        'every_n_steps.n = 50', 'every_n_episodes.steps_per_episode = 50', 'train_uvf.max_steps_per_episode = 50',
        'train_uvf.initial_episodes = 1', 'train_uvf.batch_size = 16', 'agent/CircularBuffer.buffer_size = 1000',
        'meta/CircularBuffer.buffer_size = 200', 'train_uvf.seed = 0', 'train_uvf.log_every_n_steps = 50',
        'train_uvf.save_policy_every_n_steps = 100', 'train_uvf.steps_per_call = 50', 'train_uvf.num_episodes_train = 1'
    ] for a in ('--gin_param', b)
]
HIRO_EVAL_TINY = [
    a for b in [
        'evaluate.num_episodes_eval = 1', 'evaluate.checkpoint_timeout = 0', 'evaluate.num_threads = 1',
        'evaluate.max_steps_per_episode = 10'
    ] for a in ('--gin_param', b)
]
IMPALA_TINY = ['--num_actors=2', '--batch_size=2', '--unroll_length=5', '--total_environment_frames=200']
# (doc file, command as written, comments dropped) -> the fixture that runs it.
REAL_RUNS = {
    ('README.md', 'python run_train.py configs/ant_maze.gin'): 'hiro_train',
    ('README.md', 'python run_eval.py configs/ant_maze.gin'): 'hiro_eval',
    ('README.md', 'python run_train.py configs/impala_atari.gin'): 'impala_train',
}


class DocCommandError(Exception):
  """A documented command that does not work as written."""


@dataclasses.dataclass
class Command:
  path: str  # the Markdown file, relative to the repository
  line: int  # where the command starts
  text: str  # the command's line(s) as written, continuations joined
  argv: List[str]  # the simple command's words: wrappers dropped, variables substituted
  kind: str = ''  # one of KINDS, or '' (none: the test fails)
  problem: str = ''  # why it has no kind
  tag: str = ''  # '[k]' or '[VAR=value]' where one line gives several commands

  @property
  def where(self):
    return f'{self.path}:{self.line}'

  @property
  def id(self):
    return self.where + self.tag

  @property
  def key(self):
    return (self.path, shlex.join(self.argv))


# --------------------------------------------------------------------------------------------------------------------
# Extraction.

_FENCE = re.compile(r'^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)')


def fenced_blocks(text: str) -> List[Tuple[str, int, List[str]]]:
  """(language, line number of the block's first line, its lines, dedented) of each fenced block."""
  blocks, lines, i = [], text.splitlines(), 0
  while i < len(lines):
    m = _FENCE.match(lines[i])
    if not m:
      i += 1
      continue
    fence, indent, start = m.group('fence'), len(m.group('indent')), i + 1
    end = start
    while end < len(lines) and not re.match(r'^\s*' + re.escape(fence[0]) + '{%d,}\\s*$' % len(fence), lines[end]):
      end += 1
    body = [line[indent:] if line[:indent].strip() == '' else line for line in lines[start:end]]
    blocks.append((m.group('lang').lower(), start + 1, body))
    i = end + 1
  return blocks


def _logical_lines(lines, first_line):
  """(line number, text) with `\\` continuations joined."""
  out, i = [], 0
  while i < len(lines):
    start, parts = i, [lines[i]]
    while parts[-1].rstrip().endswith('\\') and i + 1 < len(lines):
      parts[-1] = parts[-1].rstrip()[:-1]
      i += 1
      parts.append(lines[i])
    out.append((first_line + start, ' '.join(p.strip() for p in parts)))
    i += 1
  return out


def _command_lines(lang, lines, first_line):
  """The block's (line number, command text), or [] for a block of output."""
  if lang and lang not in SHELL_LANGUAGES:
    return []
  logical = _logical_lines(lines, first_line)
  if any(line.startswith('$ ') for line in lines):  # the `$ ` convention: the other lines are output
    return [(n, text[2:]) for n, text in logical if text.startswith('$ ')]
  if not lang:  # a bare fence: commands only where a line starts with a known program
    words = [text.split()[0] for _, text in logical if text.strip() and not text.startswith('#')]
    if not any(_is_program(w) for w in words):
      return []
  return [(n, text) for n, text in logical if text.strip()]


def _is_program(word):
  return (word in PROGRAMS or os.path.basename(word) in PROGRAMS or bool(PYTHON.match(os.path.basename(word))) or
          word.startswith('./'))


def _split(text):
  """The simple commands of one command line: lists of words (redirections dropped)."""
  lexer = shlex.shlex(text, posix=True, punctuation_chars=';&|<>')
  lexer.whitespace_split = True
  commands, words, tokens = [], [], list(lexer)
  i = 0
  while i < len(tokens):
    token = tokens[i]
    if token in OPERATORS:
      commands.append(words)
      words = []
    elif set(token) <= set(';&|<>') and ('<' in token or '>' in token):
      i += 1  # a redirection and its target
    else:
      words.append(token)
    i += 1
  commands.append(words)
  return [c for c in commands if c]


def _substitute(words, variables):

  def value(m):
    name = m.group(1) or m.group(2)
    return variables.get(name, PLACEHOLDERS.get(name, m.group(0)))

  return [re.sub(r'\$\{(\w+)\}|\$(\w+)', value, w) for w in words]


def _strip_wrappers(words):
  while words:
    if words[0] == 'taskset':  # taskset [-c] CPUS COMMAND
      words = words[3:] if words[1:2] == ['-c'] else words[2:]
    elif words[0] == 'nice':
      words = words[3:] if words[1:2] == ['-n'] else words[1:]
    elif re.match(r'^\w+=', words[0]):
      words = words[1:]
    else:
      return words
  return words


def commands_in_markdown(text: str, path: str) -> List[Command]:
  """The classified commands of a Markdown text (`path`: its name in messages)."""
  commands = []
  for lang, first_line, lines in fenced_blocks(text):
    state, simple = {'outside': False}, []
    for n, t in _command_lines(lang, lines, first_line):
      try:
        simple += [(n, t, words) for words in _split(t)]
      except ValueError as e:  # shlex: an unbalanced quote
        commands.append(Command(path, n, t, [], problem=f'not a shell command line: {e}'))
    i = 0
    while i < len(simple):
      n, t, words = simple[i]
      if words[0] == 'for':  # for VAR in A B ...; do BODY; done
        if len(words) < 3 or words[2] != 'in':
          commands.append(Command(path, n, t, words, problem='a `for` loop not of the form `for VAR in A B ...`'))
          i += 1
          continue
        var, values, body, i = words[1], words[3:], [], i + 1
        while i < len(simple) and simple[i][2][0] != 'done':
          bn, bt, bwords = simple[i]
          bwords = bwords[1:] if bwords[0] == 'do' else bwords
          if bwords:
            body.append((bn, bt, bwords))
          i += 1
        i += 1  # done
        for value in values:
          for bn, bt, bwords in body:
            commands.append(
                _classified(Command(path, bn, bt, _substitute(bwords, {var: value}), tag=f'[{var}={value}]'), state))
        continue
      commands.append(_classified(Command(path, n, t, _substitute(words, {})), state))
      i += 1
  # Several commands on one line: number them.
  for cmd in commands:
    same = [c for c in commands if c.where == cmd.where and not c.tag]
    if len(same) > 1:
      for k, c in enumerate(same, 1):
        c.tag = f'[{k}]'
  return commands


def _classified(cmd, state):
  cmd.argv = _strip_wrappers(cmd.argv)
  cmd.kind, cmd.problem = classify(cmd.argv, state)
  return cmd


def classify(argv, state) -> Tuple[str, str]:
  """(kind, '') or ('', why it has none). `state` is the block's: {'outside': a `cd` left the repository}."""
  if not argv:
    return '', 'an empty command'
  unresolved = [w for w in argv if re.search(r'\$\{?\w', w)]
  if unresolved:
    return '', f'unresolved shell variable in {unresolved[0]!r} (add it to PLACEHOLDERS with a value to check with)'
  program = os.path.basename(argv[0])
  if state['outside']:
    return 'outside', ''
  if argv[0] == 'cd':
    target = argv[1] if len(argv) > 1 else '~'
    if not (not os.path.isabs(target) and (REPO / target).resolve().is_dir() and
            (REPO / target).resolve().is_relative_to(REPO)):
      state['outside'] = True
    return 'external', ''
  if PYTHON.match(program):
    if argv[1:2] == ['-m']:
      module = argv[2] if len(argv) > 2 else ''
      if module == 'pytest':
        return 'pytest', ''
      if module in ('venv', 'pip'):
        return 'external', ''
      return '', f'python -m {module}: a module of no known kind'
    script = os.path.normpath(argv[1]) if len(argv) > 1 else ''
    if script in ('run_train.py', 'run_eval.py'):
      return 'launcher', ''
    if script == 'scripts/reproduce.py':
      return 'reproduce', ''
    if script.endswith('.py') and script.split('/')[0] in ('scripts', 'benchmarks'):
      return 'script', ''
    return '', f'python {script}: a Python command of no known kind'
  if program in ('bash', 'sh') and len(argv) > 1 and argv[1].endswith('.sh'):
    return 'bash script', ''
  if program in EXTERNAL:
    return 'external', ''
  return '', f'{argv[0]}: a command of no known kind'


def doc_files():
  return [REPO / 'README.md', REPO / 'CONTRIBUTING.md'] + sorted((REPO / 'docs').rglob('*.md'))


def doc_commands():
  commands = []
  for path in doc_files():
    commands += commands_in_markdown(path.read_text(encoding='utf-8'), str(path.relative_to(REPO)))
  return commands


# --------------------------------------------------------------------------------------------------------------------
# Checks.


def _repo_top():
  return {name for name in os.listdir(REPO) if not name.startswith('.') and name not in ('runs', '__pycache__')}


def _values(argv):
  """The words of a command and the values of its `--flag=value` words."""
  for word in argv:
    yield word
    if word.startswith('-') and '=' in word:
      yield word.split('=', 1)[1]


_TOP_LEVEL_FILE = re.compile(r'^[\w.-]+\.(txt|py|sh|gin|md|ini|cfg|toml|yaml|yml|json|whl)$')


def _is_repo_path(word, top):
  """A word that names a path of the repository: under a top-level entry, or a top-level file name."""
  if not word or os.path.isabs(word) or any(c.isspace() for c in word) or word.startswith('-'):
    return False
  return os.path.normpath(word).split('/')[0] in top or bool(_TOP_LEVEL_FILE.match(word))


def _exists(word):
  path = REPO / word
  return path.exists() or Path(str(path) + '.index').exists() or bool(glob.glob(str(path)))


def check_paths(cmd: Command, skip=()):
  top = _repo_top()
  missing = [w for w in _values(cmd.argv) if w not in skip and _is_repo_path(w, top) and not _exists(w)]
  if missing:
    raise DocCommandError(f'{cmd.where}: {", ".join(missing)}: no such file or directory in the repository')


def _absolute(argv):
  """Repository-relative paths made absolute, for a command run from another working directory."""
  top, out = _repo_top(), []
  for word in argv:
    if _is_repo_path(word, top):
      word = str(REPO / word)
    elif word.startswith('--') and '=' in word and _is_repo_path(word.split('=', 1)[1], top):
      word = word.split('=', 1)[0] + '=' + str(REPO / word.split('=', 1)[1])
    out.append(word)
  return out


def _into(work_dir, args, names):
  """The absolute paths of the flags `names` moved under `work_dir` (relative ones land there as the working
  directory), so that a check never reads or writes a directory outside it."""
  out, i = [], 0
  while i < len(args):
    word = args[i]
    name, eq, value = word.partition('=')
    if name.lstrip('-') in names and name.startswith('-'):
      if not eq and i + 1 < len(args):
        i += 1
        value = args[i]
      if os.path.isabs(value):
        value = str(Path(work_dir) / value.lstrip('/'))
      out += [f'{name}={value}']
    else:
      out.append(word)
    i += 1
  return out


@contextlib.contextmanager
def _working_directory(path):
  before = os.getcwd()
  os.chdir(path)
  try:
    yield
  finally:
    os.chdir(before)


@contextlib.contextmanager
def _deepmind_lab_importable():
  """A stand-in `deepmind_lab` module where the real one is not installed: only its import is checked."""
  if 'deepmind_lab' in sys.modules or importlib.util.find_spec('deepmind_lab') is not None:
    yield
    return
  sys.modules['deepmind_lab'] = types.ModuleType('deepmind_lab')
  try:
    yield
  finally:
    sys.modules.pop('deepmind_lab', None)


def _flag_values():
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  return fv


def _config_args(argv):
  """A launcher command's config arguments (positional, --config_file), left to the launcher to resolve."""
  fv = _flag_values()
  try:
    positional = fv(['run.py'] + list(argv))[1:]
  except flags.Error:
    return set()
  configs = set(positional) | set(fv.config_file)
  return configs | {f'--config_file={c}' for c in fv.config_file}


def check_launcher(cmd: Command, work_dir):
  args = cmd.argv[2:]
  check_paths(cmd, skip=_config_args(args))
  program = 'train' if os.path.normpath(cmd.argv[1]) == 'run_train.py' else 'eval'
  args = _into(work_dir, args, ('train_dir', 'logdir', 'eval_dir', 'checkpoint_dir'))
  fv = _flag_values()
  with _working_directory(work_dir), _deepmind_lab_importable():
    try:
      argv = fv([f'run_{program}.py'] + args)
      launcher.plan(program, argv, fv)
    except flags.Error as e:
      raise DocCommandError(f'{cmd.where}: run_{program}.py rejects its flags: {e}') from None
    except launcher.LaunchError as e:
      raise DocCommandError(f'{cmd.where}: run_{program}.py refuses the command: {e}') from None


_ACTIONS = {'--export_best': 1, '--aggregate': 0, '--stop': 0}  # replaced by --dry_run (flag: number of values)


def check_reproduce(cmd: Command, work_dir):
  from reproduction import cli  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  check_paths(cmd)
  args, out = _into(work_dir, _absolute(cmd.argv[2:]), ('root',)), io.StringIO()
  try:
    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
      parsed = cli.parse_args(args)
  except SystemExit as e:
    message = f'{cmd.where}: reproduce.py rejects its arguments (exit {e.code}):\n{out.getvalue()}'
    raise DocCommandError(message) from None
  if not parsed.status and not parsed.dry_run:
    kept, i = [], 0
    while i < len(args):
      name = args[i].split('=', 1)[0]
      if name in _ACTIONS:
        i += 1 + (_ACTIONS[name] if '=' not in args[i] else 0)
        continue
      kept.append(args[i])
      i += 1
    args = kept + ['--dry_run']
  with _working_directory(work_dir), contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
    code = cli.main(args)
  if code != 0:
    raise DocCommandError(f'{cmd.where}: reproduce.py {shlex.join(args)} exited {code}:\n{out.getvalue()[-3000:]}')


@functools.lru_cache(maxsize=None)
def script_help(script):
  result = subprocess.run([sys.executable, str(REPO / script), '--help'], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=120, check=False)
  return result.returncode, result.stdout + result.stderr


def check_script(cmd: Command):
  check_paths(cmd)
  script = os.path.normpath(cmd.argv[1])
  if not (REPO / script).is_file():
    raise DocCommandError(f'{cmd.where}: {script}: no such script')
  code, text = script_help(script)
  if code != 0:
    raise DocCommandError(f'{cmd.where}: {script} --help exited {code}:\n{text[-3000:]}')
  takes_value = set(re.findall(r'(--[\w-]+)[ =][A-Z]', text))
  positional, args, i = [], cmd.argv[2:], 0
  while i < len(args):
    word = args[i]
    if word == '--':
      break  # the rest goes elsewhere (e.g. launch_local_cluster.py: to every run_train.py)
    if word.startswith('-'):
      name = word.split('=', 1)[0]
      if not re.search(r'(?<![\w-])' + re.escape(name) + r'(?![\w-])', text):
        raise DocCommandError(f'{cmd.where}: {script} has no flag {name} (see its --help)')
      i += 2 if name in takes_value and '=' not in word else 1
      continue
    positional.append(word)
    i += 1
  choices = re.search(r'positional arguments:\n\s+\{([\w,-]+)\}', text)
  if choices and positional and positional[0] not in choices.group(1).split(','):
    raise DocCommandError(f'{cmd.where}: {script}: {positional[0]!r} is not one of {{{choices.group(1)}}}')


def check_bash_script(cmd: Command):
  check_paths(cmd)
  script = REPO / cmd.argv[1]
  if not script.is_file():
    raise DocCommandError(f'{cmd.where}: {cmd.argv[1]}: no such script')
  result = subprocess.run(['bash', '-n', str(script)], capture_output=True, text=True, check=False)
  if result.returncode != 0:
    raise DocCommandError(f'{cmd.where}: bash -n {cmd.argv[1]}: {result.stderr}')


def check_command(cmd: Command, work_dir):
  """Checks a command that is not run for real (see the module docstring); raises DocCommandError."""
  if not cmd.kind:
    raise DocCommandError(f'{cmd.where}: `{cmd.text}`: {cmd.problem}. Give it a kind in tests/test_docs_commands.py '
                          f'(classify) or fix the doc.')
  if cmd.kind == 'launcher':
    check_launcher(cmd, work_dir)
  elif cmd.kind == 'reproduce':
    check_reproduce(cmd, work_dir)
  elif cmd.kind == 'script':
    check_script(cmd)
  elif cmd.kind == 'bash script':
    check_bash_script(cmd)
  elif cmd.kind in ('pytest', 'external'):
    check_paths(cmd)
  # 'outside': a command in another checkout (after `cd`), nothing to check here.


# --------------------------------------------------------------------------------------------------------------------
# The docs' commands.

DOC_COMMANDS = doc_commands()


def _run(argv, cwd, timeout=300):
  result = subprocess.run([sys.executable, str(REPO / argv[1])] + argv[2:], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout, check=False)
  return result.returncode, result.stdout + result.stderr


def _real_command(file, text):
  return next(c for c in DOC_COMMANDS if c.key == (file, text))


@pytest.fixture(scope='module', name='hiro_dir')
def _hiro_dir(tmp_path_factory):
  return tmp_path_factory.mktemp('readme_hiro')


@pytest.fixture(scope='module', name='hiro_train')
def _hiro_train(hiro_dir):
  cmd = _real_command('README.md', 'python run_train.py configs/ant_maze.gin')
  code, out = _run(cmd.argv + HIRO_TINY, hiro_dir)
  assert code == 0 and 'Traceback' not in out, f'{cmd.where}: `{cmd.text}` (tiny) failed:\n{out[-5000:]}'
  assert (hiro_dir / 'runs' / 'ant_maze' / 'policy' / 'model.ckpt-100.index').is_file(), out[-5000:]
  assert 'Training finished at global step 150' in out, out[-5000:]
  return hiro_dir


@pytest.fixture(scope='module', name='hiro_eval')
def _hiro_eval(hiro_train):
  cmd = _real_command('README.md', 'python run_eval.py configs/ant_maze.gin')
  code, out = _run(cmd.argv + HIRO_EVAL_TINY, hiro_train)
  assert code == 0 and 'Traceback' not in out, f'{cmd.where}: `{cmd.text}` (tiny) failed:\n{out[-5000:]}'
  assert (hiro_train / 'runs' / 'ant_maze' / 'eval' / 'results.json').is_file(), out[-5000:]
  assert 'Evaluation of runs/ant_maze/policy/model.ckpt-100 (global step 100)' in out, out[-5000:]
  return hiro_train


@pytest.fixture(scope='module', name='impala_train')
def _impala_train(tmp_path_factory):
  cmd = _real_command('README.md', 'python run_train.py configs/impala_atari.gin')
  work = tmp_path_factory.mktemp('readme_impala')
  code, out = _run(cmd.argv + IMPALA_TINY, work)
  assert code == 0 and 'Traceback' not in out, f'{cmd.where}: `{cmd.text}` (tiny) failed:\n{out[-5000:]}'
  assert (work / 'runs' / 'impala_atari' / 'model.ckpt-200.index').is_file(), out[-5000:]
  return work


@pytest.mark.parametrize('cmd', DOC_COMMANDS, ids=[c.id for c in DOC_COMMANDS])
def test_doc_command(cmd, tmp_path, request):
  problem = None
  try:
    if cmd.key in REAL_RUNS:
      check_paths(cmd)
      request.getfixturevalue(REAL_RUNS[cmd.key])
    else:
      check_command(cmd, tmp_path)
  except DocCommandError as e:
    problem = str(e)
  if problem:
    pytest.fail(problem, pytrace=False)


def test_the_real_runs_are_in_the_readme():
  """The commands run for real are still documented (else their runs would silently stop)."""
  keys = {c.key for c in DOC_COMMANDS}
  assert [k for k in REAL_RUNS if k not in keys] == []


def test_every_doc_file_is_read_and_commands_are_found():
  files = {c.path for c in DOC_COMMANDS}
  assert 'README.md' in files and len(DOC_COMMANDS) > 20
  assert {c.kind for c in DOC_COMMANDS} >= {'launcher', 'reproduce', 'script', 'external'}
  assert {c.kind for c in DOC_COMMANDS} <= set(KINDS) | {''}


# --------------------------------------------------------------------------------------------------------------------
# The extractor and the checks, on crafted Markdown: a wrong command fails.

CRAFTED = '''# A crafted doc

```bash
python run_train.py configs/point_maze.gin \\
    --gin_param 'train_uvf.batch_size = 7'   # a comment; with a ' quote
python run_train.py configs/no_such.gin
python scripts/no_such.py --x
frobnicate --all
python3.11 -m venv .venv && . .venv/bin/activate && pip install -r requirements-nope.txt
```

```
run_train: SIGTERM received: an output block, not commands
```

```console
$ python scripts/mutation_check.py --only td3_
mutation   test      (output)
$ python scripts/mutation_check.py --no_such_flag
```

```bash
for t in ant_maze ant_push; do
  taskset -c 0 python scripts/reproduce.py configs/$t.gin --seeds 2 --steps 3000 --root runs/r_$t &
done; wait
python run_eval.py configs/ant_maze.gin --train_dir $UNKNOWN
python scripts/reproduce.py configs/ant_maze.gin --seeds 2 --no_such 1
```

```python
python run_train.py configs/not_shell.gin
```
'''


@pytest.fixture(name='crafted')
def _crafted():
  return commands_in_markdown(CRAFTED, 'crafted.md')


def test_extractor_splits_joins_and_skips_output(crafted):
  got = [(c.id, c.kind, shlex.join(c.argv)) for c in crafted]
  assert got == [
      ('crafted.md:4', 'launcher', "python run_train.py configs/point_maze.gin --gin_param 'train_uvf.batch_size = 7'"),
      ('crafted.md:6', 'launcher', 'python run_train.py configs/no_such.gin'),
      ('crafted.md:7', 'script', 'python scripts/no_such.py --x'),
      ('crafted.md:8', '', 'frobnicate --all'),
      ('crafted.md:9[1]', 'external', 'python3.11 -m venv .venv'),
      ('crafted.md:9[2]', 'external', '. .venv/bin/activate'),
      ('crafted.md:9[3]', 'external', 'pip install -r requirements-nope.txt'),
      ('crafted.md:17', 'script', 'python scripts/mutation_check.py --only td3_'),
      ('crafted.md:19', 'script', 'python scripts/mutation_check.py --no_such_flag'),
      ('crafted.md:24[t=ant_maze]', 'reproduce',
       'python scripts/reproduce.py configs/ant_maze.gin --seeds 2 --steps 3000 --root runs/r_ant_maze'),
      ('crafted.md:24[t=ant_push]', 'reproduce',
       'python scripts/reproduce.py configs/ant_push.gin --seeds 2 --steps 3000 --root runs/r_ant_push'),
      ('crafted.md:25', 'external', 'wait'),
      ('crafted.md:26', '', "python run_eval.py configs/ant_maze.gin --train_dir '$UNKNOWN'"),
      ('crafted.md:27', 'reproduce', 'python scripts/reproduce.py configs/ant_maze.gin --seeds 2 --no_such 1'),
  ]


def _by_id(crafted, id_):
  return next(c for c in crafted if c.id == id_)


def test_good_commands_pass(crafted, tmp_path):
  for id_ in ('crafted.md:4', 'crafted.md:17', 'crafted.md:24[t=ant_push]', 'crafted.md:25'):
    check_command(_by_id(crafted, id_), tmp_path)


@pytest.mark.parametrize('id_, message', [
    ('crafted.md:6', r'crafted.md:6: run_train.py refuses the command: config file not found: configs/no_such.gin'),
    ('crafted.md:7', r'crafted.md:7: scripts/no_such.py: no such file or directory in the repository'),
    ('crafted.md:8', r'crafted.md:8: `frobnicate --all`: frobnicate: a command of no known kind'),
    ('crafted.md:9[3]', r'requirements-nope.txt: no such file'),
    ('crafted.md:19', r'crafted.md:19: scripts/mutation_check.py has no flag --no_such_flag'),
    ('crafted.md:26', r"crafted.md:26: .*unresolved shell variable in '\$UNKNOWN'"),
    ('crafted.md:27', r'crafted.md:27: reproduce.py rejects its arguments .*unrecognized arguments: --no_such 1'),
])
def test_wrong_commands_fail_naming_file_and_line(crafted, tmp_path, id_, message):
  with pytest.raises(DocCommandError, match=f'(?s){message}'):
    check_command(_by_id(crafted, id_), tmp_path)


def test_a_wrong_flag_of_the_launcher_fails(tmp_path):
  cmd, = commands_in_markdown('```bash\npython run_eval.py configs/ant_maze.gin --no_such_flag=1\n```\n', 'x.md')
  with pytest.raises(DocCommandError, match="x.md:2: run_eval.py rejects its flags: .*no_such_flag"):
    check_command(cmd, tmp_path)


def test_an_unbalanced_quote_fails_naming_file_and_line(tmp_path):
  markdown = "Text.\n\n```sh\npython run_train.py configs/ant_maze.gin --gin_param 'a = 1\n```\n"
  cmd, = commands_in_markdown(markdown, 'x.md')
  with pytest.raises(DocCommandError, match='x.md:4: .*not a shell command line: No closing quotation'):
    check_command(cmd, tmp_path)


def test_a_command_after_cd_out_of_the_repository_is_not_checked():
  cmds = commands_in_markdown('```bash\ncd configs && ls\ngit clone U && cd lab\n./bazel-bin/x /tmp/y\n```\n', 'x.md')
  assert [(c.id, c.kind) for c in cmds] == [('x.md:2[1]', 'external'), ('x.md:2[2]', ''), ('x.md:3[1]', 'external'),
                                            ('x.md:3[2]', 'external'), ('x.md:4', 'outside')]
