"""Checks that Bazel's BUILD files have a target for every module and test.

Each `tf_objckpt/*.py` must be in the srcs of a `py_library`, each
`tests/*_test.py` in the srcs of a `py_test` that runs it, and every other
`tests/*.py` (test helpers) in the srcs of a `py_library`.
"""

import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_targets():
  """Evaluates the BUILD files with stub rules; returns (kind, attrs) pairs."""
  targets = []

  def rule(kind):
    def record(**attrs):
      targets.append((kind, attrs))
    return record

  for package in ("", "tests"):
    path = os.path.join(ROOT, package, "BUILD")
    if not os.path.exists(path):
      continue

    def label_path(name, package=package):
      return name if not package else package + "/" + name

    def build_glob(patterns, exclude=(), package=package):
      base = os.path.join(ROOT, package)
      found = {os.path.relpath(p, base) for pattern in patterns
               for p in glob.glob(os.path.join(base, pattern))}
      return sorted(found - set(exclude))

    namespace = {
        "py_library": rule("py_library"),
        "py_test": rule("py_test"),
        "py_binary": rule("py_binary"),
        "glob": build_glob,
        "load": lambda *args, **kwargs: None,
        "package": lambda **kwargs: None,
        "exports_files": lambda *args, **kwargs: None,
        "filegroup": rule("filegroup"),
    }
    before = len(targets)
    with open(path) as f:
      code = compile(f.read(), path, "exec")
    exec(code, namespace)  # pylint: disable=exec-used
    for i in range(before, len(targets)):
      kind, attrs = targets[i]
      attrs = dict(attrs)
      attrs["srcs"] = [label_path(s.lstrip(":")) for s in attrs.get("srcs", [])]
      attrs["args"] = [label_path(a) for a in attrs.get("args", [])]
      attrs["package"] = package
      targets[i] = (kind, attrs)
  return targets


def _files(pattern):
  return sorted(os.path.relpath(p, ROOT)
                for p in glob.glob(os.path.join(ROOT, pattern)))


def test_build_files_define_targets():
  kinds = {kind for kind, _ in _load_targets()}
  assert {"py_library", "py_test"} <= kinds


def test_every_module_has_a_py_library():
  modules = _files("tf_objckpt/*.py")
  assert "tf_objckpt/__init__.py" in modules
  in_libraries = {s for kind, attrs in _load_targets()
                  if kind == "py_library" for s in attrs["srcs"]}
  missing = [m for m in modules if m not in in_libraries]
  assert not missing, "modules without a py_library: %s" % missing


def test_every_test_helper_has_a_py_library():
  helpers = [f for f in _files("tests/*.py") if not f.endswith("_test.py")]
  in_libraries = {s for kind, attrs in _load_targets()
                  if kind == "py_library" for s in attrs["srcs"]}
  missing = [h for h in helpers if h not in in_libraries]
  assert not missing, "test helpers without a py_library: %s" % missing


def test_every_test_file_has_a_py_test():
  test_files = _files("tests/*_test.py")
  assert "tests/build_targets_test.py" in test_files
  runs = {}
  for kind, attrs in _load_targets():
    if kind == "py_test":
      for src in attrs["srcs"]:
        runs[src] = attrs
  missing = [t for t in test_files if t not in runs]
  assert not missing, "test files without a py_test: %s" % missing
  for test_file in test_files:
    attrs = runs[test_file]
    # A pytest file is run by the shared main, which must be told which file.
    if attrs.get("main") and attrs["main"] != test_file:
      assert test_file in attrs["args"], attrs["name"]


def test_targets_are_unique_and_sources_exist():
  targets = _load_targets()
  names = [(attrs["package"], attrs["name"]) for _, attrs in targets]
  assert len(names) == len(set(names))
  defined = {":" + name for package, name in names if not package}
  for kind, attrs in targets:
    if kind not in ("py_library", "py_test"):
      continue
    for dep in attrs.get("deps", []):
      if dep.startswith(":"):
        assert dep in defined, "%s: unknown dep %s" % (attrs["name"], dep)
    for src in attrs["srcs"] + ([attrs["main"]] if attrs.get("main") else []):
      assert os.path.exists(os.path.join(ROOT, src)), src
