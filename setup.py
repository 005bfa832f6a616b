"""Packaging for tf_objckpt."""

from setuptools import find_packages
from setuptools import setup

setup(
    name="tf_objckpt",
    version="0.1.0",
    description=("TensorFlow-compatible object-based checkpointing, "
                 "reimplemented in Python on top of TensorFlow ops."),
    license="Apache-2.0",
    packages=find_packages(include=["tf_objckpt", "tf_objckpt.*"]),
    python_requires=">=3.9,<3.14",
    install_requires=["tensorflow>=2.15,<2.22", "numpy", "absl-py"],
    extras_require={"test": ["pytest", "tf-keras"]},
    entry_points={"console_scripts": ["tf-objckpt = tf_objckpt.cli:run"]},
)
