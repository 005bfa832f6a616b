"""The README's Python snippets run as written, each in a fresh process."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

_ROOT = pathlib.Path(__file__).absolute().parents[2]
_SNIPPETS = re.findall(r"```python\n(.*?)```",
                       (_ROOT / "README.md").read_text(), re.DOTALL)


def test_readme_has_snippets():
  assert len(_SNIPPETS) >= 3


@pytest.mark.parametrize("snippet", _SNIPPETS,
                         ids=[f"snippet{i}" for i in range(len(_SNIPPETS))])
def test_snippet_runs(snippet, tmp_path):
  snippet = snippet.replace("/tmp/tour", str(tmp_path))
  env = dict(os.environ, PYTHONPATH=str(_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", snippet], env=env,
                          capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
