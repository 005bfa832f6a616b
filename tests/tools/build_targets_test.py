"""Checks that Bazel's BUILD files declare every file the code and tests use.

- Each `tf_objckpt/**/*.py` is in the srcs of a `py_library` of the root
  `BUILD`, whose deps hold the libraries of the modules it imports.
- Each `tests/**/*_test.py` is in the srcs of a `py_test` of `tests/BUILD`
  that runs it, and every other `tests/**/*.py` (test helpers) in the srcs of
  a `py_library` of `tests/BUILD`.
- Each example, script and benchmark is in a target of the root `BUILD`.
- Each `py_test` has in its runfiles every module of tf_objckpt, and every
  file of the repository that the Python it runs names: paths from the
  repository root (`os.path.join(ROOT, "setup.py")`, `ROOT / "README.md"`,
  `"tf_objckpt/*.py"`), helper modules it imports, and what a test module's
  `files_read()` returns (for files it learns at run time, such as the
  docs' links).

Bazel misses some of this by itself: the venv's editable install supplies
modules missing from the runfiles to the processes tests start. The failure
messages say what to add where.

Covers: no module; it checks the BUILD files.
"""

import ast
import functools
import glob
import importlib.util
import os
import re

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("", "tests")
RULES = ("filegroup", "py_binary", "py_library", "py_test")
# Files of the root package that a target of the root BUILD must declare.
DECLARED_FILES = ("examples/*.py", "scripts/*", "benchmarks/*.py")
_GLOB_CHARACTERS = re.compile(r"[*?[]")


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
    found = {
        os.path.relpath(path, base)
        for pattern in patterns
        for path in glob.glob(os.path.join(base, pattern), recursive=True)
    }
    return sorted(found - set(exclude))

  namespace = {kind: rule(kind) for kind in RULES}
  namespace.update(glob=build_glob,
                   load=lambda *args, **kwargs: None,
                   package=lambda **kwargs: None,
                   exports_files=lambda *args, **kwargs: None)
  path = os.path.join(ROOT, package, "BUILD")
  with open(path) as f:
    exec(compile(f.read(), path, "exec"), namespace)  # pylint: disable=exec-used
  return targets


def _all_targets():
  return [target for package in PACKAGES for target in _evaluate(package)]


def _index(targets):
  """`{(package, name): (kind, attributes)}` of `targets`."""
  return {
      (attrs["package"], attrs["name"]): (kind, attrs) for kind, attrs in targets
  }


def _files(pattern):
  return sorted(
      os.path.relpath(path, ROOT)
      for path in glob.glob(os.path.join(ROOT, pattern), recursive=True)
      if os.path.isfile(path))


def _undeclared(files, targets, package, kinds=("py_library",)):
  """The files in the srcs of no target of `package` of one of `kinds`."""
  declared = {
      src for kind, attrs in targets
      if kind in kinds and attrs["package"] == package for src in attrs["srcs"]
  }
  return [f for f in files if f not in declared]


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


def _modules():
  return _files("tf_objckpt/**/*.py")


def _py_tests(index):
  return sorted(key for key, (kind, _) in index.items() if kind == "py_test")


def _reachable(index, key, attributes):
  """`{key: attributes}` of `key` and what it reaches through `attributes`."""
  found, pending = {}, [key]
  while pending:
    key = pending.pop()
    if key in found or key not in index:
      continue
    found[key] = attrs = index[key][1]
    pending.extend(
        _target(attrs["package"], label)
        for attribute in attributes
        for label in attrs.get(attribute, []))
  return found


def _runfiles(index, key):
  """The workspace files Bazel gives target `key` when it runs."""
  files = set()
  for attrs in _reachable(index, key, ("data", "deps")).values():
    files.update(attrs["srcs"])
    files.update(
        _path(attrs["package"], label)
        for label in attrs.get("data", [])
        if _target(attrs["package"], label) not in index)
  return files


def _python_run(index, key):
  """The test code target `key` runs: its and its deps' srcs, conftest.py.

  tf_objckpt's modules name no files of the repository; they are left out.
  """
  sources = {
      src for attrs in _reachable(index, key, ("deps",)).values()
      for src in attrs["srcs"]
  }
  sources.update(
      f for f in _runfiles(index, key) if os.path.basename(f) == "conftest.py")
  return sorted(f for f in sources
                if f.endswith(".py") and not f.startswith("tf_objckpt/"))


