"""A checkpoint's object graph: read, and its nodes named as messages name them.

TensorFlow's name for the module of `object_metadata` and
`ObjectGraphProtoPrettyPrinter` is `checkpoint`, which re-exports them.
"""

from tensorflow.core.protobuf import trackable_object_graph_pb2

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation.type_hints import CheckpointPath
from tf_objckpt.objects import trackable
from tf_objckpt.restoring import object_graph_check


class ObjectGraphProtoPrettyPrinter:
  """Names the nodes of a `TrackableObjectGraph` as messages name objects.

  `node_names[node_id]` is "(root).model.kernel", or for a slot variable
  "(root).optimizer's state 'm' for (root).model.kernel". Built on first
  use.
  """

  def __init__(self, object_graph_proto):
    self._object_graph_proto = object_graph_proto
    self._node_names = None

  @property
  def node_names(self):
    """`{node id: name}` of the nodes reachable from the root."""
    if self._node_names is None:
      paths = object_graph_check.NodePaths(self._object_graph_proto)
      names = (paths[node_id] for node_id in range(len(paths)))
      self._node_names = {
          node_id: name
          for node_id, name in enumerate(names)
          if not name.startswith("<unreachable")
      }
    return self._node_names


def object_metadata(
    save_path: CheckpointPath
) -> trackable_object_graph_pb2.TrackableObjectGraph:
  """Returns the parsed `TrackableObjectGraph` of a checkpoint.

  Raises:
    ValueError: If the checkpoint is name-based (has no object graph).
  """
  proto = checkpoint_opening.read_object_graph(
      checkpoint_opening.open_reader(save_path), save_path)
  if proto is None:
    raise ValueError(
        f"The specified checkpoint \"{save_path}\" does not appear to be "
        f"object-based (saved with TF2) since it is missing the key "
        f"\"{trackable.OBJECT_GRAPH_PROTO_KEY}\": it has no object graph, so it "
        "was probably written by a name-based (TF1) Saver.")
  return proto


module_names.keep_module_name("tf_objckpt.checkpoint",
                              ObjectGraphProtoPrettyPrinter, object_metadata)
