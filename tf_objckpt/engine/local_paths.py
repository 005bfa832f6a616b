"""A checkpoint prefix as a path the engine can act on now, and where it is.

A prefix may be a string, bytes, a path-like object or a tensor; inside a
`tf.function` it is known only when ops run. Locks, cleanup and fsync need
it now, and the operating system's calls need it on a local file system.
"""

import os

from tensorflow.python.eager import context
from tensorflow.python.framework import ops


def as_path(prefix):
  """A prefix as a string, or None if it is only known when ops run."""
  if isinstance(prefix, os.PathLike):
    prefix = os.fspath(prefix)
  if isinstance(prefix, bytes):
    prefix = prefix.decode()
  if isinstance(prefix, str):
    if not context.executing_eagerly() and ops.inside_function():
      return None  # Written when the function runs, not now.
    return prefix
  if context.executing_eagerly() and hasattr(prefix, "numpy"):
    return as_path(prefix.numpy())
  return None


def local_path(path):
  """`path` as an `os` path if it is on a local file system, else None."""
  if path.startswith("file://"):
    return path[len("file://"):]
  if "://" in path:
    return None
  return path
