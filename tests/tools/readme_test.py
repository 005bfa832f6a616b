"""The README's snippets and commands run as shown and print what it shows.

How the README shows code, and how this test reads it:

- A ```python block is a snippet. It runs in a new Python process, from a
  new empty working directory, with a clean `/tmp/tour` (one that does not
  exist yet), and must exit with status 0.
- A ```text block right after a snippet (nothing but blank lines between)
  is what the snippet prints, on stdout and stderr together. A snippet
  without one must print nothing: no Python warnings, no `WARNING:` lines
  from a logger.
- In a ```sh block, a line `$ COMMAND` is a command the test runs, and the
  lines up to the next `$ ` line are its output, on stdout and stderr
  together (its exit status is not checked: `diff` exits 1 when it finds
  differences). `tf-objckpt` runs as `python -m tf_objckpt`. A block of
  commands runs from a new empty working directory and a clean `/tmp/tour`,
  after the last snippet before it (with only prose, that snippet's output
  and files between), which writes the checkpoints the commands read.
- A ```python block whose first line is a comment naming a Python file
  (`# train.py`) is that file, not a snippet: it is written into the
  working directory of the next block of commands, which may run it.
- Lines of an ```sh block without `$ ` are set-up instructions, not run:
  the two set-up scripts, benchmarks and `pip`. The tool's own commands
  are never shown that way.

Outputs are compared after normalising: the clean `/tmp/tour` is a fresh
temporary directory (so tests may run side by side), shown as `/tmp/tour`;
durations (`0.11 s`, `12 ms`) are shown as `<time>`; TensorFlow's C++ log
lines (its start-up notices about CPU features, CUDA and oneDNN), which
Python code cannot silence, are left out.

Covers: no module; it checks the README.
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys
import typing

import pytest

_ROOT = pathlib.Path(__file__).absolute().parents[2]
_TOUR = "/tmp/tour"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_PROMPT = "$ "
_SHELLS = ("sh", "shell", "console", "bash")
_FILE_NAME = re.compile(r"# ([\w.-]+\.py)\n")
# TensorFlow's C++ logging (absl/glog lines and their continuations).
_NATIVE_LOG = re.compile(
    r"^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] .*"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r" are written to STDERR"
    r"|To enable the following instructions: .*)$")
_DURATION = re.compile(r"\b\d+(?:\.\d+)? (?:s|ms)\b")


class Snippet(typing.NamedTuple):
  code: str
  output: str


class Commands(typing.NamedTuple):
  setup: typing.Optional[Snippet]
  files: typing.Dict[str, str]  # Name: text, written before the commands.
  commands: typing.List[typing.Tuple[str, str]]  # (command, its output)


def _blocks(text):
  """`(language, body, text before it since the previous block)`."""
  blocks, end = [], 0
  for match in _BLOCK.finditer(text):
    blocks.append((match.group(1), match.group(2), text[end:match.start()]))
    end = match.end()
  return blocks


def _transcript(body):
  """`[(command, output)]` of the `$ ` lines of a shell block."""
  commands = []
  for line in body.splitlines():
    if line.startswith(_PROMPT):
      commands.append((line[len(_PROMPT):], []))
    elif commands:
      commands[-1][1].append(line)
  return [(command, "\n".join(output)) for command, output in commands]


def _readme(text):
  """The snippets and blocks of commands of a README's `text`, in order."""
  snippets, command_blocks = [], []
  last_snippet, files = None, {}
  blocks = _blocks(text)
  for i, (language, body, _) in enumerate(blocks):
    file_name = _FILE_NAME.match(body)
    if language == "python" and file_name:
      files[file_name.group(1)] = body
    elif language == "python":
      follows = blocks[i + 1] if i + 1 < len(blocks) else None
      output = ""
      if follows and follows[0] == "text" and not follows[2].strip():
        output = follows[1]
      last_snippet = Snippet(body, output)
      snippets.append(last_snippet)
    elif language in _SHELLS:
      commands = _transcript(body)
      if commands:
        command_blocks.append(Commands(last_snippet, files, commands))
      last_snippet, files = None, {}
  return snippets, command_blocks


def _setup_lines(text):
  """Lines of shell blocks shown without `$ `: set-up, not run."""
  return [
      line.strip() for language, body, _ in _blocks(text)
      if language in _SHELLS and not _transcript(body)
      for line in body.splitlines() if line.strip()
  ]


