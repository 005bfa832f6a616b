"""What differs between the TensorFlow versions we support (2.15 to 2.21).

TensorFlow 2.16 added `Graph.as_graph_def(use_pybind11_proto=)`, which
`graph_def_with_shapes` uses where it exists, and checkpoint sharding: the
module `tensorflow.python.checkpoint.sharding` (`ShardableTensor` and the
sharding policies) and two `CheckpointOptions` arguments,
`experimental_sharding_callback` and `experimental_skip_slot_variables`.
On 2.15 `sharding_util` is None, `check_options_arguments` turns those
arguments into TensorFlow's `TypeError` for an unexpected keyword, with the
version that added it and the version installed, and
`check_sharding_callbacks` raises the same `TypeError` for our sharding
policies. TensorFlow 2.16's `MaxShardSizePolicy` cuts values into other
slices than later versions' (`MAX_SHARD_SIZE_CUTS_AS_2_16`); ours cuts
them as the installed version's does.
"""

import inspect

import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_options
from tensorflow.python.framework import ops

try:
  from tensorflow.python.checkpoint.sharding import sharding_policies  # pylint: disable=g-import-not-at-top
  from tensorflow.python.checkpoint.sharding import sharding_util  # pylint: disable=g-import-not-at-top
except ImportError:  # TensorFlow 2.15.
  sharding_policies = sharding_util = None

# Whether TensorFlow's `MaxShardSizePolicy` is 2.16's, whose cuts later
# versions changed (they have a `MaxShardSizePartitioner`).
MAX_SHARD_SIZE_CUTS_AS_2_16 = sharding_policies is not None and not hasattr(
    sharding_policies.MaxShardSizePolicy, "MaxShardSizePartitioner")

# `CheckpointOptions` arguments of later TensorFlows: the version adding each.
_LATER_OPTIONS = {
    "experimental_sharding_callback": "2.16",
    "experimental_skip_slot_variables": "2.16",
}

_GRAPH_DEF_ARGUMENTS = ({
    "use_pybind11_proto": True
} if "use_pybind11_proto" in inspect.signature(
    ops.Graph.as_graph_def).parameters else {})

_OPTIONS_PARAMETERS = frozenset(
    inspect.signature(checkpoint_options.CheckpointOptions.__init__).parameters)


def check_options_arguments(arguments):
  """Raises TypeError for options this TensorFlow's `CheckpointOptions` lacks.

  Args:
    arguments: The keyword arguments given to `CheckpointOptions`.

  Raises:
    TypeError: If an argument is one that a later TensorFlow added, naming
      it, the version that added it and the version installed.
  """
  for name in arguments:
    if name in _LATER_OPTIONS and name not in _OPTIONS_PARAMETERS:
      raise TypeError(
          f"CheckpointOptions.__init__() got an unexpected keyword argument "
          f"'{name}': it needs TensorFlow {_LATER_OPTIONS[name]} or newer, "
          f"and this is TensorFlow {tf.__version__}.")


def check_sharding_callbacks(name):
  """Raises TypeError where TensorFlow has no sharding callbacks (2.15).

  Args:
    name: The sharding policy being made, for the message.
  """
  if sharding_util is None:
    raise TypeError(
        f"{name} is a checkpoint sharding callback: it needs TensorFlow "
        f"{_LATER_OPTIONS['experimental_sharding_callback']} or newer, and "
        f"this is TensorFlow {tf.__version__}.")


def graph_def_with_shapes(graph):
  """`graph`'s `GraphDef` with the output shapes of its ops."""
  return graph.as_graph_def(add_shapes=True, **_GRAPH_DEF_ARGUMENTS)
