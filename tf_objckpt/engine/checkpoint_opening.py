"""Opening a checkpoint for reading, and saying which file is damaged.

`open_reader` opens a checkpoint's index and `read_object_graph` reads its
object graph; their errors name the checkpoint and the damaged file.
`why_unreadable` says why one value cannot be read, in `verify`'s words
when its data file is missing or short, and `damage_named` retells an
error of a read that ran in a session (which names no key) naming the
value and its file. `reads.CheckpointValues` reads the values.
"""

from google.protobuf import message
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.framework import errors
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training import py_checkpoint_reader

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import state_file


def open_reader(save_path):
  """Opens a checkpoint's index, raising TensorFlow errors that name it.

  Raises:
    NotFoundError: If no checkpoint exists at `save_path`.
    DataLossError: If the checkpoint's files are corrupt.
  """
  try:
    return py_checkpoint_reader.NewCheckpointReader(save_path)
  except errors.NotFoundError as e:
    raise errors.NotFoundError(
        None, None, f"Error when restoring from checkpoint or SavedModel at "
        f"{save_path!r}: no checkpoint found there ({e.message}). Please "
        "double-check that the path is correct. You may be missing the "
        "checkpoint suffix (e.g. the '-1' in 'path/to/ckpt-1').") from e
  except (errors.OpError, IndexError) as e:
    # An index whose footer points past its end fails as an IndexError.
    index_file = bundle_index.index_file_name(save_path)
    if bundle_index.file_size(index_file) is None:
      # The reader read `save_path` itself, as a V1 checkpoint file.
      text = (f"Cannot read a checkpoint at {save_path!r}: there is no "
              f"index file {index_file!r} (a V2 checkpoint's), and "
              f"{save_path!r} itself is not a readable V1 checkpoint (it is "
              "damaged, or not a checkpoint at all)")
    else:
      text = (f"The checkpoint at {save_path!r} is corrupt or truncated and "
              f"cannot be read: its index file {index_file!r} is damaged")
    raise errors.DataLossError(None, None,
                               f"{text}: {getattr(e, 'message', e)}") from e


def read_object_graph(reader, save_path):
  """The checkpoint's TrackableObjectGraph, or None if it is name-based.

  Raises:
    DataLossError: If the stored object graph is damaged.
  """
  if not reader.has_tensor(tf_base.OBJECT_GRAPH_PROTO_KEY):
    return None
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  # A damaged file fails as a bad proto, or in the reader: as an OpError, or
  # as an IndexError for a read past the end of a truncated data file.
  try:
    proto.ParseFromString(reader.get_tensor(tf_base.OBJECT_GRAPH_PROTO_KEY))
  except (message.DecodeError, errors.OpError, IndexError) as e:
    raise errors.DataLossError(
        None, None, f"The object graph stored in checkpoint {save_path!r} "
        f"{why_unreadable(save_path, tf_base.OBJECT_GRAPH_PROTO_KEY, e)}"
    ) from e
  return proto


def open_object_based(save_path, needed_for):
  """A reader of `save_path` and its object graph, for an object-based use.

  Args:
    save_path: The checkpoint's prefix.
    needed_for: What needs the object graph, ending the error's sentence.

  Raises:
    NotFoundError: If no checkpoint exists at `save_path`.
    ValueError: If the checkpoint is name-based (has no object graph).
  """
  with state_file.explaining_directories(save_path):
    reader = open_reader(save_path)
  proto = read_object_graph(reader, save_path)
  if proto is None:
    raise ValueError(
        f"Checkpoint {save_path!r} has no object graph (a name-based "
        f"checkpoint of the v1 Saver): {needed_for}.")
  return reader, proto


def why_unreadable(save_path, key, error):
  """Why the value of `key` cannot be read, after what names the value.

  A value in a data file that is missing or too short is "cannot be read:
  '<data file>': data file is truncated: N bytes, the index places values
  up to byte M (<TensorFlow's words>)", `verify`'s words
  (`bundle_index.DataFileDamage`); otherwise "cannot be read (data file
  '<data file>'): <TensorFlow's words>".
  """
  text = getattr(error, "message", None) or str(error)
  try:
    index = bundle_index.read_bundle_index(save_path)
  except errors.OpError:
    return f"cannot be read: {text}"
  data_file = index.data_file_of(key)
  if data_file is None:
    return f"cannot be read: {text}"
  damage = index.damaged_data_files().get(data_file)
  if damage is not None and key in index.unreadable_keys(damage):
    return f"cannot be read: {data_file!r}: {damage} ({text})"
  return f"cannot be read (data file {data_file!r}): {text}"


def damage_named(save_path, error):
  """`error`, from a read of `save_path`, retold naming the damaged file.

  Graph-mode reads fail inside a session with TensorFlow's message, which
  says neither the key nor the file. This finds them, reading the
  checkpoint's values one at a time (only after a failure), and returns a
  `DataLossError` whose message names both (TensorFlow's reads raise
  `OutOfRangeError` for a truncated data file): the error type of damage,
  as eager reads give it. `error` itself if no single value fails to read.
  """
  try:
    reader = open_reader(save_path)
  except errors.OpError as open_error:
    return type(open_error)(error.node_def, error.op, open_error.message)
  for key in sorted(reader.get_variable_to_shape_map()):
    try:
      reader.get_tensor(key)
    except (errors.OpError, IndexError) as e:
      return errors.DataLossError(
          error.node_def, error.op,
          f"Failed to read values from checkpoint {save_path!r}: checkpoint "
          f"key {key!r} {why_unreadable(save_path, key, e)}")
  return error
