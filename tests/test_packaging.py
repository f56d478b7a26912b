"""The project as an installable package (pyproject.toml): the wheel, an install of it, an editable install.

The working tree (the files git tracks or would track, uncommitted changes included) is copied to a temporary
directory and built there, so that the build never writes into the checkout (build/, *.egg-info). The wheel is built
once for the module and checked for its contents, metadata and console scripts; then installed, without its
dependencies and without a package index, into a fresh virtual environment whose site-packages has a `.pth` file
naming this environment's site-packages (the heavy dependencies are found there, nothing is downloaded). Every check
of an installed package runs in a subprocess of that environment's interpreter, from a directory outside the
checkout, without PYTHONPATH: what it imports and reads must be the installed package's. An editable install of a
second copy is checked the same way, and a wheel built from the sdist (as `python -m build` does) must equal the
wheel.
"""

import configparser
import email.parser
import os
from pathlib import Path
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest

import launcher
from launcher import programs

REPO = launcher.REPO_ROOT
PACKAGES = ('uvf', 'scalable_agent', 'rundir', 'launcher')
TRAINED_TASKS = ('ant_maze', 'ant_push', 'ant_fall')
NOT_INSTALLED = ('tests', 'scripts', 'reproduction', 'figures', 'benchmarks', 'docs', 'configs')
COMMANDS = {'hiro-impala-train': 'launcher.programs:train_main', 'hiro-impala-eval': 'launcher.programs:eval_main'}
TIMEOUT_S = 300

# --------------------------------------------------------------------------------------------------------------------
# Helpers.


def clean_env():
  """This environment without what would point an interpreter at the checkout or at another environment."""
  env = {
      k: v
      for k, v in os.environ.items()
      if k not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'VIRTUAL_ENV', 'PYTHONSAFEPATH')
  }
  env.update(PIP_DISABLE_PIP_VERSION_CHECK='1', PIP_NO_INPUT='1', TF_CPP_MIN_LOG_LEVEL='3')
  return env


def run(command, cwd, what):
  """Runs `command` (a list) from `cwd` in `clean_env()`; fails naming `what` with its output unless it exits 0."""
  result = subprocess.run([str(c) for c in command], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
  assert result.returncode == 0, (
      f'{what} failed (exit status {result.returncode}): {" ".join(map(str, command))}\n(from {cwd})\n'
      f'--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}')
  return result


def python_lines(venv, code, cwd, what):
  """The lines `code` prints when run by the interpreter of `venv` from `cwd`."""
  return run([venv / 'bin' / 'python', '-c', code], cwd, what).stdout.strip().splitlines()


def copy_working_tree(destination):
  """Copies the files of the working tree that git tracks or would track (not ignored) to `destination`."""
  listing = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=REPO,
                           capture_output=True, check=True).stdout.decode()
  names = [n for n in listing.split('\0') if n and (REPO / n).is_file()]
  assert 'pyproject.toml' in names, 'pyproject.toml is not in the working tree (or git ignores it)'
  destination = destination.resolve()
  for name in names:
    (destination / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / name, destination / name)
  return destination


def fresh_venv(path):
  """A virtual environment without pip whose site-packages also reads this environment's site-packages (`.pth`):
  pip and the dependencies come from there."""
  path = path.resolve()
  run([sys.executable, '-m', 'venv', '--without-pip', path], path.parent, 'creating a virtual environment')
  ours = {sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']}
  where = 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
  site_packages = Path(run([path / 'bin' / 'python', '-c', where], path, 'the fresh environment').stdout.strip())
  (site_packages / '_parent_environment.pth').write_text(''.join(p + '\n' for p in sorted(ours)))
  return path, site_packages


def wheel_requirements(wheel):
  """The Requires-Dist lines of a wheel's METADATA."""
  with zipfile.ZipFile(wheel) as z:
    metadata = email.parser.Parser().parsestr(z.read('hiro_impala_tf2-0.1.0.dist-info/METADATA').decode())
  return metadata.get_all('Requires-Dist') or []


def requirement_set(lines):
  """Requirement strings, normalized (name, extras, specifier, marker), as a set."""
  from packaging.requirements import Requirement  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from packaging.utils import canonicalize_name  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  normalized = set()
  for line in lines:
    r = Requirement(line)
    extras = f'[{",".join(sorted(r.extras))}]' if r.extras else ''
    marker = f'; {r.marker}' if r.marker else ''
    normalized.add(f'{canonicalize_name(r.name)}{extras}{r.specifier}{marker}')
  return normalized


# --------------------------------------------------------------------------------------------------------------------
# Fixtures: one wheel for the module, one install of it.


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  return copy_working_tree(tmp_path_factory.mktemp('source'))


@pytest.fixture(scope='module')
def wheel(source, tmp_path_factory):
  out = tmp_path_factory.mktemp('wheel')
  run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index', '-w', out, source], out,
      'building the wheel')
  wheels = list(out.glob('*.whl'))
  assert [w.name for w in wheels] == ['hiro_impala_tf2-0.1.0-py3-none-any.whl'], wheels
  return wheels[0]


