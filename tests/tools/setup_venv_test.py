"""`scripts/setup_venv.sh` makes its environment with any supported Python.

The real script runs, its environment put in a temporary folder
(`TF_OBJCKPT_VENV`), with a PATH holding only fake Pythons (and the two
tools the script uses): each fake answers `--version`, and `-m venv DIR`
makes DIR/bin/python, which records the pip command it is given and does
nothing else. So no environment is made and nothing is downloaded; what is
checked is which Python the script chooses for the pinned TensorFlow (3.11
first, any other it supports, `python3` if it is one, `PYTHON=` if set), and
that an environment already installed for the same pins is left alone.

Covers: no module; it checks scripts/setup_venv.sh.
"""

import os
import shutil
import subprocess

import pytest

import testlib as tl

_SCRIPT = os.path.join(tl.REPO_ROOT, "scripts", "setup_venv.sh")
_PINS_2_15 = "tensorflow==2.15.1 tf-keras==2.15.1 keras==2.15.0"

# A Python: says its version, and makes a venv whose python logs its pip.
_FAKE_PYTHON = """#!/bin/bash
if [ "$1" = "--version" ]; then echo "Python {version}.0"; exit 0; fi
if [ "$1" = "-c" ]; then echo "{version}"; exit 0; fi
if [ "$1 $2" = "-m venv" ]; then
  /bin/mkdir -p "$3/bin"
  /bin/cat > "$3/bin/python" <<EOF
#!/bin/bash
echo "\\$*" >> "$3/pip.log"
EOF
  /bin/chmod +x "$3/bin/python"
  echo "{name}" > "$3/made_by"
  exit 0
fi
exit 1
"""


def _path_with(tmp_path, pythons):
  """A PATH folder with the fake `pythons` ({name: version}) and tools."""
  folder = tmp_path / "bin"
  folder.mkdir()
  for tool in ("cat", "dirname"):
    os.symlink(shutil.which(tool), folder / tool)
  for name, version in pythons.items():
    fake = folder / name
    fake.write_text(_FAKE_PYTHON.format(version=version, name=name))
    fake.chmod(0o755)
  return str(folder)


def _setup(tmp_path, pythons, **env):
  venv = tmp_path / "venv"
  result = subprocess.run(["/bin/bash", _SCRIPT],
                          capture_output=True,
                          text=True,
                          timeout=60,
                          check=False,
                          env={
                              "PATH": _path_with(tmp_path, pythons),
                              "TF_OBJCKPT_VENV": str(venv),
                              **env
                          })
  made_by = venv / "made_by"
  return result, made_by.read_text().strip() if made_by.exists() else None


@pytest.mark.parametrize("pythons,chosen", [
    ({
        "python3.12": "3.12",
        "python3.11": "3.11"
    }, "python3.11"),
    ({
        "python3.12": "3.12"
    }, "python3.12"),
    ({
        "python3.13": "3.13",
        "python3": "3.13"
    }, "python3.13"),
    ({
        "python3": "3.11"
    }, "python3"),
])
def test_any_python_the_pinned_tensorflow_supports(tmp_path, pythons, chosen):
  result, made_by = _setup(tmp_path, pythons)
  assert result.returncode == 0, result.stderr
  assert made_by == chosen
  assert f"making {tmp_path / 'venv'} with {chosen}" in result.stderr
  pip = (tmp_path / "venv" / "pip.log").read_text()
  assert pip.startswith("-m pip install -q -e .[test] tensorflow==2.21.0")


@pytest.mark.parametrize("pythons,pins", [({
    "python3": "3.9"
}, None), ({
    "python3.12": "3.12"
}, _PINS_2_15)])
def test_no_supported_python_is_an_error_naming_them(tmp_path, pythons, pins):
  env = {"TF_OBJCKPT_PINS": pins} if pins else {}
  result, made_by = _setup(tmp_path, pythons, **env)
  assert result.returncode != 0
  assert made_by is None
  assert "install one of Python" in result.stderr
  assert "3.11 is the one tested" in result.stderr


def test_python_named_by_the_user(tmp_path):
  result, made_by = _setup(tmp_path, {
      "python3.11": "3.11",
      "mypython": "3.12"
  },
                           PYTHON="mypython")
  assert result.returncode == 0, result.stderr
  assert made_by == "mypython"


def test_an_installed_environment_is_kept(tmp_path):
  result, _ = _setup(tmp_path, {"python3.11": "3.11"})
  assert result.returncode == 0, result.stderr
  (tmp_path / "bin").rename(tmp_path / "first_bin")
  (tmp_path / "venv" / "made_by").unlink()
  result, made_by = _setup(tmp_path, {"python3.12": "3.12"})
  assert result.returncode == 0, result.stderr
  assert made_by is None  # Not made again,
  assert result.stderr == ""
  pip = (tmp_path / "venv" / "pip.log").read_text().splitlines()
  assert len(pip) == 1  # nor installed again.
