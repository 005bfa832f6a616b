"""A checkpoint prefix as a path the engine can act on now, and where it is.

A prefix may be a string, bytes, a path-like object or a tensor; inside a
`tf.function` it is known only when ops run. Locks, cleanup and fsync need
it now, and the operating system's calls need it on a local file system.
"""

import os

from tensorflow.python.eager import context
from tensorflow.python.framework import ops


def as_path(file_path):
  """A prefix as a string, or None if it is only known when ops run."""
  if isinstance(file_path, os.PathLike):
    file_path = os.fspath(file_path)
  if isinstance(file_path, bytes):
    file_path = file_path.decode()
  if isinstance(file_path, str):
    if not context.executing_eagerly() and ops.inside_function():
      return None  # Written when the function runs, not now.
    return file_path
  if context.executing_eagerly() and hasattr(file_path, "numpy"):
    return as_path(file_path.numpy())
  return None


def local_path(file_path):
  """`file_path` as an `os` path if it is on a local file system, else None."""
  if file_path.startswith("file://"):
    return file_path[len("file://"):]
  if "://" in file_path:
    return None
  return file_path