def _existing_files(name):
  """The files of the repository that `name`, a path or pattern, names.

  Patterns count only with a folder ("examples/*.py"): a bare "*" may
  mean anything.
  """
  if not name or re.search(r"\s|^/|\.\.", name):
    return []
  if _GLOB_CHARACTERS.search(name):
    return _files(name) if "/" in name else []
  return [name] if os.path.isfile(os.path.join(ROOT, name)) else []


def _is_string(node):
  return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _trailing_strings(parts):
  """The string constants ending `parts` (AST nodes)."""
  strings = []
  for part in reversed(parts):
    if not _is_string(part):
      break
    strings.insert(0, part)
  return strings


def _operands(node):
  """The operands of a chain of `/` (pathlib joins), left to right."""
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
    return _operands(node.left) + [node.right]
  return [node]


def _joined_parts(node):
  """The string constants a path join (`os.path.join`, `/`) ends with."""
  if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
      node.func.attr == "join"):
    return _trailing_strings(node.args)
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
    return _trailing_strings(_operands(node))
  return []


def _path_strings(tree):
  """Strings the Python `tree` may name repository paths with.

  These are the constant ends of path joins, and other string constants.
  """
  joins = [_joined_parts(node) for node in ast.walk(tree)]
  joined = {id(part) for parts in joins for part in parts}
  return ({"/".join(part.value for part in parts) for parts in joins if parts} |
          {
              node.value
              for node in ast.walk(tree)
              if _is_string(node) and id(node) not in joined
          })


def _imported_files(tree, source):
  """The files of the modules `tree` imports, by their module names.

  Top-level names are looked up as pytest imports tests' helpers (from the
  file's folder and tests/); dotted tf_objckpt names as package modules.
  """
  names = {
      alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
      for alias in node.names
  }
  from_names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      from_names.add(node.module)
      names.update(f"{node.module}.{alias.name}" for alias in node.names)
  candidates = set()
  for name in names | from_names:
    path = name.replace(".", "/")
    candidates.add(f"{path}.py")
    if name in names:
      candidates.add(f"{path}/__init__.py")
    if "." not in name:
      candidates.update((os.path.join(os.path.dirname(source),
                                      f"{path}.py"), f"tests/{path}.py"))
  return {
      f for f in candidates - {source} if os.path.isfile(os.path.join(ROOT, f))
  }


def _declared_reads(tree, source):
  """What `files_read()` of the module `source` returns, if it has one."""
  if not any(
      isinstance(node, ast.FunctionDef) and node.name == "files_read"
      for node in tree.body):
    return set()
  spec = importlib.util.spec_from_file_location(
      "_files_read_" + re.sub(r"\W", "_", source), os.path.join(ROOT, source))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return {f for name in module.files_read() for f in _existing_files(name)}


@functools.lru_cache(maxsize=None)
def _files_named(source):
  """The repository files that the Python file `source` reads or imports."""
  with open(os.path.join(ROOT, source)) as f:
    tree = ast.parse(f.read(), source)
  files = {f for name in _path_strings(tree) for f in _existing_files(name)}
  return files | _imported_files(tree, source) | _declared_reads(tree, source)


def _unmet_reads(index, key):
  """`(file, source)`: files target `key` reads that its runfiles lack."""
  runfiles = _runfiles(index, key)
  return [(f, source)
          for source in _python_run(index, key)
          for f in sorted(_files_named(source))
          if f not in runfiles]


def _label(index, package, path):
  """`(label, attribute)`: how a target of `package` gets the file `path`.

  A Python file comes through the deps on its py_library, another file
  through the data, from a filegroup holding it or as itself.
  """
  owners = sorted(
      (kind != "py_library", kind, key)
      for key, (kind, attrs) in index.items()
      if kind in ("filegroup", "py_library") and path in attrs["srcs"])
  if owners:
    _, kind, (owner_package, name) = owners[0]
    label = (f":{name}"
             if owner_package == package else f"//{owner_package}:{name}")
    return label, "deps" if kind == "py_library" else "data"
  if package and path.startswith(package + "/"):
    return os.path.relpath(path, package), "data"
  return f"//:{path}", "data"


def _where_to_add(index, key, path):
  """What to add to the BUILD so that target `key` has the file `path`."""
  label, attribute = _label(index, key[0], path)
  advice = f'add "{label}" to its {attribute}'
  if label == f"//:{path}":
    advice += f', and "{path}" to exports_files in BUILD'
  return advice


