"""tf_objckpt installs beside a TensorFlow that is already there, untouched.

For the lowest and the highest TensorFlow that setup.py supports, a fresh
virtual environment holds that TensorFlow and what pip installs with it,
nothing else. Into it go, one after the other, the wheel `pip wheel` builds
and the source tree (`pip install DIR`), as README says. Each time pip
must add tf_objckpt and change nothing else (`pip freeze`), and the
installed copy must answer `--version` as a console script and through
`python -m` (without importing TensorFlow), give `__version__`, and write a
checkpoint that TensorFlow restores. Everything runs outside the repository,
with no PYTHONPATH, so only the installed copy can be imported. Uninstalling
it must give back the environment as it was.

Installing TensorFlow takes minutes (pip downloads and unpacks it), so each
version's environment is made once, in `.venvs/install-tf-VERSION` of the
checkout, and its `pip freeze` recorded there. Tests work in a copy made of
hard links (seconds; pip and Python replace files rather than write into
them, so the copy never changes the original), checked against the record
before anything is installed. Remove the folder to make it again.

Covers: tf_objckpt, tf_objckpt.version, tf_objckpt.__main__.
"""

import email.parser
import fcntl
import os
import pathlib
import re
import shutil
import subprocess
import sys
import typing
import zipfile

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
import pytest

import tf_objckpt

pytestmark = pytest.mark.install

_ROOT = pathlib.Path(__file__).absolute().parents[2]
# The checkout itself, also under Bazel, whose runfiles link to its files.
_CHECKOUT = pathlib.Path(os.path.realpath(_ROOT / "setup.py")).parent
_CACHE = _CHECKOUT / ".venvs"
_TENSORFLOWS = ("2.15.1", "2.21.0")
_FREEZE_RECORD = "tf_only_freeze.txt"

_ROUND_TRIP = """
import sys
import numpy as np
import tensorflow as tf
import tf_objckpt

print(tf_objckpt.__version__)
print(tf_objckpt.__file__)
values = np.arange(6, dtype=np.float32).reshape(2, 3)
path = tf_objckpt.Checkpoint(v=tf.Variable(values)).save(sys.argv[1])
for restorer in (tf.train.Checkpoint, tf_objckpt.Checkpoint):
  restored = tf.Variable(tf.zeros([2, 3]))
  restorer(v=restored).restore(path).assert_consumed()
  np.testing.assert_array_equal(restored.numpy(), values)
print(path)
"""


class Environment(typing.NamedTuple):
  path: pathlib.Path
  freeze: str  # `pip freeze` with TensorFlow alone.

  @property
  def python(self):
    return self.path / "bin" / "python"


def _run(argv, cwd):
  """Runs `argv` in `cwd` with no PYTHONPATH; fails the test if it fails."""
  env = {
      name: value
      for name, value in os.environ.items()
      if name not in ("PYTHONPATH", "VIRTUAL_ENV")
  }
  env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([str(arg) for arg in argv],
                          cwd=cwd,
                          env=env,
                          capture_output=True,
                          text=True,
                          timeout=1800,
                          check=False)
  assert result.returncode == 0, (
      f"{argv} exited {result.returncode}:\n{result.stdout[-2000:]}\n"
      f"{result.stderr[-4000:]}")
  return result


def _freeze(python):
  return _run([python, "-m", "pip", "freeze", "--all"], cwd="/").stdout


def _packages(freeze):
  """`{normalized name: freeze line}`."""
  return {
      re.split(r"[=@ ]", line, maxsplit=1)[0].lower().replace("_", "-"): line
      for line in freeze.splitlines()
  }