@pytest.fixture(scope='module')
def names(wheel):
  with zipfile.ZipFile(wheel) as z:
    return set(z.namelist())


@pytest.fixture(scope='module')
def elsewhere(tmp_path_factory):
  """A working directory outside the checkout and the copies."""
  return tmp_path_factory.mktemp('elsewhere').resolve()


@pytest.fixture(scope='module')
def installed(wheel, tmp_path_factory):
  """(venv, its site-packages) with the wheel installed."""
  venv, site_packages = fresh_venv(tmp_path_factory.mktemp('installed') / 'venv')
  run([venv / 'bin' / 'python', '-m', 'pip', 'install', '--no-deps', '--no-index', wheel], venv, 'installing the wheel')
  return venv, site_packages


# --------------------------------------------------------------------------------------------------------------------
# The wheel.


def test_wheel_holds_the_packages_their_data_the_configs_and_the_trained_policies(source, wheel, names):
  print(f'{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, {len(names)} files')
  modules = {p.relative_to(source).as_posix() for package in PACKAGES for p in (source / package).rglob('*.py')}
  assert len(modules) > 60
  assert not modules - names, f'modules missing from the wheel: {sorted(modules - names)}'
  assets = {p.relative_to(source).as_posix() for p in (source / 'uvf' / 'environments' / 'assets').iterdir()}
  assert {'uvf/environments/assets/ant.xml', 'uvf/environments/assets/point.xml'} <= assets
  assert not assets - names, f'MuJoCo assets missing from the wheel: {sorted(assets - names)}'
  configs = {'launcher/' + p.relative_to(source).as_posix() for p in (source / 'configs').rglob('*.gin')}
  assert not configs - names, f'configs missing from the wheel: {sorted(configs - names)}'
  for name in ('ant_maze.gin', 'impala_atari.gin', 'uvf/configs/base_uvf.gin', 'uvf/context/configs/ant_maze.gin',
               'scalable_agent/experiment.gin'):
    assert 'launcher/configs/' + name in names
  for task in TRAINED_TASKS:
    bundle = source / 'docs' / 'reproduction' / task / 'best_policy'
    files = {f'uvf/trained/{task}/best_policy/{p.name}' for p in bundle.iterdir() if p.is_file()}
    assert not files - names, f'trained {task} policy files missing from the wheel: {sorted(files - names)}'
    in_wheel = [n for n in names if n.startswith(f'uvf/trained/{task}/best_policy/model.ckpt-')]
    assert any(n.endswith('.index') for n in in_wheel) and any('.data-' in n for n in in_wheel), in_wheel
  trained = {n for n in names if n.startswith('uvf/trained/')}
  extra = trained - {
      n for n in trained
      if n.split('/')[2] in TRAINED_TASKS and n.split('/')[3] == 'best_policy' and len(n.split('/')) == 5
  }
  assert not extra, f'uvf/trained holds more than the three best policies: {sorted(extra)}'
  top = {n.split('/')[0] for n in names}
  assert top == set(PACKAGES) | {'hiro_impala_tf2-0.1.0.dist-info'}, f'unexpected top-level entries: {sorted(top)}'
  assert not [n for n in names if n.split('/')[0] in NOT_INSTALLED]


