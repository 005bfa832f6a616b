"""Restoring chosen nodes of a checkpoint into given objects.

`restore_nodes(save_path, {node id: trackable})` is TensorFlow's
`restore.restore_nodes`: each given node's own values (not its
dependencies) go into the object given for it. `restore_given` is its
entry on the restore walk, for any restore that decided which object is
which node by other means: it binds each node to its object and gathers
the values of all of them into one batch, checked against the checkpoint
as one read plan before anything is assigned, so a restore that fails
assigns nothing (TensorFlow's restores node after node).
"""

import numbers
import os
from typing import Any, Dict, Optional

from tensorflow.python.eager import context
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.util import compat

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.foundation.type_hints import CheckpointPath
from tf_objckpt.restoring import node_binding
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import restore_coordinator
from tf_objckpt.saveables import trackable_saveables


def restore_nodes(save_path: CheckpointPath,
                  nodes_to_restore: Dict[int, Any]) -> Optional[list]:
  """Restores the values of chosen checkpoint nodes into given objects.

  Args:
    save_path: The checkpoint's path.
    nodes_to_restore: `{node id: trackable}`; node ids index the
      checkpoint's object graph (`tf_objckpt.checkpoint.object_metadata`).
      Each node's own values are restored into its trackable; its
      dependencies are not.

  Returns:
    None when executing eagerly; graph building, the restore ops to run.

  Raises:
    ValueError: If `nodes_to_restore` is not a dict, names a node the
      checkpoint lacks or an object that is not a trackable, or if a node's
      values and its object's disagree (values on one side only, or not as
      many); nothing is restored then.
    NotFoundError, DataLossError: If the checkpoint is missing or damaged.
  """
  if save_path is None:
    raise ValueError("restore_nodes needs the path of a checkpoint, not None.")
  if not isinstance(nodes_to_restore, dict):
    raise ValueError(
        "Expecting a dictionary of node_id to Trackable for nodes_to_restore. "
        f"Got a {type(nodes_to_restore).__name__}: {nodes_to_restore!r}.")
  checkpoint = _open(compat.as_str(os.fspath(save_path)))
  paths = object_graph_check.NodePaths(checkpoint.object_graph_proto)
  for node_id, trackable in nodes_to_restore.items():
    _check_pair(checkpoint, paths, node_id, trackable)
  restore_ops = restore_given(
      checkpoint, {
          node_id: trackable
          for node_id, trackable in nodes_to_restore.items()
          if _values_agree(checkpoint, paths, node_id, trackable)
      })
  return None if context.executing_eagerly() else restore_ops


def restore_given(checkpoint, objects_by_node_id):
  """Restores each node's own values into the object given for it.

  Args:
    checkpoint: The restore's `CheckpointRestoreCoordinator`.
    objects_by_node_id: `{node id: trackable}`.

  Returns:
    The restore ops when graph building, else an empty list.
  """
  batch = node_binding.RestoreBatch()
  for node_id, trackable in objects_by_node_id.items():
    checkpoint.bind(node_id, trackable)
    batch.add_node(checkpoint.position(node_id))
  return batch.restore(checkpoint)


class _WithoutSaveables:
  """The objects of a restore of given nodes: no saveables kept between
  restores (a restore's coordinator asks its objects' view for them)."""
  saveables_cache = None


def _open(save_path):
  """The coordinator of a restore from `save_path`, its object graph checked.

  It expects a partial restore: the nodes not given are left alone, and
  its garbage collection warns about none of them.
  """
  reader, object_graph_proto = checkpoint_opening.open_object_based(
      save_path, "restore_nodes restores nodes of one")
  values = reads.CheckpointValues(save_path, reader)
  checkpoint = restore_coordinator.CheckpointRestoreCoordinator(
      object_graph_proto,
      object_graph_check.check_object_graph(object_graph_proto, save_path,
                                            values.shapes), values,
      restore_coordinator.RestoreOpCache(), _WithoutSaveables())
  checkpoint.expect_partial = True
  return checkpoint


def _check_pair(checkpoint, paths, node_id, trackable):
  """Raises ValueError unless `node_id` is a node and `trackable` a trackable.

  Messages start with TensorFlow's words, which code matches.
  """
  if (not isinstance(node_id, numbers.Integral) or
      not 0 <= node_id < len(paths)):
    raise ValueError(
        f"The expected node_id: {node_id} to Trackable {trackable} to restore "
        f"does not exist in the checkpoint. Checkpoint "
        f"{checkpoint.values.save_path!r} has nodes 0 to {len(paths) - 1}.")
  if not isinstance(trackable, tf_base.Trackable):
    raise ValueError(
        f"Expecting a valid Trackable to node_id: {node_id} but got "
        f"trackable: {trackable}. Node {node_id} is {paths[node_id]} in "
        f"checkpoint {checkpoint.values.save_path!r}.")


def _values_agree(checkpoint, paths, node_id, trackable):
  """Whether node `node_id` has values for `trackable` to restore.

  False if neither has any.

  Raises:
    ValueError: If only one of them has values, or not as many; messages
      start with TensorFlow's words, which code matches.
  """
  stored = [
      attribute.name
      for attribute in checkpoint.object_graph_proto.nodes[node_id].attributes
  ]
  serializes = trackable_saveables.trackable_has_serialize_to_tensor(trackable)
  if serializes:
    saved = list(
        tensorflow_internals.serialize_to_tensors_function(trackable)())
  else:
    saved = list(trackable_saveables.saveable_objects_from_trackable(trackable))
  detail = (f" Node {node_id} ({paths[node_id]}) of checkpoint "
            f"{checkpoint.values.save_path!r} holds {_names(stored)}; the "
            f"object saves {_names(saved)}.")
  if saved and not stored:
    raise ValueError(
        f"Trackable {trackable} expects checkpointed values but checkpoint "
        f"does not contain serialized tensors for node_id: {node_id}." + detail)
  if serializes and stored and not saved:
    raise ValueError(
        f"Trackable {trackable} does not expect checkpointed values but "
        f"checkpoint contains serialized tensors: {stored} for node_id: "
        f"{node_id}." + detail)
  if len(saved) != len(stored):
    if serializes:
      raise ValueError(
          f"Size for serialized_tensors for Trackable: {len(saved)} did not "
          "match size for serialized_tensors for checkpoint: "
          f"{len(stored)}." + detail)
    raise ValueError(
        f"Size for saveable_objects for Trackable: {len(saved)} did not match "
        f"the size for serialized_tensors for checkpoint: {len(stored)}." +
        detail)
  return bool(stored)


def _names(names):
  return ", ".join(repr(name) for name in names) if names else "no values"
