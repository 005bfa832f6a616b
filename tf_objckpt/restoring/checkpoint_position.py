"""`CheckpointPosition`: one node of a checkpoint being restored.

A position points at one node of a checkpoint's object graph. It offers
the methods TensorFlow's trackables call on theirs (`restore`,
`bind_object`, `is_simple_variable`, `value_tensors`, ...), so TensorFlow's
objects (Keras layers, `tf.Module`) keep our positions in their
deferred-dependency queues, and what our trackables ask of a position
(`objects.restore_positions`). Restoring a position into an object binds
the node to it (`node_binding`) and walks what the node reaches from there
(`restore_walk`); a node whose object does not exist yet waits as a
position in its parent's deferred dependencies, and a variable created that
way starts with its checkpointed value (`CheckpointInitialValue`). The
state of one restore (the checkpoint, what is bound) is its coordinator's
(`restore_coordinator`), which makes the positions of the nodes a walk goes
on to.
"""

import weakref

from tensorflow.python.eager import context
from tensorflow.python.eager import record
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor_shape

from tf_objckpt.foundation import checkpoint_keys as trackable_utils
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.objects import restore_positions
from tf_objckpt.restoring import initial_values
from tf_objckpt.restoring import node_binding
from tf_objckpt.restoring import restore_plan
from tf_objckpt.restoring import restore_walk