_README = (_ROOT / "README.md").read_text()
_SNIPPETS, _COMMAND_BLOCKS = _readme(_README)


def _normalized(output, tour):
  lines = [
      line for line in output.replace(tour, _TOUR).splitlines()
      if not _NATIVE_LOG.match(line)
  ]
  return _DURATION.sub("<time>", "\n".join(lines)).strip()


def _run(argv, cwd, tour, **kwargs):
  """Runs `argv` in `cwd`; returns its exit status and normalized output."""
  env = dict(os.environ, PYTHONPATH=str(_ROOT), PYTHONUNBUFFERED="1")
  result = subprocess.run(argv,
                          cwd=cwd,
                          env=env,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT,
                          text=True,
                          check=False,
                          timeout=600,
                          **kwargs)
  return result.returncode, _normalized(result.stdout, tour)


def _run_snippet(snippet, tmp_path):
  """Runs a snippet with a clean tour; returns its status and output."""
  tour = str(tmp_path / "tour")
  cwd = tmp_path / "cwd"
  cwd.mkdir(exist_ok=True)
  return _run([sys.executable, "-c",
               snippet.code.replace(_TOUR, tour)], cwd, tour)


def _argv(command, tour):
  argv = shlex.split(command.replace(_TOUR, tour))
  if argv[0] == "tf-objckpt":
    return [sys.executable, "-m", "tf_objckpt", *argv[1:]]
  if argv[0] in ("python", "python3"):
    return [sys.executable, *argv[1:]]
  return argv


def _check_commands(block, tmp_path):
  """Runs a block of commands after its set-up; compares their output."""
  tour, cwd = str(tmp_path / "tour"), tmp_path / "cwd"
  cwd.mkdir()
  if block.setup:
    status, output = _run_snippet(block.setup, tmp_path)
    assert status == 0, output[-3000:]
  for name, text in block.files.items():
    (cwd / name).write_text(text.replace(_TOUR, tour))
  for command, shown in block.commands:
    _, output = _run(_argv(command, tour), cwd, tour)
    assert output == _normalized(shown, _TOUR), command


def test_readme_has_snippets_and_commands():
  assert len(_SNIPPETS) >= 10
  assert sum(bool(snippet.output) for snippet in _SNIPPETS) >= 2
  assert _COMMAND_BLOCKS and _COMMAND_BLOCKS[0].setup


def test_the_tool_is_only_shown_in_commands_that_run():
  assert not [
      line for line in _setup_lines(_README)
      if "tf-objckpt" in line or "-m tf_objckpt" in line
  ]


_CONVENTIONS = """
Set up:

```sh
pip install .
```

```python
print("saved")
```

```text
saved
```

```python
# train.py
print("trained")
```

Then:

```sh
$ python train.py
trained
$ python -c "print('/tmp/tour/ckpt', 'took 0.5 s')"
/tmp/tour/ckpt took 0.25 s
```

```python
import tf_objckpt
```
"""


def test_conventions_are_read_and_run_as_documented(tmp_path):
  snippets, command_blocks = _readme(_CONVENTIONS)
  assert snippets == [
      Snippet('print("saved")\n', "saved\n"),
      Snippet("import tf_objckpt\n", "")
  ]
  assert command_blocks == [
      Commands(snippets[0], {"train.py": '# train.py\nprint("trained")\n'},
               [("python train.py", "trained"),
                ("""python -c "print('/tmp/tour/ckpt', 'took 0.5 s')\"""",
                 "/tmp/tour/ckpt took 0.25 s")])
  ]
  assert _setup_lines(_CONVENTIONS) == ["pip install ."]
  _check_commands(command_blocks[0], tmp_path)


@pytest.mark.parametrize("snippet",
                         _SNIPPETS,
                         ids=[f"snippet{i}" for i in range(len(_SNIPPETS))])
def test_snippet_prints_what_the_readme_shows(snippet, tmp_path):
  status, output = _run_snippet(snippet, tmp_path)
  assert status == 0, output[-3000:]
  assert output == _normalized(snippet.output, _TOUR)


@pytest.mark.parametrize(
    "block",
    _COMMAND_BLOCKS,
    ids=[f"commands{i}" for i in range(len(_COMMAND_BLOCKS))])
def test_commands_print_what_the_readme_shows(block, tmp_path):
  _check_commands(block, tmp_path)
