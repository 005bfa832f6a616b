"""One INFO line per save and restore: path, values, bytes, seconds and MB/s.

Logged through TensorFlow's logger, so nothing is printed unless its
verbosity is INFO or lower (`tf.get_logger().setLevel("INFO")`); the numbers
are gathered only then, so saves and restores cost nothing more otherwise.
"""

import collections
import time

from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.util import compat

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import reads


def start():
  """The time a save or restore starts, for `saved` and `restored`."""
  return time.perf_counter()


def enabled():
  """Whether to log: at INFO, and not while tracing a function.

  A traced function saves and restores when it runs, not when traced.
  """
  return (logging.get_verbosity() <= logging.INFO and not ops.inside_function())


def _log(action, save_path, values, num_bytes, started):
  seconds = max(time.perf_counter() - started, 1e-9)
  logging.info("%s %s: %d values, %d bytes in %.3f s (%.1f MB/s)", action,
               save_path, values, num_bytes, seconds, num_bytes / seconds / 1e6)


def saved(save_path, started):
  """Logs a save that wrote the checkpoint `save_path` (not a tensor).

  The object graph counts in the bytes, not in the values.
  """
  if not enabled() or not isinstance(save_path, (str, bytes)):
    return
  save_path = compat.as_str(save_path)
  values = num_bytes = 0  # V1 checkpoints have no index to count from.
  if file_io.file_exists(bundle_index.index_file_name(save_path)):
    header, keys = bundle_index.read_header_and_keys(save_path)
    values = len(keys) - (tf_base.OBJECT_GRAPH_PROTO_KEY in keys)
    # Data files hold their entries back to back: their sizes are the bytes.
    num_bytes = sum(
        bundle_index.file_size(
            bundle_index.data_file_name(save_path, shard, header.num_shards)) or
        0 for shard in range(header.num_shards))
  _log("Saved checkpoint", save_path, values, num_bytes, started)


def restored(save_path, started, values):
  """Logs a restore from `save_path` of `values` ((shape, dtype) pairs)."""
  if not enabled() or not isinstance(save_path, (str, bytes)):
    return
  # Values mostly share a few shapes and dtypes: size each kind once.
  kinds = collections.Counter(
      (tuple(shape or ()), dtype) for shape, dtype in values)
  num_bytes = sum(count * reads.byte_size(shape, dtypes.as_dtype(dtype))
                  for (shape, dtype), count in kinds.items())
  _log("Restored checkpoint", compat.as_str(save_path), len(values), num_bytes,
       started)


def restored_status(save_path, started, status):
  """Logs a restore, counting what its load status reports as restored."""
  if enabled():
    restored(save_path, started, status.restored_shapes_and_dtypes())
