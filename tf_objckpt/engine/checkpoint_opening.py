"""Opening a checkpoint for reading, and saying which file is damaged.

`open_reader` opens a checkpoint's index and `read_object_graph` reads its
object graph; their errors name the checkpoint and the damaged file.
`in_data_file` names the data file of a value that cannot be read, and
`damage_named` retells an error of a read that ran in a session (which
names no key) naming the value and its file. `reads.CheckpointValues`
reads the values.
"""

from google.protobuf import message
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.framework import errors
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training import py_checkpoint_reader

from tf_objckpt.engine import bundle_index


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
        None, None,
        f"The object graph stored in checkpoint {save_path!r} is corrupt"
        f"{in_data_file(save_path, tf_base.OBJECT_GRAPH_PROTO_KEY)}: "
        f"{e}") from e
  return proto


def in_data_file(save_path, key):
  """' (data file <name>)' for the file holding `key`, or '' if unknown."""
  try:
    data_file = bundle_index.read_bundle_index(save_path).data_file_of(key)
  except errors.OpError:
    return ""
  return "" if data_file is None else f" (data file {data_file!r})"


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
          f"key {key!r}{in_data_file(save_path, key)} cannot be read: {e}")
  return error