def test_wheel_requires_exactly_requirements_txt(wheel):
  with zipfile.ZipFile(wheel) as z:
    metadata = email.parser.Parser().parsestr(z.read('hiro_impala_tf2-0.1.0.dist-info/METADATA').decode())
  assert (metadata['Name'], metadata['Version']) == ('hiro-impala-tf2', '0.1.0')
  assert metadata['Requires-Python'] in ('<3.12,>=3.11', '>=3.11,<3.12'), metadata['Requires-Python']
  lines = [line.split('#', 1)[0].strip() for line in (REPO / 'requirements.txt').read_text().splitlines()]
  expected = requirement_set(line for line in lines if line)
  got = requirement_set(wheel_requirements(wheel))
  assert got == expected, (f'Requires-Dist differs from requirements.txt: only in the wheel {sorted(got - expected)}, '
                           f'only in requirements.txt {sorted(expected - got)}')


def test_wheel_has_the_two_console_commands(wheel):
  with zipfile.ZipFile(wheel) as z:
    parser = configparser.ConfigParser()
    parser.read_string(z.read('hiro_impala_tf2-0.1.0.dist-info/entry_points.txt').decode())
  assert dict(parser['console_scripts']) == COMMANDS
  for target in COMMANDS.values():
    assert callable(getattr(programs, target.split(':')[1]))