def _tensorflow_only(version):
  """The cached environment holding TensorFlow `version` and its deps only.

  Made on first use (a lock keeps concurrent tests from making it twice);
  the record of its `pip freeze` is written last, so a half-made one is
  made again.
  """
  path = _CACHE / f"install-tf-{version}"
  record = path / _FREEZE_RECORD
  _CACHE.mkdir(exist_ok=True)
  with open(_CACHE / f"install-tf-{version}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not record.exists():
      shutil.rmtree(path, ignore_errors=True)
      _run([sys.executable, "-m", "venv", path], cwd=_CACHE)
      python = Environment(path, "").python
      _run([python, "-m", "pip", "install", "-q", f"tensorflow=={version}"],
           cwd=_CACHE)
      (path / "freeze.tmp").write_text(_freeze(python))
      os.replace(path / "freeze.tmp", record)
  return Environment(path, record.read_text())


def _source_tree(directory):
  """A copy of what pip builds the package from: setup.py and tf_objckpt/.

  pip builds in the tree it is given, leaving build/ and an .egg-info
  there; in a copy they do not reach the checkout.
  """
  directory.mkdir()
  shutil.copy(_ROOT / "setup.py", directory)
  shutil.copytree(_ROOT / "tf_objckpt",
                  directory / "tf_objckpt",
                  ignore=shutil.ignore_patterns("__pycache__"))
  return directory


@pytest.fixture(name="wheel", scope="module")
def _wheel(tmp_path_factory):
  """The wheel `pip wheel --no-deps` builds of the package."""
  work = tmp_path_factory.mktemp("wheel")
  _run([
      sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
      "--no-build-isolation", "-w", work / "dist",
      _source_tree(work / "source")
  ],
       cwd=work)
  [built] = (work / "dist").glob("*.whl")
  return built


@pytest.fixture(name="environment",
                scope="module",
                params=_TENSORFLOWS,
                ids=[f"tf-{version}" for version in _TENSORFLOWS])
def _environment(request, tmp_path_factory):
  """A hard-linked copy of the TensorFlow-only environment of a version."""
  cached = _tensorflow_only(request.param)
  assert f"tensorflow=={request.param}" in cached.freeze.splitlines()
  assert "tf-objckpt" not in _packages(cached.freeze)
  path = tmp_path_factory.mktemp("environment") / cached.path.name
  shutil.copytree(cached.path, path, symlinks=True, copy_function=os.link)
  copy = Environment(path, cached.freeze)
  assert _freeze(copy.python) == cached.freeze, (
      f"{cached.path} changed after it was made: remove it to make it again")
  yield copy
  shutil.rmtree(path)


def _check_the_installed_package(environment, work):
  """The installed copy's commands, version and a checkpoint round trip."""
  version = f"tf-objckpt {tf_objckpt.__version__}\n"
  command = environment.path / "bin" / "tf-objckpt"
  assert _run([command, "--version"], cwd=work).stdout == version
  module = _run(
      [environment.python, "-X", "importtime", "-m", "tf_objckpt", "--version"],
      cwd=work)
  assert module.stdout == version
  imported = [
      line.rsplit("|", 1)[-1].strip()
      for line in module.stderr.splitlines()
      if line.startswith("import time:")
  ]
  assert "tf_objckpt.version" in imported
  assert not [name for name in imported if name.startswith("tensorflow")]
  printed = _run([environment.python, "-c", _ROUND_TRIP, work / "ckpt"],
                 cwd=work).stdout.splitlines()
  assert printed[0] == tf_objckpt.__version__
  site_packages = os.path.realpath(environment.path / "lib")
  assert os.path.realpath(printed[1]).startswith(site_packages), printed[1]
  assert "OK" in _run([command, "verify", printed[2]], cwd=work).stdout


def _check_install(environment, target, work):
  """Installs `target` (a wheel or source tree), checks it, uninstalls it."""
  assert _freeze(environment.python) == environment.freeze
  _run([environment.python, "-m", "pip", "install", "-q", target], cwd=work)
  try:
    changes = sorted(
        set(environment.freeze.splitlines()) ^
        set(_freeze(environment.python).splitlines()))
    assert list(_packages("\n".join(changes))) == ["tf-objckpt"], changes
    _check_the_installed_package(environment, work)
  finally:
    _run([
        environment.python, "-m", "pip", "uninstall", "-q", "-y", "tf_objckpt"
    ],
         cwd=work)
  assert _freeze(environment.python) == environment.freeze
  assert not (environment.path / "bin" / "tf-objckpt").exists()


def _setup_specifiers():
  """setup.py's version specifiers: `(tensorflow, python)`."""
  setup = (_ROOT / "setup.py").read_text()
  return (SpecifierSet(re.search(r'"tensorflow([<>=][^"]+)"', setup).group(1)),
          SpecifierSet(re.search(r'python_requires="([^"]+)"', setup).group(1)))


def _minors_away(version, minors):
  major, minor = (int(number) for number in version.split(".")[:2])
  return f"{major}.{minor + minors}.0"


def test_the_versions_are_the_ends_of_the_supported_range():
  supported, _ = _setup_specifiers()
  lowest, highest = _TENSORFLOWS[0], _TENSORFLOWS[-1]
  assert lowest in supported and highest in supported
  assert _minors_away(lowest, -1) not in supported
  assert _minors_away(highest, 1) not in supported


def test_the_wheel_holds_every_module_the_command_and_the_requirements(wheel):
  assert wheel.name == f"tf_objckpt-{tf_objckpt.__version__}-py3-none-any.whl"
  modules = sorted([
      path.relative_to(_ROOT).as_posix()
      for path in (_ROOT / "tf_objckpt").rglob("*.py")
  ] + ["tf_objckpt/py.typed"])  # The package's type hints are for users too.
  assert "tf_objckpt/version.py" in modules
  assert "tf_objckpt/engine/reads.py" in modules
  info = f"tf_objckpt-{tf_objckpt.__version__}.dist-info"
  with zipfile.ZipFile(wheel) as archive:
    names = archive.namelist()
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    metadata = email.parser.Parser().parsestr(
        archive.read(f"{info}/METADATA").decode())
  assert sorted(
      name for name in names if name.startswith("tf_objckpt/")) == modules
  assert "tf-objckpt = tf_objckpt.tools.cli:run" in entry_points.splitlines()
  requires = {
      requirement.name: requirement.specifier
      for requirement in map(Requirement, metadata.get_all("Requires-Dist"))
  }
  tensorflow, python = _setup_specifiers()
  assert requires["tensorflow"] == tensorflow
  assert SpecifierSet(metadata["Requires-Python"]) == python


def test_the_wheel_installs_beside_tensorflow(environment, wheel, tmp_path):
  _check_install(environment, wheel, tmp_path)


def test_the_source_tree_installs_beside_tensorflow(environment, tmp_path):
  _check_install(environment, _source_tree(tmp_path / "source"), tmp_path)
