"""Packaging for tf_objckpt."""

import pathlib
import re

from setuptools import find_packages
from setuptools import setup


def _version():
  """`__version__` of tf_objckpt/version.py, read without importing it."""
  text = (pathlib.Path(__file__).parent / "tf_objckpt" /
          "version.py").read_text()
  return re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE).group(1)


setup(
    name="tf_objckpt",
    version=_version(),
    description=("TensorFlow-compatible object-based checkpointing, "
                 "reimplemented in Python on top of TensorFlow ops."),
    license="Apache-2.0",
    packages=find_packages(include=["tf_objckpt", "tf_objckpt.*"]),
    package_data={"tf_objckpt": ["py.typed"]},  # Type hints (PEP 561).
    python_requires=">=3.9,<3.14",
    install_requires=["tensorflow>=2.15,<2.22", "numpy", "absl-py"],
    extras_require={"test": ["pytest", "pytest-xdist", "tf-keras"]},
    entry_points={"console_scripts": ["tf-objckpt = tf_objckpt.tools.cli:run"]},
)