class CheckpointPosition(restore_positions.RestorePosition):
  """One node of a checkpoint being restored (see the module docstring)."""

  __slots__ = ("_checkpoint", "_node_id", "skip_restore", "_deferred_in",
               "only_if_it_fits")

  def __init__(self, checkpoint, proto_id):
    """Points at node `proto_id` of `checkpoint`'s object graph.

    Args:
      checkpoint: The restore coordinator of one `restore()` call.
      proto_id: The index of the node in `TrackableObjectGraph.nodes`.
    """
    self._checkpoint = checkpoint
    self._node_id = proto_id
    self.skip_restore = False
    # (weak reference to the parent, local name) once deferred.
    self._deferred_in = None
    # A Keras 3 slot reached by position: restored only into an object of
    # its shape (`keras3_slots`).
    self.only_if_it_fits = False

  def defer_in(self, parent, local_name):
    """Queues this node until `parent` tracks a dependency `local_name`."""
    self._deferred_in = (weakref.ref(parent), local_name)
    self._checkpoint.defer(parent, local_name, self)

  def initialize_when_awaited(self, trackable, parent=None, local_name=None):
    """Restores `trackable` on its initialization if Keras 3 still awaits it.

    Args:
      trackable: The object bound to this node.
      parent: The object `trackable` is a dependency of, if known; a value
        that does not fit is queued again there (see
        `_restore_on_initialization`).
      local_name: The name `parent` tracks `trackable` under.

    Returns:
      True if `trackable` is a Keras 3 variable awaiting its initialization
      and this node its plain value: the value is then its initializer.
      False if it is to be restored as usual.
    """
    if not (initial_values.awaits_initialization(trackable) and
            self.is_simple_variable()):
      return False
    if parent is not None:
      self._deferred_in = (weakref.ref(parent), local_name)
    self._restore_on_initialization(trackable)
    return True

  def restore(self, trackable, reader=None):
    """Restores this node, and what is reachable from it, into `trackable`.

    A Keras 3 slot written under `_variables` only may be the optimizer's
    last: its slots are then matched to their variables (`keras3_slots`).
    """
    del reader  # Values are read through the coordinator.
    self._restore_into(trackable)
    if self._checkpoint.slot_lists.is_unlisted_slot(self._node_id):
      self._restore_ops_of(
          lambda checkpoint: restore_walk.restore_unlisted_slots(
              checkpoint, trackable), self._checkpoint)

  def _restore_into(self, trackable):
    """Restores this node and its dependencies into `trackable`.

    Out of any function being built and any tape. Eagerly with no tape
    recording, `ops.init_scope()` would do nothing, and it is skipped: a
    restore-on-create runs this once per variable.
    """
    if context.executing_eagerly() and not record.could_possibly_record():
      self._restore_in_scope(trackable)
      return
    with ops.init_scope():
      self._restore_in_scope(trackable)

  def _restore_in_scope(self, trackable):
    """`_restore_into`, in `ops.init_scope()` (or where it does nothing)."""
    if self.only_if_it_fits and not self.fits(trackable):
      return
    if self.initialize_when_awaited(trackable):
      return
    checkpoint = self._checkpoint
    plain = context.executing_eagerly() and node_binding.plain_variable(
        checkpoint, self._node_id, trackable)
    if plain:  # Bound as the walk binds a plain child.
      if checkpoint.bind(self._node_id, trackable, see=False):
        self._record_restore_ops(
            lambda _: node_binding.restore_plain_variable(
                checkpoint, trackable, plain), None)
      return
    if not self.bind_object(trackable):
      return
    restore_fn = getattr(trackable, "_restore_from_checkpoint_position",
                         CheckpointPosition.restore_descendants)
    self._record_restore_ops(restore_fn, self)

  def _restore_ops_of(self, restore_fn, argument):
    """Runs `restore_fn(argument)`, recording the restore ops it returns."""
    with ops.init_scope():
      self._record_restore_ops(restore_fn, argument)

  def _record_restore_ops(self, restore_fn, argument):
    """`_restore_ops_of`, inside `ops.init_scope()` already."""
    try:
      restore_ops = restore_fn(argument)
    except (ValueError, errors.OpError) as e:
      # Graph building, a value that does not fit is reported when the
      # restore ops run: creating the object goes on, as in TensorFlow.
      self._checkpoint.report_mismatch(e)
      return
    if restore_ops:
      self._checkpoint.new_restore_ops(restore_ops)

  def _restore_on_initialization(self, variable):
    """Gives a Keras 3 variable made in a symbolic build its value.

    Keras builds layers without `build()` by tracing them in a scratch
    graph: their variables are created there uninitialized, and initialized
    (by `_initializer`) once the trace ends. So the value is checked now and
    becomes the variable's initializer.

    Keras drops errors raised during the trace, then builds the layer again
    eagerly. So a value that does not fit is queued again in its parent
    before raising: the eager build raises it where Keras lets it out.

    Raises:
      ValueError: Naming the key, the object path and both shapes, if the
        value does not fit the variable (or its dtype differs).
    """
    try:
      self.check_initial_value(variable.shape, variable.dtype)
    except ValueError:
      self._defer_again()
      raise
    if not self.bind_object(variable):
      return
    tensorflow_internals.set_initializer(
        variable, initial_values.CheckpointInitialValueCallable(self))
    self._checkpoint.mark_restored(variable)

  def _defer_again(self):
    """Queues this node again in the parent it waited in, if still alive."""
    parent = self._deferred_in and self._deferred_in[0]()
    if parent is not None:
      self._checkpoint.defer(parent, self._deferred_in[1], self)

  def bind_object(self, trackable):
    """Records that `trackable` is this node; processes its slot variables.

    Returns:
      True if the correspondence is new, False if this node was already
      bound (to `trackable`, or, with a warning, to another object).
    """
    return node_binding.bind_object(self._checkpoint, self._node_id, trackable)

  def restore_descendants(self):
    """Restores the bound object and what it reaches: the restore walk.

    Breadth first, so that shorter paths win when objects are shared; the
    values the walk finds are restored together.

    Returns:
      Restore ops when graph building, else an empty list.
    """
    return restore_walk.restore_breadth_first(self)

  def initial_value_callable(self):
    """A variable initializer that reads this node's value."""
    return initial_values.CheckpointInitialValueCallable(self)

  def is_simple_variable(self):
    """Whether the value fits in a variable initializer (one tensor, no deps)."""
    node = self.object_proto
    return (len(node.attributes) == 1 and
            node.attributes[0].name == trackable_utils.VARIABLE_VALUE_KEY and
            not node.children)

  def value_tensors(self, shape_and_slices=None):
    """Reads this node's attribute values, before any object exists.

    Used for restore-on-create.

    Args:
      shape_and_slices: Optional `{attribute name: shape_and_slice}` to
        read only a slice of an attribute.

    Returns:
      A dict from attribute name to tensor.
    """
    shape_and_slices = shape_and_slices or {}
    values = {}
    for attribute in self.object_proto.attributes:
      values[attribute.name] = self._checkpoint.values.read_one(
          attribute.checkpoint_key, shape_and_slices.get(attribute.name, ""))
    return values

  def check_initial_value(self, shape=None, dtype=None):
    """Raises unless the value can initialize a variable of shape and dtype.

    Raises:
      ValueError: Naming the checkpoint key and object path, if the
        checkpointed shape or dtype differs (None: not checked).
    """
    key = self.object_proto.attributes[0].checkpoint_key
    self._checkpoint.check(restore_plan.plan_of_initial_value(
        key, dtype, shape),
                           shape_error=ValueError,
                           dtype_error=ValueError)

  def fits(self, trackable):
    """Whether `trackable` has this node's checkpointed shape (if known)."""
    shape = self.value_shape()
    own_shape = getattr(trackable, "shape", None)
    return shape is None or own_shape is None or (
        shape.as_list() == tensor_shape.TensorShape(own_shape).as_list())

  def value_shape(self):
    """The checkpointed shape of VARIABLE_VALUE, or None if there is none."""
    for attribute in self.object_proto.attributes:
      if attribute.name == trackable_utils.VARIABLE_VALUE_KEY:
        dims = self._checkpoint.values.shapes.get(attribute.checkpoint_key)
        return None if dims is None else tensor_shape.TensorShape(dims)
    return None

  def gather_ops_or_named_saveables(self):
    """Finds cached restore ops, or makes saveables for this node.

    Returns:
      A tuple (`(name, saveable, restore op)` of saveables whose restore
      ops an earlier restore built, {checkpoint key: saveable}, Python
      state saveables).
    """
    return node_binding.gather_saveables(self._checkpoint, self._node_id,
                                         self.trackable)

  def restore_ops(self):
    """Restores this node's own attributes (not its dependencies).

    Returns:
      Restore ops when graph building; an empty list when executing eagerly.
    """
    batch = node_binding.RestoreBatch()
    batch.add_node(self)
    return batch.restore(self._checkpoint)

  @property
  def checkpoint(self):
    return self._checkpoint

  @property
  def trackable(self):
    return self._checkpoint.bound_objects[self._node_id]

  @property
  def object_proto(self):
    nodes = self._checkpoint.object_graph_proto.nodes
    return nodes[self._node_id]

  @property
  def proto_id(self):
    return self._node_id

  @property
  def restore_uid(self):
    return self._checkpoint.restore_uid

  def __repr__(self):
    return repr(self.object_proto)


module_names.keep_module_name("tf_objckpt.restore", CheckpointPosition)