def _library_of(index, module):
  """The key of the root py_library whose srcs hold `module`."""
  for key, (kind, attrs) in index.items():
    if kind == "py_library" and key[0] == "" and module in attrs["srcs"]:
      return key
  return None


def _missing_imports(index):
  """Messages for root py_libraries that do not depend on what they import."""
  problems = []
  for key, (kind, attrs) in sorted(index.items()):
    if kind != "py_library" or key[0]:
      continue
    deps = {_target("", label) for label in attrs.get("deps", [])}
    for src in attrs["srcs"]:
      with open(os.path.join(ROOT, src)) as f:
        tree = ast.parse(f.read(), src)
      for module in sorted(_imported_files(tree, src)):
        library = _library_of(index, module)
        if library not in (None, key) and library not in deps:
          problems.append(f'BUILD: py_library "{key[1]}" imports {module}: add '
                          f'":{library[1]}" to its deps')
  return problems


def _modules_out_of_reach(index, modules):
  """Messages for modules some py_test cannot import from its runfiles."""
  lacking = {}
  for key in _py_tests(index):
    runfiles = _runfiles(index, key)
    for module in modules:
      if module not in runfiles:
        lacking.setdefault(module, []).append(key[1])
  libraries = {module: _library_of(index, module) for module in lacking}
  reach = {
      library: _reachable(index, library, ("deps",))
      for library in set(libraries.values())
      if library
  }
  # One library to add for each group of modules: one no other reaches.
  tops = sorted(library for library in reach if not any(library in reach[other]
                                                        for other in reach
                                                        if other != library))
  groups = {}
  for module, library in sorted(libraries.items()):
    top = next((t for t in tops if library in reach[t]), None)
    groups.setdefault(top, []).append(module)
  problems = []
  for top, group in groups.items():
    tests = sorted({test for module in group for test in lacking[module]})
    label = (f'"//:{top[1]}"'
             if top else "their py_libraries (to be declared in BUILD)")
    problems.append(
        f"{', '.join(group)} missing from the runfiles of {len(tests)} "
        f"py_tests ({', '.join(tests[:3])}...): add {label} to the deps of "
        '"test_support" in tests/BUILD, which every py_test depends on')
  return problems


def _reads_out_of_reach(index):
  """Messages for files py_tests read that their runfiles lack."""
  unmet = {}
  for key in _py_tests(index):
    for path, source in _unmet_reads(index, key):
      advice = _where_to_add(index, key, path)
      unmet.setdefault((key[1], source, advice), []).append(path)
  return [
      f'tests/BUILD: py_test "{name}" reads {", ".join(paths)} (named '
      f"in {source}), which Bazel does not give it: {advice}"
      for (name, source, advice), paths in unmet.items()
  ]


def _without(targets, key, attribute, label):
  """`targets`, with `label` taken out of `attribute` of target `key`."""
  changed = []
  for kind, attrs in targets:
    if (attrs["package"], attrs["name"]) == key:
      attrs = dict(attrs)
      attrs[attribute] = [
          value for value in attrs.get(attribute, []) if value != label
      ]
    changed.append((kind, attrs))
  return changed


def test_every_module_has_a_py_library_in_the_root_package():
  modules = _modules()
  assert "tf_objckpt/__init__.py" in modules
  missing = _undeclared(modules, _all_targets(), "")
  assert not missing, (
      "modules without a py_library in BUILD (add one each, named after "
      "the module): %s" % missing)


def test_every_py_library_depends_on_the_modules_it_imports():
  problems = _missing_imports(_index(_all_targets()))
  assert not problems, "\n".join(problems)


def test_every_example_script_and_benchmark_is_declared():
  files = [f for pattern in DECLARED_FILES for f in _files(pattern)]
  assert "examples/keras3_from_v1_saver.py" in files
  missing = _undeclared(files, _all_targets(), "", RULES)
  assert not missing, (
      "files in no target of BUILD (add each to the srcs of the filegroup "
      "of its folder): %s" % missing)


