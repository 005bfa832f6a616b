"""Object-based checkpoints restored by the v1 `Saver`, by variable names.

An object-based checkpoint records, for each value, the name its variable
had when saved (`full_name`). `object_graph_key_mapping` maps those names
to the checkpoint's keys, and `remapped_saveables` checks that every
variable a `Saver` restores has one and points each at its key.
"""

from tensorflow.python.framework import errors

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.v1 import saver_builders


def object_graph_key_mapping(checkpoint_path):
  """Maps variable names to keys in an object-based checkpoint.

  Args:
    checkpoint_path: prefix of a checkpoint written by `tf.train.Checkpoint`
      (or `tf_objckpt.Checkpoint`).

  Returns:
    A dict from each attribute's `full_name` (the variable name it had when
    saved) to its checkpoint key.

  Raises:
    NotFoundError: if the checkpoint has no object graph.
  """
  graph_proto = checkpoint_opening.read_object_graph(
      checkpoint_opening.open_reader(checkpoint_path), checkpoint_path)
  if graph_proto is None:
    raise errors.NotFoundError(
        None, None,
        f"Checkpoint {checkpoint_path!r} has no object graph: it is not "
        "object-based.")
  return {
      attribute.full_name: attribute.checkpoint_key
      for node in graph_proto.nodes for attribute in node.attributes
  }


def remapped_saveables(save_path,
                       var_list=None,
                       names_to_keys=None,
                       rename=True):
  """The saveables of `var_list`, each spec pointed at its key.

  Args:
    save_path: prefix of an object-based checkpoint.
    var_list: variables to restore (default: all saveable objects).
    names_to_keys: name-to-key dict (default: read from the checkpoint).
    rename: Whether to point the specs at their keys, or only check.

  Returns:
    The saveables.

  Raises:
    ValueError: if the checkpoint is not object-based.
    NotFoundError: if some variables have no key in the checkpoint.
  """
  if names_to_keys is None:
    try:
      names_to_keys = object_graph_key_mapping(checkpoint_path=save_path)
    except errors.NotFoundError:
      raise ValueError(
          f"Checkpoint in {save_path} not an object-based checkpoint."
      ) from None
  if var_list is None:
    var_list = saver_builders.all_saveables()
  saveables = saver_builders.saveables_from_var_list(var_list)
  current = {spec.name for saveable in saveables for spec in saveable.specs}
  previous = set(names_to_keys)
  missing = current - previous
  if missing:
    raise errors.NotFoundError(
        None, None,
        ("\n\nExisting variables not in the checkpoint: {}"
         "\n\nVariables names when this checkpoint was written which don't "
         "exist now: {}\n\n({} variable name(s) did match)\n\n"
         "Could not find some variables in the checkpoint (see names above). "
         "Saver was attempting to load an object-based checkpoint (saved "
         "using tf.train.Checkpoint or tf.keras.Model.save_weights) using "
         "variable names. If the checkpoint was written with eager execution "
         "enabled, variable names may have changed (for example a missing "
         "'_1' suffix), or there may be new variables which did not exist "
         "when it was written. Construct a Saver(var_list=...) with only the "
         "variables which previously existed, as a dictionary keyed by the "
         "old names if names changed.").format(
             ", ".join(sorted(missing)), ", ".join(sorted(previous - current)),
             len(previous & current)))
  if rename:
    for saveable in saveables:
      for spec in saveable.specs:
        spec.name = names_to_keys[spec.name]
  return saveables
