"""run_train.py / run_eval.py: argument handling, gin validation, system selection, run-directory guard.

The command-line tests start the real scripts in a subprocess from an empty working directory, so they also check
that nothing is written when a run is refused. The others call `launcher.plan` in-process on a fresh `FlagValues`,
each from its own empty working directory: a default run directory (`runs/<config name>`) is the test's own, never
the checkout's, whatever runs a user has there.
"""

import dataclasses
import inspect
import json
import os
from pathlib import Path
import subprocess
import sys
import types

from absl import flags
import gin
import pytest

import launcher

REPO = launcher.REPO_ROOT
TOP_LEVEL_HIRO = [
    'ant_maze', 'ant_push', 'ant_fall', 'ant_block', 'ant_block_maze', 'point_maze', 'ant_maze_xy', 'ant_maze_repr'
]
TOP_LEVEL_IMPALA = ['impala_dmlab', 'impala_dmlab30', 'impala_atari']
# Only makes `import deepmind_lab` succeed, for the launcher's pre-flight check; nothing here runs a level.
FAKE_DMLAB = types.ModuleType('deepmind_lab')


def run_script(script, *args, cwd):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  return subprocess.run([sys.executable, str(REPO / script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=300)


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)


def make_plan(program, *args):
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  argv = fv([f'run_{program}.py', *args])
  return launcher.plan(program, argv, fv)


# --------------------------------------------------------------------------------------------------------------------
# Command line, end to end.


@pytest.mark.parametrize('script', ['run_train.py', 'run_eval.py'])
def test_help_prints_usage_and_flags(script, tmp_path):
  result = run_script(script, '--help', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert 'Usage:' in result.stdout
  for flag in ('--gin_param', '--train_dir', '--config_file', '--params', '--level_name', '--num_actors'):
    assert flag in result.stdout


def test_unknown_config_lists_available_configs(tmp_path):
  result = run_script('run_train.py', 'configs/no_such.gin', cwd=tmp_path)
  assert result.returncode == launcher.EXIT_USAGE
  assert 'config file not found: configs/no_such.gin' in result.stderr
  for name in TOP_LEVEL_HIRO + TOP_LEVEL_IMPALA:
    assert f'configs/{name}.gin' in result.stderr
  assert 'Traceback' not in result.stderr
  assert list(tmp_path.iterdir()) == []


def test_unknown_gin_binding_gives_gins_explanation(tmp_path):
  result = run_script('run_train.py', 'configs/ant_maze.gin', '--gin_param', 'train_uvf.no_such_arg = 1', cwd=tmp_path)
  assert result.returncode == launcher.EXIT_USAGE
  assert "Configurable 'train_uvf' doesn't have a parameter named 'no_such_arg'" in result.stderr
  assert 'train_uvf.no_such_arg = 1' in result.stderr
  assert 'Traceback' not in result.stderr
  assert list(tmp_path.iterdir()) == [], 'nothing may be written before the configuration is valid'


def test_typo_in_a_config_file_names_the_file_and_line(tmp_path):
  config = tmp_path / 'my_maze.gin'
  config.write_text("include 'ant_maze.gin'\n\ntrain_uvf.bach_size = 64\n")
  result = run_script('run_train.py', str(config), cwd=tmp_path)
  assert result.returncode == launcher.EXIT_USAGE
  assert "doesn't have a parameter named 'bach_size'" in result.stderr
  assert 'my_maze.gin' in result.stderr and 'line 3' in result.stderr


def test_impala_atari_starts(tmp_path):
  """IMPALA's configs pass the launcher's checks and reach scalable_agent.experiment."""
  p = make_plan('train', 'configs/impala_atari.gin', '--train_dir', str(tmp_path / 'run'))
  assert p.system.key == 'scalable_agent' and p.program == 'train'
  assert p.system.entry['train'] == 'scalable_agent.experiment:experiment'


def test_original_hiro_eval_command_line(tmp_path):
  """HIRO evaluation: the original command line runs it; with no policy checkpoint in the
  training directory (and no wait: checkpoint_timeout 0) it says where it looked, in one message."""
  result = run_script('run_eval.py', '--logtostderr', '--checkpoint_dir', 'exp/train', '--eval_dir', 'exp/eval',
                      '--config_file=configs/base_uvf.gin', '--config_file=configs/eval_uvf.gin',
                      '--config_file=context/configs/hiro_orig.gin', '--config_file=context/configs/ant_maze.gin',
                      '--params=evaluate.checkpoint_timeout = 0', cwd=tmp_path)
  assert result.returncode == launcher.EXIT_USAGE, result.stderr
  assert 'not implemented' not in result.stderr and 'Traceback' not in result.stderr
  assert 'In call to configurable' not in result.stderr
  assert 'no policy checkpoint in exp/train/policy' in result.stderr
  assert 'save_policy_every_n_steps' in result.stderr


@pytest.mark.slow
def test_dmlab_config_without_deepmind_lab_says_what_to_install(tmp_path):
  code = ('import sys; sys.modules["deepmind_lab"] = None; sys.argv = ["run_train.py", "configs/impala_dmlab.gin"];'
          f'sys.path.insert(0, {str(REPO)!r}); import runpy; runpy.run_path({str(REPO / "run_train.py")!r}, '
          'run_name="__main__")')
  result = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert result.returncode == launcher.EXIT_UNAVAILABLE
  assert "level 'explore_goal_locations_small' runs on DeepMind Lab" in result.stderr
  assert 'deepmind_lab' in result.stderr and 'docs/install.md' in result.stderr
  assert 'configs/impala_atari.gin' in result.stderr
  assert 'Traceback' not in result.stderr
  assert list(tmp_path.iterdir()) == []


def test_unknown_flag(tmp_path):
  result = run_script('run_train.py', 'configs/ant_maze.gin', '--bogus', cwd=tmp_path)
  assert result.returncode != 0
  assert "Unknown command line flag 'bogus'" in result.stderr


def test_existing_train_dir_of_another_config_is_refused_and_untouched(tmp_path):
  run_dir = tmp_path / 'runs' / 'ant_maze'
  run_dir.mkdir(parents=True)
  manifest = make_plan('train', 'configs/ant_push.gin').manifest  # a real ant_push run's record
  (run_dir / 'run.json').write_text(json.dumps(manifest))
  (run_dir / 'checkpoint').write_text('precious')
  result = run_script('run_train.py', 'configs/ant_maze.gin', cwd=tmp_path)
  assert result.returncode == launcher.EXIT_USAGE
  assert 'holds a run of another configuration (ant_push)' in result.stderr
  assert "-meta_context_range = ((-16, -4), (16, 20))" in result.stderr
  assert "+meta_context_range = ((-4, -4), (20, 20))" in result.stderr
  assert json.loads((run_dir / 'run.json').read_text()) == manifest
  assert (run_dir / 'checkpoint').read_text() == 'precious'
  assert sorted(p.name for p in run_dir.iterdir()) == ['checkpoint', 'run.json']


# --------------------------------------------------------------------------------------------------------------------
# Plans, in-process.


def test_default_train_dir_is_runs_config_name():
  p = make_plan('train', 'configs/ant_maze.gin')
  assert p.system.key == 'uvf'
  assert p.train_dir == Path('runs/ant_maze')
  assert p.output_dir == p.train_dir


@pytest.mark.parametrize('name', TOP_LEVEL_HIRO)
def test_hiro_top_level_configs(name):
  p = make_plan('train', f'configs/{name}.gin')
  assert p.system.key == 'uvf'
  assert gin.query_parameter('train_uvf.batch_size') == 100
  e = make_plan('eval', f'configs/{name}.gin')
  assert e.eval_dir == Path(f'runs/{name}/eval') and e.output_dir == e.eval_dir
  assert gin.query_parameter('evaluate.num_episodes_eval') == 50


@pytest.mark.parametrize('name', TOP_LEVEL_IMPALA)
def test_impala_top_level_configs(name, monkeypatch):
  monkeypatch.setitem(sys.modules, 'deepmind_lab', FAKE_DMLAB)
  p = make_plan('train', f'configs/{name}.gin')
  assert p.system.key == 'scalable_agent'
  assert gin.query_parameter('experiment.mode') == 'train'
  make_plan('eval', f'configs/{name}.gin')
  assert gin.query_parameter('experiment.mode') == 'test'


def test_original_hiro_eval_command_line_in_process():
  p = make_plan('eval', '--checkpoint_dir', 'exp/train', '--eval_dir', 'exp/eval', '--config_file=configs/base_uvf.gin',
                '--config_file=configs/eval_uvf.gin', '--config_file=context/configs/hiro_orig.gin',
                '--config_file=context/configs/ant_maze.gin')
  assert (p.program, p.train_dir, p.eval_dir, p.output_dir) == ('eval', Path('exp/train'), Path('exp/eval'),
                                                                Path('exp/eval'))
  assert gin.query_parameter('%EVAL_MODES') == ['eval1', 'eval2', 'eval3']


def test_original_hiro_train_command_line_maps_flags_to_gin():
  p = make_plan('train', '--train_dir=/tmp/x/train', '--config_file=./configs/base_uvf.gin',
                '--config_file=./configs/train_uvf.gin', '--config_file=./context/configs/hiro_xy.gin',
                '--config_file=./context/configs/ant_push_multi.gin', '--summarize_gradients=False',
                '--save_interval_secs=60', '--save_summaries_secs=1', '--master=local', '--goal_sample_strategy=FuN',
                "--params=train_uvf.batch_size = 7", '--params=SUBGOAL_DIM = 2')
  assert p.system.key == 'uvf'
  assert p.train_dir == Path('/tmp/x/train')
  assert p.config_name == 'base_uvf+train_uvf+hiro_xy+ant_push_multi'
  assert gin.query_parameter('train_uvf.batch_size') == 7
  assert gin.query_parameter('train_uvf.save_interval_secs') == 60
  assert gin.query_parameter('train_uvf.save_summaries_secs') == 1
  assert gin.query_parameter('train_uvf.summarize_gradients') is False
  assert gin.query_parameter('train_uvf.goal_sample_strategy') == 'FuN'
  assert gin.query_parameter('create_maze_env.env_name') == 'AntPush'


def test_gin_param_overrides_config_and_params_in_order():
  make_plan('train', 'configs/ant_maze.gin', '--params=train_uvf.batch_size = 7', '--gin_param',
            'train_uvf.batch_size = 9')
  assert gin.query_parameter('train_uvf.batch_size') == 9


# The original experiment.py flags and defaults, typed from deepmind/scalable_agent experiment.py L48-90.
IMPALA_FLAG_DEFAULTS = {
    'mode': 'train',
    'test_num_episodes': 10,
    'task': -1,
    'job_name': 'learner',
    'total_environment_frames': int(1e9),
    'num_actors': 4,
    'batch_size': 2,
    'unroll_length': 100,
    'num_action_repeats': 4,
    'seed': 1,
    'entropy_cost': 0.00025,
    'baseline_cost': .5,
    'discounting': .99,
    'reward_clipping': 'abs_one',
    'dataset_path': '',
    'level_name': 'explore_goal_locations_small',
    'width': 96,
    'height': 72,
    'learning_rate': 0.00048,
    'decay': .99,
    'momentum': 0.,
    'epsilon': .1,
}


def test_impala_flags_defaults_and_gin_defaults_are_the_originals(monkeypatch):
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  fv(['run_train.py'])
  assert set(launcher.IMPALA_FLAGS) == set(IMPALA_FLAG_DEFAULTS)
  for name, value in IMPALA_FLAG_DEFAULTS.items():
    assert fv[name].value == value, name
  monkeypatch.setitem(sys.modules, 'deepmind_lab', FAKE_DMLAB)
  make_plan('train', '--logdir=/tmp/agent')  # IMPALA's flags alone: the defaults config
  for name, value in IMPALA_FLAG_DEFAULTS.items():
    assert gin.query_parameter(f'experiment.{name}') == value, name
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  for name, value in IMPALA_FLAG_DEFAULTS.items():
    assert experiment.bound_value(name) == value


def test_impala_flags_are_defined_from_the_one_source_of_their_defaults():
  """The launcher's IMPALA flags, `experiment`'s parameters and `Settings` take their defaults from
  `scalable_agent.original_flags`; the flags also their help and choices."""
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  from scalable_agent import original_flags  # pylint: disable=g-import-not-at-top
  from scalable_agent import settings  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  parameters = inspect.signature(experiment.experiment).parameters
  fields = {f.name: f.default for f in dataclasses.fields(settings.Settings)}
  sources = {**original_flags.ORIGINAL, **original_flags.DISTRIBUTED}
  assert launcher.IMPALA_FLAGS == tuple(original_flags.ORIGINAL)
  for name, source in sources.items():
    assert fv[name].default == source.default and type(fv[name].default) is type(source.default), name
    assert fv[name].help.endswith(source.help), name
    assert getattr(fv[name].parser, 'enum_values', None) == (list(source.choices) if source.choices else None), name
    assert parameters[name].default == source.default, name
    assert name == 'mode' or fields[name] == source.default, name


def test_original_impala_command_line_without_config(monkeypatch):
  monkeypatch.setitem(sys.modules, 'deepmind_lab', FAKE_DMLAB)
  given = {
      'num_actors': 150,
      'level_name': 'dmlab30',
      'batch_size': 32,
      'entropy_cost': 0.0033391318945337044,
      'learning_rate': 0.00031866995608948655,
      'total_environment_frames': 10000000000,
      'reward_clipping': 'soft_asymmetric',
      'unroll_length': 20,
      'width': 84,
      'height': 84,
      'seed': 7,
      'baseline_cost': 0.25,
      'discounting': 0.9,
      'decay': 0.95,
      'momentum': 0.5,
      'epsilon': 0.01,
      'num_action_repeats': 2,
      'dataset_path': '/data/bko',
      'test_num_episodes': 3,
      'task': -1,
      'job_name': 'learner'
  }
  p = make_plan('train', '--logdir=/tmp/agent', *[f'--{k}={v}' for k, v in given.items()])
  assert p.system.key == 'scalable_agent'
  assert p.config_name == 'impala' and p.train_dir == Path('/tmp/agent')
  for name, value in given.items():
    assert gin.query_parameter(f'experiment.{name}') == value, name


def test_impala_flags_over_a_config_file():
  p = make_plan('train', 'configs/impala_atari.gin', '--num_actors=2', '--level_name=atari/breakout')
  assert p.train_dir == Path('runs/impala_atari')
  assert gin.query_parameter('experiment.num_actors') == 2
  assert gin.query_parameter('experiment.level_name') == 'atari/breakout'
  assert gin.query_parameter('experiment.unroll_length') == 20  # from the config


def test_impala_mode_test_through_run_train_is_an_evaluation():
  p = make_plan('train', 'configs/impala_atari.gin', '--mode=test')
  assert p.program == 'eval' and p.output_dir is None


def test_run_eval_refuses_mode_train():
  with pytest.raises(launcher.LaunchError, match='run_eval runs IMPALA in --mode=test'):
    make_plan('eval', 'configs/impala_atari.gin', '--mode=train')


def test_unknown_atari_game_lists_the_games():
  with pytest.raises(launcher.LaunchError, match="unknown Atari level 'atari/pongg'.*pong, "):
    make_plan('train', 'configs/impala_atari.gin', '--level_name=atari/pongg')


def test_missing_deepmind_lab_in_process(monkeypatch):
  monkeypatch.setitem(sys.modules, 'deepmind_lab', None)
  with pytest.raises(launcher.LaunchError, match='deepmind_lab cannot be imported') as info:
    make_plan('train', 'configs/impala_dmlab30.gin')
  assert info.value.exit_code == launcher.EXIT_UNAVAILABLE


@pytest.mark.parametrize('args, message', [
    (['configs/ant_maze.gin', '--num_actors=3'], r'IMPALA flags \(--num_actors\) given with a HIRO configuration'),
    (['configs/impala_atari.gin', '--goal_sample_strategy=FuN'], r'HIRO flags \(--goal_sample_strategy\)'),
    (['configs/ant_maze.gin', '--master=grpc://host:2222'], 'TF1 distributed runtime'),
    (['configs/ant_maze.gin', '--logdir=/tmp/a'], "--logdir is IMPALA's flag"),
    (['configs/impala_atari.gin', '--train_dir=/tmp/a', '--logdir=/tmp/b'], 'conflicting run directories'),
    (['configs/ant_maze.gin', 'configs/impala_atari.gin'], 'binds both HIRO'),
    ([], 'no config given'),
])
def test_usage_errors(args, message):
  with pytest.raises(launcher.LaunchError, match=message):
    make_plan('train', *args)


def test_a_config_binding_no_system_is_refused(tmp_path):
  config = tmp_path / 'nothing.gin'
  config.write_text('create_maze_env.env_name = "AntMaze"\n')
  with pytest.raises(launcher.LaunchError, match='does not say which system to run'):
    make_plan('train', str(config))


def test_gin_syntax_error_names_the_file(tmp_path):
  config = tmp_path / 'broken.gin'
  config.write_text("include 'ant_maze.gin'\ntrain_uvf.batch_size = (1,\n")
  with pytest.raises(launcher.LaunchError, match='gin syntax error in .*broken.gin'):
    make_plan('train', str(config))


def test_missing_include_is_reported(tmp_path):
  config = tmp_path / 'inc.gin'
  config.write_text("include 'uvf/configs/no_such_piece.gin'\n")
  with pytest.raises(launcher.LaunchError, match='Unable to open file: uvf/configs/no_such_piece.gin'):
    make_plan('train', str(config))


# --------------------------------------------------------------------------------------------------------------------
# Run directories.


def _manifest(gin_config='a.b = 1\n', system='uvf'):
  return {'system': system, 'config_name': 'x', 'gin_config': gin_config}


def test_check_run_dir_cases(tmp_path):
  assert launcher.check_run_dir(tmp_path / 'new', _manifest()) is False
  empty = tmp_path / 'empty'
  empty.mkdir()
  assert launcher.check_run_dir(empty, _manifest()) is False

  launcher.write_manifest(tmp_path / 'run', _manifest())
  assert json.loads((tmp_path / 'run' / 'run.json').read_text()) == _manifest()
  assert (tmp_path / 'run' / 'config.gin').read_text() == 'a.b = 1\n'
  assert launcher.check_run_dir(tmp_path / 'run', _manifest()) is True  # same configuration: resume
  with pytest.raises(launcher.LaunchError, match=r'its configuration differs:\n  -a.b = 1\n  \+a.b = 2'):
    launcher.check_run_dir(tmp_path / 'run', _manifest('a.b = 2\n'))
  with pytest.raises(launcher.LaunchError, match='it holds a uvf run, this is a scalable_agent run'):
    launcher.check_run_dir(tmp_path / 'run', _manifest(system='scalable_agent'))

  foreign = tmp_path / 'foreign'
  foreign.mkdir()
  (foreign / 'model.ckpt-1.index').write_text('')
  with pytest.raises(launcher.LaunchError, match='holds no run.json'):
    launcher.check_run_dir(foreign, _manifest())
  (tmp_path / 'file').write_text('')
  with pytest.raises(launcher.LaunchError, match='is not a directory'):
    launcher.check_run_dir(tmp_path / 'file', _manifest())


CALLS = []


def _recording_train(train_dir):
  """Stands in for HIRO's train_uvf (not built yet) to observe what the launcher hands over."""
  CALLS.append((train_dir, gin.query_parameter('train_uvf.batch_size')))


def test_execute_records_the_run_and_resumes_only_the_same_config(tmp_path, monkeypatch, capsys):
  uvf = launcher.SYSTEMS['uvf']
  monkeypatch.setitem(launcher.SYSTEMS, 'uvf',
                      dataclasses.replace(uvf, entry=dict(uvf.entry, train=f'{__name__}:_recording_train')))
  monkeypatch.chdir(tmp_path)
  CALLS.clear()
  fv = flags.FlagValues()
  launcher.define_flags(fv)
  assert launcher.main('train', fv(['run_train.py', 'configs/ant_maze.gin']), fv) == 0
  out = capsys.readouterr().out
  assert 'run_train: HIRO (uvf), config ant_maze (' in out and 'run directory runs/ant_maze (a new run)' in out
  assert 'TensorBoard: tensorboard --logdir runs/ant_maze' in out
  run_dir = tmp_path / 'runs' / 'ant_maze'
  manifest = json.loads((run_dir / 'run.json').read_text())
  assert manifest['system'] == 'uvf' and manifest['config_name'] == 'ant_maze'
  assert manifest['config_files'] == [str(REPO / 'configs' / 'ant_maze.gin')]
  assert 'train_uvf.batch_size = 100' in (run_dir / 'config.gin').read_text()
  assert CALLS == [('runs/ant_maze', 100)]

  fv = flags.FlagValues()
  launcher.define_flags(fv)
  assert launcher.main('train', fv(['run_train.py', 'configs/ant_maze.gin']), fv) == 0
  assert 'run directory runs/ant_maze (resuming the run there)' in capsys.readouterr().out
  assert CALLS == [('runs/ant_maze', 100)] * 2
  assert json.loads((run_dir / 'run.json').read_text()) == manifest

  fv = flags.FlagValues()
  launcher.define_flags(fv)
  argv = fv(['run_train.py', 'configs/ant_maze.gin', '--gin_param=train_uvf.batch_size = 64'])
  assert launcher.main('train', argv, fv) == launcher.EXIT_USAGE
  assert len(CALLS) == 2
  assert json.loads((run_dir / 'run.json').read_text()) == manifest


def test_first_screen_says_what_runs_and_where(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert launcher.first_screen('train', make_plan('train', 'configs/ant_maze.gin')).splitlines() == [
      f'run_train: HIRO (uvf), config ant_maze ({REPO / "configs" / "ant_maze.gin"})',
      '  run directory runs/ant_maze (a new run)', '  TensorBoard: tensorboard --logdir runs/ant_maze'
  ]
  assert launcher.first_screen('eval', make_plan('eval', 'configs/ant_maze.gin')).splitlines()[1:] == [
      '  evaluating the policy checkpoints of runs/ant_maze; results in runs/ant_maze/eval (a new run)',
      '  TensorBoard: tensorboard --logdir runs/ant_maze/eval'
  ]
  assert launcher.first_screen('train', make_plan('train', 'configs/impala_atari.gin')).splitlines()[1:] == [
      '  run directory runs/impala_atari (a new run)', '  TensorBoard: tensorboard --logdir runs/impala_atari'
  ]
  assert launcher.first_screen('eval', make_plan('eval', 'configs/impala_atari.gin')).splitlines()[1:] == [
      '  testing the newest checkpoint of runs/impala_atari; results in runs/impala_atari/test_results-*.json'
  ]
  actor = make_plan('train', 'configs/impala_atari.gin', '--job_name=actor', '--task=0',
                    '--learner_address=localhost:8000')
  assert launcher.first_screen(
      'train', actor).splitlines()[1:] == ['  actor job: nothing is written here (the learner owns the run directory)']


def test_includes_resolve_under_configs_before_the_current_directory(tmp_path, monkeypatch):
  """A file of an included config's relative name in the current directory does not shadow the repository's."""
  shadow = tmp_path / 'uvf' / 'configs' / 'base_uvf.gin'
  shadow.parent.mkdir(parents=True)
  shadow.write_text('this is not gin = (\n')
  monkeypatch.chdir(tmp_path)
  launcher.parse_gin([launcher.resolve_config_path('configs/point_maze.gin')], [])
  assert gin.query_parameter('create_maze_env.env_name') == 'PointMaze'


def test_includes_of_a_config_in_the_current_directory_resolve_under_configs_then_there(tmp_path, monkeypatch):
  """A user's config may include a file of the current directory, which may include the repository's configs; gin's
  messages still name the file and line of a mistake in an included file."""
  (tmp_path / 'mine.gin').write_text("include 'base.gin'\n")
  (tmp_path / 'base.gin').write_text("include 'point_maze.gin'\ntrain_uvf.batch_size = 7\n")
  monkeypatch.chdir(tmp_path)
  launcher.parse_gin([tmp_path / 'mine.gin'], [])
  assert gin.query_parameter('create_maze_env.env_name') == 'PointMaze'
  assert gin.query_parameter('train_uvf.batch_size') == 7
  (tmp_path / 'base.gin').write_text("include 'point_maze.gin'\n\ntrain_uvf.bach_size = 7\n")
  with pytest.raises(launcher.LaunchError, match=r"(?s)bach_size.*base\.gin.*line 3"):
    launcher.parse_gin([tmp_path / 'mine.gin'], [])


def test_importing_the_launcher_changes_no_environment_variable(tmp_path):
  """The environment is set by an explicit call (`prepare_process`, first thing in run_train.py / run_eval.py)."""
  code = ('import os, sys; sys.path.insert(0, %r); before = dict(os.environ); import launcher; '
          'assert dict(os.environ) == before, "import"; os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None); '
          'launcher.prepare_process(); print(os.environ["TF_CPP_MIN_LOG_LEVEL"])' % str(REPO))
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  result = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == '3'
