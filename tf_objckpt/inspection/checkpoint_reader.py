"""TensorFlow's checkpoint readers, ours: `load_checkpoint` and its kin.

`load_checkpoint` takes what users type for a checkpoint: a directory (its
latest checkpoint), a prefix, or one of the checkpoint's own files
(`.index`, `.data-*`), which TensorFlow's reader misreads (an empty
checkpoint, or a `DataLossError`). It returns a `CheckpointReader` with
the methods of TensorFlow's, opened through the I/O engine. Errors keep
TensorFlow's types and name the checkpoint, the data file and the key; a
value that cannot be read is a `DataLossError` (TensorFlow raises a bare
`OpError` or an `IndexError`). `load_variable` also takes an object path
(`model/layer/kernel`) of an object-based checkpoint, found as
`tf-objckpt inspect --values` finds it (`checkpoint_listing`).
"""

import operator
import os
from typing import Any, List, Tuple, Union

from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.util import compat

from tf_objckpt.engine import reads
from tf_objckpt.inspection import checkpoint_listing


def resolve_save_path(ckpt_dir_or_file) -> str:
  """The prefix of the checkpoint `ckpt_dir_or_file` names.

  Args:
    ckpt_dir_or_file: A directory (its latest checkpoint), a checkpoint
      prefix or one of its files, as a string, bytes or path-like object.

  Raises:
    ValueError: If a directory names no checkpoint (TensorFlow's type).
    NotFoundError: If there is no checkpoint at the path.
  """
  path = compat.as_str(os.fspath(ckpt_dir_or_file))
  try:
    prefix, _ = checkpoint_listing.find_checkpoint(path)
  except checkpoint_listing.NoCheckpointError as e:
    if file_io.is_directory(path):
      raise ValueError(str(e)) from None
    if file_io.get_matching_files(path):
      return path  # A pattern TensorFlow's reader expands (V1 shards).
    raise errors.NotFoundError(None, None, str(e)) from None
  except errors.DataLossError as e:
    # Data files without their index: TensorFlow finds no checkpoint.
    raise errors.NotFoundError(None, None, e.message) from None
  return prefix


class CheckpointReader:
  """Reads one checkpoint: TensorFlow's `CheckpointReader` methods.

  Other attributes of TensorFlow's reader are its own, reached through
  this one.
  """

  def __init__(self, prefix, reader):
    """Reads checkpoint `prefix` through `reader` (`reads.open_reader`)."""
    self._prefix = prefix
    self._reader = reader

  def __getattr__(self, name):
    if name == "_reader":  # Not set yet (a copy being made, say).
      raise AttributeError(name)
    return getattr(self._reader, name)

  def get_variable_to_shape_map(self):
    """`{key: shape as a list}` of every value."""
    return self._reader.get_variable_to_shape_map()

  def get_variable_to_dtype_map(self):
    """`{key: tf.DType}` of every value."""
    return self._reader.get_variable_to_dtype_map()

  def has_tensor(self, tensor_str) -> bool:
    return self._reader.has_tensor(tensor_str)

  def get_tensor(self, tensor_str):
    """The value of key `tensor_str`, as numpy.

    Raises:
      NotFoundError: If the checkpoint has no such key; the message names
        the closest keys and object paths (or the key an object path
        names).
      DataLossError: If the value cannot be read (a missing, truncated or
        corrupt data file), naming the data file and the key.
    """
    key = compat.as_str(tensor_str)
    try:
      return self._reader.get_tensor(key)
    except (errors.OpError, IndexError) as e:
      if not self._reader.has_tensor(key):
        raise self._missing(key) from None
      raise self._unreadable(key, e) from e

  def key_of(self, name) -> str:
    """The key of `name`: a key, or the object path of one value.

    Raises:
      NotFoundError: If `name` names no value (see `get_tensor`).
    """
    if self._reader.has_tensor(name):
      return name
    listing = self._listing()
    keys = listing.keys_at(name)
    if len(keys) == 1:
      return keys[0]
    raise self._not_found(name, listing, keys)

  def _missing(self, key):
    """The `NotFoundError` for a key the checkpoint lacks."""
    listing = self._listing()
    return self._not_found(key, listing, listing.keys_at(key))

  def _not_found(self, name, listing, keys):
    """"Key <name> not found in checkpoint <path>.", then what to try.

    `keys` are those `name` names as an object path in `listing`: one
    (which `load_variable()` takes), several, or none (the closest names).
    """
    message = f"Key {name} not found in checkpoint {self._prefix!r}."
    if len(keys) == 1:
      message += (f" {name!r} is the object path of key {keys[0]!r}, which "
                  "load_variable() also takes.")
    else:
      message += listing.not_one_value(name, keys)
    return errors.NotFoundError(None, None, message)

  def _unreadable(self, key, error):
    """`error`, from reading `key`, retold naming the key and its file.

    TensorFlow's reader reports damage as a bare `OpError` or an
    `IndexError`: those become `DataLossError`s; other types are kept.
    """
    error_type = type(error)
    if error_type in (errors.OpError, IndexError):
      error_type = errors.DataLossError
    return error_type(
        None, None,
        f"Failed to read key {key!r} from checkpoint {self._prefix!r}: it "
        f"{reads.why_unreadable(self._prefix, key, error)}")

  def _listing(self):
    """The checkpoint's listing, to find object paths (only when needed)."""
    return checkpoint_listing.open_listing(self._prefix, strict=False)


def load_checkpoint(
    ckpt_dir_or_file: Union[str, os.PathLike]) -> CheckpointReader:
  """A `CheckpointReader` of the checkpoint `ckpt_dir_or_file` names.

  Args:
    ckpt_dir_or_file: A directory (its latest checkpoint), a checkpoint
      prefix, or one of the checkpoint's files (`.index`, `.data-*`).

  Raises:
    ValueError: If a directory names no checkpoint.
    NotFoundError: If there is no checkpoint at the path.
    DataLossError: If the checkpoint's index is damaged.
  """
  prefix = resolve_save_path(ckpt_dir_or_file)
  return CheckpointReader(prefix, reads.open_reader(prefix))


def list_variables(
    ckpt_dir_or_file: Union[str, os.PathLike]) -> List[Tuple[str, list]]:
  """`(key, shape)` of every value of a checkpoint, sorted by key."""
  # Sorted by the keys alone: comparing the pairs takes three times longer.
  return sorted(
      load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items(),
      key=operator.itemgetter(0))


def load_variable(ckpt_dir_or_file: Union[str, os.PathLike], name: str) -> Any:
  """The value of `name` in a checkpoint, as numpy.

  Args:
    ckpt_dir_or_file: As for `load_checkpoint`.
    name: A checkpoint key (a trailing ":0" is ignored, as TensorFlow does)
      or, in an object-based checkpoint, the object path of one value
      (`model/layer/kernel`).

  Raises:
    NotFoundError: If `name` names no value; the message names the closest
      keys and object paths.
    DataLossError: If the value cannot be read.
  """
  if name.endswith(":0"):
    name = name[:-2]
  reader = load_checkpoint(ckpt_dir_or_file)
  return reader.get_tensor(reader.key_of(name))
