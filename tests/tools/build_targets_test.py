"""Checks that Bazel's BUILD files have a target for every module and test.

Each `tf_objckpt/*.py` must be in the srcs of a `py_library` of the root
`BUILD`; each `tests/**/*_test.py` in the srcs of a `py_test` of
`tests/BUILD` that runs it; and every other `tests/**/*.py` (test helpers)
in the srcs of a `py_library` of `tests/BUILD`.
"""

import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PACKAGES = ("", "tests")
RULES = ("filegroup", "py_binary", "py_library", "py_test")


def _path(package, name):
  """The workspace-relative path of `name`, a file label of `package`."""
  if name.startswith("//"):
    package, name = name[2:].split(":")
  return os.path.join(package, name) if package else name


def _target(package, label):
  """`(package, name)` of a target label written in `package`."""
  if label.startswith("//"):
    return tuple(label[2:].split(":"))
  return package, label.lstrip(":")


def _evaluate(package):
  """Runs a package's BUILD file with stub rules; returns its targets.

  Each target is `(kind, attributes)`, with `package` among the attributes
  and `srcs` and `main` as workspace-relative paths.
  """
  targets = []

  def rule(kind):
    def record(**attrs):
      attrs["package"] = package
      attrs["srcs"] = [_path(package, src) for src in attrs.get("srcs", [])]
      if "main" in attrs:
        attrs["main"] = _path(package, attrs["main"])
      targets.append((kind, attrs))
    return record

  def build_glob(patterns, exclude=()):
    base = os.path.join(ROOT, package)
    found = {os.path.relpath(path, base) for pattern in patterns
             for path in glob.glob(os.path.join(base, pattern),
                                   recursive=True)}
    return sorted(found - set(exclude))

  namespace = {kind: rule(kind) for kind in RULES}
  namespace.update(
      glob=build_glob,
      load=lambda *args, **kwargs: None,
      package=lambda **kwargs: None,
      exports_files=lambda *args, **kwargs: None)
  path = os.path.join(ROOT, package, "BUILD")
  with open(path) as f:
    exec(compile(f.read(), path, "exec"), namespace)  # pylint: disable=exec-used
  return targets


def _all_targets():
  return [target for package in PACKAGES for target in _evaluate(package)]


def _files(pattern):
  return sorted(os.path.relpath(path, ROOT) for path in
                glob.glob(os.path.join(ROOT, pattern), recursive=True))


def _without_library(files, targets, package):
  """The files in no `py_library` of `package`."""
  in_libraries = {src for kind, attrs in targets
                  if kind == "py_library" and attrs["package"] == package
                  for src in attrs["srcs"]}
  return [f for f in files if f not in in_libraries]


def _not_run(test_files, targets):
  """The test files no `py_test` of tests/BUILD runs.

  A py_test runs a file that is in its srcs and is its main, or that its
  main (the shared pytest runner) is given in its args.
  """
  runs = set()
  for kind, attrs in targets:
    if kind == "py_test" and attrs["package"] == "tests":
      for src in attrs["srcs"]:
        if attrs.get("main", src) == src or src in attrs.get("args", []):
          runs.add(src)
  return [f for f in test_files if f not in runs]


def _test_files():
  return _files("tests/**/*_test.py")


def _helpers():
  return [f for f in _files("tests/**/*.py") if not f.endswith("_test.py")]


def test_every_module_has_a_py_library_in_the_root_package():
  modules = _files("tf_objckpt/*.py")
  assert "tf_objckpt/__init__.py" in modules
  missing = _without_library(modules, _all_targets(), "")
  assert not missing, "modules without a py_library: %s" % missing


def test_every_test_file_has_a_py_test():
  test_files = _test_files()
  assert "tests/tools/build_targets_test.py" in test_files
  assert all(f.count("/") == 2 for f in test_files), (
      "test files belong in a folder of tests/: %s" % test_files)
  missing = _not_run(test_files, _all_targets())
  assert not missing, "test files without a py_test: %s" % missing


def test_every_test_helper_has_a_py_library():
  helpers = _helpers()
  assert "tests/testlib.py" in helpers
  missing = _without_library(helpers, _all_targets(), "tests")
  assert not missing, "test helpers without a py_library: %s" % missing


def test_test_file_basenames_are_unique():
  names = [os.path.basename(f) for f in _test_files()]
  assert len(names) == len(set(names))


def test_a_missing_target_is_reported():
  """The checks above notice files that no target covers."""
  targets = _all_targets()
  assert _not_run(["tests/eager/new_test.py"], targets) == [
      "tests/eager/new_test.py"]
  assert _without_library(["tests/new_helper.py"], targets, "tests") == [
      "tests/new_helper.py"]
  assert _without_library(["tf_objckpt/new.py"], targets, "") == [
      "tf_objckpt/new.py"]
  # A test file that is a source of its py_test but not passed to the
  # shared runner does not count as run.
  unrun = [(kind, dict(attrs, args=[])) for kind, attrs in targets]
  assert _not_run(["tests/tools/build_targets_test.py"], unrun) == [
      "tests/tools/build_targets_test.py"]


def test_targets_are_unique_and_their_sources_and_deps_exist():
  targets = _all_targets()
  names = [(attrs["package"], attrs["name"]) for _, attrs in targets]
  assert len(names) == len(set(names))
  for _, attrs in targets:
    for dep in attrs.get("deps", []):
      assert _target(attrs["package"], dep) in names, (
          "%s: unknown dep %s" % (attrs["name"], dep))
    for src in attrs["srcs"] + [attrs.get("main", "BUILD")]:
      assert os.path.exists(os.path.join(ROOT, src)), src