def test_every_test_file_has_a_py_test():
  test_files = _test_files()
  assert "tests/tools/build_targets_test.py" in test_files
  assert all(f.count("/") == 2 for f in test_files), (
      "test files belong in a folder of tests/: %s" % test_files)
  missing = _not_run(test_files, _all_targets())
  assert not missing, (
      "test files without a py_test in tests/BUILD (add one each, as "
      "CONTRIBUTING.md shows): %s" % missing)


def test_every_test_helper_has_a_py_library():
  helpers = _helpers()
  assert "tests/testlib/__init__.py" in helpers
  missing = _undeclared(helpers, _all_targets(), "tests")
  assert not missing, (
      'test helpers in no py_library of tests/BUILD (add each to the srcs '
      'of "test_support"): %s' % missing)


def test_every_py_test_can_import_every_module():
  problems = _modules_out_of_reach(_index(_all_targets()), _modules())
  assert not problems, "\n".join(problems)


def test_every_py_test_has_the_files_it_reads():
  problems = _reads_out_of_reach(_index(_all_targets()))
  assert not problems, "\n".join(problems)


def test_test_file_basenames_are_unique():
  names = [os.path.basename(f) for f in _test_files()]
  assert len(names) == len(set(names))


def test_a_missing_target_is_reported():
  """The checks above notice files that no target covers."""
  targets = _all_targets()
  assert _not_run(["tests/eager/new_test.py"],
                  targets) == ["tests/eager/new_test.py"]
  assert _undeclared(["tests/new_helper.py"], targets,
                     "tests") == ["tests/new_helper.py"]
  assert _undeclared(["tf_objckpt/new.py"], targets,
                     "") == ["tf_objckpt/new.py"]
  assert _undeclared(["examples/new.py"], targets, "",
                     RULES) == ["examples/new.py"]
  # A test file that is a source of its py_test but not passed to the
  # shared runner does not count as run.
  unrun = [(kind, dict(attrs, args=[])) for kind, attrs in targets]
  assert _not_run(["tests/tools/build_targets_test.py"],
                  unrun) == ["tests/tools/build_targets_test.py"]


def test_a_file_missing_from_a_py_test_is_reported():
  """Files and modules left out of a target's runfiles are named."""
  targets = _all_targets()
  without_setup = _index(
      _without(targets, ("tests", "cli_test"), "data", "//:setup.py"))
  assert ('tests/BUILD: py_test "cli_test" reads setup.py (named in '
          "tests/cli/cli_test.py), which Bazel does not give it: add "
          '"//:setup.py" to its data, and "setup.py" to exports_files in '
          "BUILD") in _reads_out_of_reach(without_setup)
  without_examples = _index(
      _without(targets, ("tests", "docs_test"), "data", "//:examples"))
  assert ("examples/keras3_from_v1_saver.py",
          "tests/tools/docs_test.py") in (_unmet_reads(without_examples,
                                                       ("tests", "docs_test")))
  assert any('"docs_test" reads examples/' in problem and
             problem.endswith('add "//:examples" to its data')
             for problem in _reads_out_of_reach(without_examples))
  without_cli = _index(
      _without(targets, ("tests", "test_support"), "deps", "//:main"))
  # One library to add for both: the one that reaches the other.
  [problem] = _modules_out_of_reach(
      without_cli, ["tf_objckpt/__main__.py", "tf_objckpt/tools/cli.py"])
  assert re.fullmatch(
      r"tf_objckpt/__main__.py, tf_objckpt/tools/cli.py missing from the "
      r"runfiles of \d+ py_tests "
      r'\(.*\): add "//:main" to the deps of "test_support" in tests/BUILD, '
      "which every py_test depends on", problem), problem
  without_import = _index(
      _without(targets, ("", "object_checkpoints"), "deps",
               ":async_checkpoint"))
  assert ('BUILD: py_library "object_checkpoints" imports '
          'tf_objckpt/engine/async_checkpoint.py: add ":async_checkpoint" to '
          'its deps' in _missing_imports(without_import))


def test_targets_are_unique_and_their_sources_and_deps_exist():
  targets = _all_targets()
  names = [(attrs["package"], attrs["name"]) for _, attrs in targets]
  assert len(names) == len(set(names))
  for _, attrs in targets:
    for dep in attrs.get("deps", []):
      assert _target(attrs["package"], dep) in names, ("%s: unknown dep %s" %
                                                       (attrs["name"], dep))
    for src in attrs["srcs"] + [attrs.get("main", "BUILD")]:
      assert os.path.exists(os.path.join(ROOT, src)), src