def test_a_wheel_built_from_the_sdist_equals_the_wheel(wheel, names, tmp_path_factory):
  """`python -m build` and other front ends build the wheel from the sdist: it must hold what the wheel needs
  (requirements.txt, through MANIFEST.in: without it the wheel would silently have no dependencies)."""
  source, out = copy_working_tree(tmp_path_factory.mktemp('sdist_source')), tmp_path_factory.mktemp('sdist')
  run([sys.executable, '-c', f'from setuptools import build_meta; build_meta.build_sdist({str(out)!r})'], source,
      'building the sdist')
  sdist, = out.glob('*.tar.gz')
  with tarfile.open(sdist) as tar:
    tar.extractall(out, **({'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}))  # (Python >= 3.11.4)
  run([
      sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index', '-w', out / 'wheel',
      out / 'hiro-impala-tf2-0.1.0'
  ], out, 'building the wheel from the sdist')
  from_sdist, = (out / 'wheel').glob('*.whl')
  with zipfile.ZipFile(from_sdist) as z:
    assert set(z.namelist()) == names, set(z.namelist()) ^ names
  assert wheel_requirements(from_sdist) == wheel_requirements(wheel)


# --------------------------------------------------------------------------------------------------------------------
# The installed wheel, from a directory outside the checkout.


def test_installed_packages_are_imported_from_the_environment(installed, elsewhere):
  venv, site_packages = installed
  lines = python_lines(
      venv, 'import uvf, scalable_agent, rundir, launcher\n'
      'for m in (uvf, scalable_agent, rundir, launcher): print(m.__file__)\n'
      'print(launcher.CONFIG_DIR)', elsewhere, 'importing the installed packages')
  for line in lines:
    assert Path(line).is_relative_to(site_packages), f'{line} is not in the environment ({site_packages})'
    assert not Path(line).is_relative_to(REPO), f'{line} is in the checkout'
  assert Path(lines[-1]) == site_packages / 'launcher' / 'configs'


def test_installed_configs_are_found_by_name_from_any_directory(installed, elsewhere):
  venv, site_packages = installed
  names = ['ant_maze.gin', 'configs/ant_push.gin', 'configs/base_uvf.gin', 'context/configs/ant_maze.gin']
  lines = python_lines(
      venv, f'import launcher\nfor n in {names!r}: print(launcher.resolve_config_path(n))\n'
      'print(" ".join(launcher.available_configs()))', elsewhere, 'resolving configs')
  configs = site_packages / 'launcher' / 'configs'
  assert [Path(line) for line in lines[:-1]] == [
      configs / 'ant_maze.gin', configs / 'ant_push.gin', configs / 'uvf' / 'configs' / 'base_uvf.gin',
      configs / 'uvf' / 'context' / 'configs' / 'ant_maze.gin'
  ]
  available = lines[-1].split()
  assert 'configs/ant_maze.gin' in available and 'configs/impala_atari.gin' in available, available


@pytest.mark.parametrize('command,program', [('hiro-impala-train', 'train'), ('hiro-impala-eval', 'eval')])
def test_installed_command_help(installed, elsewhere, command, program):
  venv, _ = installed
  out = run([venv / 'bin' / command, '--help'], elsewhere, f'{command} --help').stdout
  assert out.startswith(programs.usage(program, command)), out[:2000]
  for flag in ('--gin_param', '--train_dir', '--config_file', '--level_name'):
    assert flag in out, f'{command} --help does not list {flag}'


def test_installed_config_with_includes_parses(installed, tmp_path):
  """`launcher.plan` (the configs, the gin parse, the system, the run directory; it writes nothing) of ant_maze.gin,
  whose settings come from the files it includes."""
  venv, site_packages = installed
  code = '\n'.join([
      'from absl import flags', 'import gin, launcher', 'launcher.prepare_process()', 'fv = flags.FlagValues()',
      'launcher.define_flags(fv)', "p = launcher.plan('train', fv(['hiro-impala-train', 'ant_maze.gin']), fv)",
      'print(p.system.key)', 'print(p.config_paths[0])', "print(gin.query_parameter('create_maze_env.env_name'))",
      "print(launcher.resolve_config_path('uvf/context/configs/ant_maze.gin'))"
  ])
  lines = python_lines(venv, code, tmp_path, 'planning ant_maze.gin')[-4:]
  configs = site_packages / 'launcher' / 'configs'
  assert lines == [
      'uvf',
      str(configs / 'ant_maze.gin'), 'AntMaze',
      str(configs / 'uvf' / 'context' / 'configs' / 'ant_maze.gin')
  ]
  assert list(tmp_path.iterdir()) == [], 'planning wrote into the working directory'


def test_installed_console_takes_only_the_projects_packages_for_its_own(installed, elsewhere):
  """The console's quiet mode prints the project's log records as plain lines and drops other libraries' INFO: in
  an installed package the other libraries share site-packages with it."""
  venv, site_packages = installed
  lines = python_lines(
      venv, 'import launcher, uvf\n'
      'print(launcher.console.is_project_file(uvf.__file__))\n'
      'print(launcher.console.is_project_file(launcher.REPO_ROOT / "numpy" / "core.py"))', elsewhere, 'is_project_file')
  assert lines == ['True', 'False']


def test_installed_gymnasium_env(installed, elsewhere):
  venv, _ = installed
  python_lines(venv, "import gymnasium, uvf\nenv = gymnasium.make('hiro/AntFall-v0')\nenv.reset(seed=0)\nenv.close()",
               elsewhere, "gymnasium.make('hiro/AntFall-v0') from the installed package")


# --------------------------------------------------------------------------------------------------------------------
# The scripts of the checkout and the commands share the usage text.


@pytest.mark.parametrize('program', ['train', 'eval'])
def test_scripts_print_the_shared_usage(program, tmp_path):
  out = run([sys.executable, REPO / f'run_{program}.py', '--help'], tmp_path, f'run_{program}.py --help').stdout
  assert out.startswith(programs.usage(program, f'python run_{program}.py') + '\nflags:\n'), out[:2000]


# --------------------------------------------------------------------------------------------------------------------
# Editable install.


def test_editable_install_reads_the_source_tree(tmp_path_factory, elsewhere):
  source = copy_working_tree(tmp_path_factory.mktemp('editable_source'))
  venv, _ = fresh_venv(tmp_path_factory.mktemp('editable') / 'venv')
  run([
      venv / 'bin' / 'python', '-m', 'pip', 'install', '--no-deps', '--no-build-isolation', '--no-index', '-e', source
  ], venv, 'the editable install')
  code = "import uvf, launcher\nprint(uvf.__file__)\nprint(launcher.resolve_config_path('ant_maze.gin'))"
  lines = python_lines(venv, code, elsewhere, 'importing the editable install')
  assert lines == [str(source / 'uvf' / '__init__.py'), str(source / 'configs' / 'ant_maze.gin')]
  assert (venv / 'bin' / 'hiro-impala-train').is_file()
