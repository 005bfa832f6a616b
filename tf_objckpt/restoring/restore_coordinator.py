"""The state of one object-based restore, and its one owner.

A `CheckpointRestoreCoordinator` is the bookkeeping of one `restore()` call:
which checkpoint nodes are bound to which Python objects, which objects the
restore assigned, which restores wait for objects not created yet, which
slot variables wait for their optimizer or variable, which attributes found
no saveable, and, when graph building, the restore ops to run. Its fields
are private: the walk (`restore_walk`, `node_binding`, the Keras 3 hook),
the positions (`checkpoint_position`) and the load status change and ask it
through its methods. It makes the positions of the nodes a walk reaches,
and restores what one step gathered: it builds the step's read plan
(`restore_plan`), checks it once against the checkpoint
(`read_plan.check`) and has the I/O engine execute it (`read_plan`, or
`multi_device_saver` when graph building).
"""

import types
import typing
import weakref

from tensorflow.python.eager import context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_control_flow_ops
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.engine import multi_device_saver
from tf_objckpt.engine import read_plan
from tf_objckpt.foundation import identity_containers as object_identity
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.restoring import checkpoint_position
from tf_objckpt.restoring import keras3_slots
from tf_objckpt.restoring import object_graph_check
from tf_objckpt.restoring import object_maps
from tf_objckpt.restoring import restore_plan
from tf_objckpt.saveables import named_saveables


class _UnrestoredValuesReport:
  """Warns, when a restore is garbage collected, about values never used.

  Lives apart from the coordinator (which must be collectable) and runs
  from a `weakref.finalize`; `expect_partial()` silences it.
  """

  def __init__(self, object_graph_proto, valued_node_ids, matched_node_ids,
               unused_attributes, ignored_proto_ids):
    self.expect_partial = False
    self._proto = object_graph_proto
    self._valued_node_ids = valued_node_ids
    self._matched_proto_ids = matched_node_ids
    self._unused_attributes = unused_attributes
    self._ignored_proto_ids = ignored_proto_ids

  def warn_if_incomplete(self):
    if self.expect_partial:
      return
    unmatched = [
        node_id for node_id in self._valued_node_ids
        if node_id not in self._matched_proto_ids and
        node_id not in self._ignored_proto_ids
    ]
    if not unmatched and not self._unused_attributes:
      return
    names = object_graph_check.NodePaths(self._proto)
    # TensorFlow's words, which users search for.
    logging.warning(
        "Detecting that an object or model or tf.train.Checkpoint is being "
        "deleted with unrestored values. See the following logs for the "
        "specific values in question. To silence these warnings, use "
        "`status.expect_partial()`. See "
        "https://www.tensorflow.org/api_docs/python/tf/train/Checkpoint#restore "
        "for details about the status object returned by the restore "
        "function.")
    for node_id in unmatched:
      logging.warning(
          "Value in checkpoint could not be found in the "
          "restored object: %s", names[node_id])
    for node_id, attributes in self._unused_attributes.items():
      logging.warning(
          "An attribute in the restored object could not be "
          "found in the checkpoint. Object: %s, attribute: %s", names[node_id],
          attributes)


class SlotToRestore(typing.NamedTuple):
  """A slot in the checkpoint, waiting for its variable to be bound."""
  optimizer_id: int
  slot_variable_id: int
  slot_name: str


class SlotAwaitingOptimizer(typing.NamedTuple):
  """A slot of a bound variable, waiting for its optimizer to be bound."""
  original_variable: typing.Any
  slot_variable_id: int
  slot_name: str


class CheckpointRestoreCoordinator:
  """The state of one object-based `restore()` call, and its one owner.

  Knows the checkpoint (object graph, dtypes, shapes), which checkpoint
  nodes are bound to which Python objects, which restores wait for objects
  not created yet, and, when graph building, the restore ops to run. Its
  state is private: the walk, the positions and the load status change it
  and ask it through its methods.
  """

  def __init__(self,
               object_graph_proto,
               graph_index,
               values,
               restore_op_cache,
               graph_view,
               options=None):
    """Prepares to restore `values.save_path` into `graph_view`'s objects.

    Args:
      object_graph_proto: The checkpoint's TrackableObjectGraph.
      graph_index: Its `object_graph_check.GraphIndex`.
      values: The checkpoint's `reads.CheckpointValues`.
      restore_op_cache: The saver's `RestoreOpCache`, shared by all its
        restores, so graph-mode restores reuse ops.
      graph_view: The `ObjectGraphView` of the objects being restored.
      options: Optional `tf.train.CheckpointOptions`: the device to read on,
        whether to skip optimizer slot variables, and our `object_map`.

    Raises:
      NotFoundError, ValueError: If the options' `object_map` names a path
        the checkpoint or the program lacks (`object_maps.resolve`).
    """
    self._object_graph_proto = object_graph_proto
    # What the walk reads of each node (`object_graph_check.GraphIndex`).
    self._graph_index = graph_index
    self._values = values
    self._options = options
    self._skip_slot_variables = bool(
        getattr(options, "experimental_skip_slot_variables", False))
    self._restore_uid = ops.uid()
    self._graph_view = graph_view
    self._restore_ops = []
    self._built_restore_ops = []
    self._mismatches = []  # Errors of deferred restores (graph building).
    self._op_cache = restore_op_cache
    self._on_new_restore_ops = None
    # Node id -> Python object. Weak: a pending restore must not keep the
    # program's objects alive.
    self._objects_by_node_id = weakref.WeakValueDictionary()
    self._bound_objects = types.MappingProxyType(self._objects_by_node_id)
    self._matched_node_ids = set()
    self._seen_objects = object_identity.ObjectIdentityWeakSet()
    # Node id -> attribute names present in the checkpoint but not restored.
    self._unused_attributes = {}
    # Variable node id -> slots to restore once the variable is bound.
    self._slots_by_variable = {}
    # Optimizer node id -> slots waiting for the optimizer to be bound.
    self._slots_awaiting_optimizer = {}
    # Slots of Keras 3 optimizers, matched to their variables by path.
    self._slot_lists = keras3_slots.SlotLists(object_graph_proto,
                                              graph_index.child_names)
    self._slot_variables = graph_index.slot_variables
    for node_id, slot in () if self._skip_slot_variables else (
        self._slot_variables):
      self._slots_by_variable.setdefault(
          slot.original_variable_node_id, []).append(
              SlotToRestore(optimizer_id=node_id,
                            slot_variable_id=slot.slot_variable_node_id,
                            slot_name=slot.slot_name))
    self._object_map = _resolved_object_map(options, object_graph_proto,
                                            graph_index, self._slot_lists,
                                            graph_view, values.save_path)
    self._report = _UnrestoredValuesReport(object_graph_proto,
                                           graph_index.valued_node_ids,
                                           self._matched_node_ids,
                                           self._unused_attributes,
                                           self.ignored_node_ids())
    weakref.finalize(self, self._report.warn_if_incomplete)

  # What the restore reads: fixed once the restore starts.

  @property
  def object_graph_proto(self):
    """The checkpoint's TrackableObjectGraph."""
    return self._object_graph_proto

  @property
  def graph_index(self):
    """What the walk reads of each node (`object_graph_check.GraphIndex`)."""
    return self._graph_index

  @property
  def values(self):
    """The checkpoint's `reads.CheckpointValues`."""
    return self._values

  @property
  def skip_slot_variables(self):
    """Whether optimizer slot variables are left alone (the options')."""
    return self._skip_slot_variables

  @property
  def restore_uid(self):
    """This restore's uid: objects record it when it assigns them."""
    return self._restore_uid

  @property
  def slot_lists(self):
    """The Keras 3 optimizers' slot lists (`keras3_slots.SlotLists`)."""
    return self._slot_lists

  @property
  def object_map(self):
    """The options' `object_maps.ObjectMap`, or None without one."""
    return self._object_map

  def ignored_node_ids(self):
    """Nodes whose values this restore does not ask for.

    Slots skipped on purpose (`experimental_skip_slot_variables`), and
    with an object map, the nodes outside its scope.
    """
    skipped = self.skipped_slot_node_ids()
    if self._object_map is None:
      return skipped
    scope = self._object_map.scope
    return skipped | frozenset(
        node_id for node_id in range(len(self._object_graph_proto.nodes))
        if node_id not in scope)

  def position(self, node_id):
    """The `CheckpointPosition` of node `node_id` in this restore."""
    return checkpoint_position.CheckpointPosition(self, node_id)

  def skipped_slot_node_ids(self):
    """Slot variable nodes left alone (`experimental_skip_slot_variables`)."""
    if not self._skip_slot_variables:
      return frozenset()
    return frozenset(
        slot.slot_variable_node_id for _, slot in self._slot_variables)

  def node_has_values(self, node_id):
    """Whether a node or anything below it holds checkpointed values."""
    node = self._object_graph_proto.nodes[node_id]
    if node.HasField("has_checkpoint_values"):
      return node.has_checkpoint_values.value
    return bool(node.children or node.attributes or node.slot_variables or
                node.HasField("registered_saver"))

  # Which node is which object.

  def bind(self, node_id, trackable, see=True):
    """Records that `trackable` is node `node_id`.

    Plain variables skip the objects seen (`see=False`): those find
    unbound objects.

    Returns:
      True if the correspondence is new, False if the node was already
      bound (to `trackable`, or, with a warning, to another object).
    """
    if see:
      self._seen_objects.add(trackable)
    self._matched_node_ids.add(node_id)
    current = self._objects_by_node_id.get(node_id)
    if current is None:
      self._objects_by_node_id[node_id] = trackable
      return True
    if current is not trackable:
      logging.warning(
          "Inconsistent references when loading the checkpoint: the "
          "checkpoint reaches one object by two paths, the Python program "
          "reaches two objects (%s and %s). Either the program's object "
          "structure changed or the checkpoint comes from another program.",
          current, trackable)
    return False

  def unbind(self, node_id):
    """Forgets the object node `node_id` was bound to."""
    self._objects_by_node_id.pop(node_id, None)
    self._matched_node_ids.discard(node_id)

  @property
  def bound_objects(self):
    """`{node id: object}` of the bound nodes: a read-only view."""
    return self._bound_objects

  @property
  def matched_node_ids(self):
    """The nodes matched to objects so far (those gone since included)."""
    return frozenset(self._matched_node_ids)

  def see(self, trackable):
    """Records that `trackable` exists, for the unmatched-object checks."""
    self._seen_objects.add(trackable)

  @property
  def seen_objects(self):
    """The objects seen by the walk or the assertions, still alive."""
    return list(self._seen_objects)

  # Which objects this restore assigned.

  def mark_restored(self, trackable):
    """Records that this restore assigns `trackable` now.

    Returns:
      False if this restore or a later one assigned it already: it is not
      to be assigned again.
    """
    return tensorflow_internals.mark_restored(trackable, self._restore_uid)

  def assigned(self, trackable):
    """Whether this restore (or a later one) assigned `trackable`."""
    return tensorflow_internals.last_restore(trackable) >= self._restore_uid

  def restore_again(self, trackable):
    """Lets this restore assign `trackable` again, if it assigned it."""
    tensorflow_internals.forget_restore(trackable, self._restore_uid)

  def unassigned_node_ids(self):
    """Bound nodes whose objects no restore as recent as this assigned."""
    return [
        node_id for node_id, trackable in self._objects_by_node_id.items()
        if tensorflow_internals.last_restore(trackable) < self._restore_uid
    ]

  def defer(self, trackable, local_name, position):
    """Queues `position` until `trackable` tracks a dependency `local_name`."""
    tensorflow_internals.deferred_dependencies(trackable).setdefault(
        local_name, []).append(position)
    if position.is_simple_variable():
      self._values.await_key(position.object_proto.attributes[0].checkpoint_key)

  # Optimizer slots (not Keras 3's: `slot_lists`).

  def slots_wait_for(self, variable_id):
    """Whether slots wait for the variable of node `variable_id`."""
    return variable_id in self._slots_by_variable

  def take_slots_of_variable(self, variable_id):
    """The `SlotToRestore`s of node `variable_id`'s variable, now bound."""
    return self._slots_by_variable.pop(variable_id, ())

  def await_optimizer(self, optimizer_id, variable, slot):
    """Keeps `slot` of bound `variable` until optimizer `optimizer_id` is."""
    self._slots_awaiting_optimizer.setdefault(optimizer_id, []).append(
        SlotAwaitingOptimizer(original_variable=variable,
                              slot_variable_id=slot.slot_variable_id,
                              slot_name=slot.slot_name))

  def take_slots_awaiting_optimizer(self, optimizer_id):
    """The `SlotAwaitingOptimizer`s of optimizer `optimizer_id`, now bound."""
    return self._slots_awaiting_optimizer.pop(optimizer_id, ())

  def waiting_slot_ids(self):
    """The slot variable nodes still waiting for their variable."""
    return [
        slot.slot_variable_id
        for slots in self._slots_by_variable.values()
        for slot in slots
    ]

  # Attributes without a saveable.

  def record_unused_attribute(self, node_id, attribute_name):
    """Records a checkpointed attribute the object has no saveable for."""
    self._unused_attributes.setdefault(node_id, []).append(attribute_name)

  @property
  def unused_attributes(self):
    """`{node id: attribute names}` checkpointed but not restored (a copy)."""
    return {
        node_id: list(names)
        for node_id, names in self._unused_attributes.items()
    }

  @property
  def expect_partial(self):
    return self._report.expect_partial

  @expect_partial.setter
  def expect_partial(self, value):
    self._report.expect_partial = value

  def report_mismatch(self, error):
    """Raises `error`, or keeps it for `raise_mismatch` (graph, deferred).

    A deferred restore runs when its object is created. Eagerly, the value
    is assigned right then, so the error is raised right then. Graph
    building, nothing is assigned before the restore ops run, so the error
    is raised when they would run (and by the assertions), and building the
    model goes on, as it does in TensorFlow.
    """
    if context.executing_eagerly() or self._on_new_restore_ops:
      raise error
    self.keep_mismatch(error)

  def keep_mismatch(self, error):
    """Keeps `error` for the assertions (`raise_mismatch`) to raise."""
    self._mismatches.append(error)

  def raise_mismatch(self):
    """Raises the first error `report_mismatch` kept, if any."""
    if self._mismatches:
      raise self._mismatches[0]

  def new_restore_ops(self, new_ops):
    """Records restore ops created after `restore()` returned."""
    self._restore_ops.extend(new_ops)
    if self._on_new_restore_ops:
      self._on_new_restore_ops(new_ops)  # pylint: disable=not-callable

  def run_new_restore_ops_with(self, run):
    """Has `run(new ops)` run the restore ops created from now on."""
    self._on_new_restore_ops = run

  @property
  def restore_ops(self):
    """The restore ops created so far (graph mode); not to be changed."""
    return self._restore_ops

  def restore_ops_to_run(self):
    """What to fetch to run every restore op so far (graph mode)."""
    return self._op_cache.fetches(self._restore_ops)

  def group_built_restore_ops(self):
    """Groups the restore ops this restore built (see `RestoreOpCache`)."""
    self._op_cache.group(self._built_restore_ops)

  def cached_restore_op(self, name):
    """The restore op an earlier restore built under `name`, or None.

    Graph mode only. The op reads whichever checkpoint is fed, so its
    values go in the plan of this restore step like new ones: a mismatch
    fails when the plan is checked rather than halfway through running the
    ops.
    """
    if context.executing_eagerly():
      return None
    return self._op_cache.by_name.get(name)

  def cached_saveable(self, trackable, name):
    """A saveable made for `trackable` by an earlier restore, or None."""
    cache = self._graph_view.saveables_cache
    if cache is None:
      return None
    saveables = cache.get(trackable, {}).get(name)
    if saveables is None:
      return None
    if isinstance(saveables, (list, tuple)):
      return saveables[0] if len(saveables) == 1 else None
    return saveables

  def cache_saveable(self, trackable, name, saveable):
    cache = self._graph_view.saveables_cache
    if cache is not None:
      cache.setdefault(trackable, {})[name] = (saveable,)

  def check(self,
            plan,
            shape_error=ValueError,
            dtype_error=errors.InvalidArgumentError):
    """Checks a `read_plan.ReadPlan` against the checkpoint.

    Args:
      plan: What one restore step reads.
      shape_error: The error type when only shapes differ.
      dtype_error: The error type when only dtypes differ.

    Raises:
      NotFoundError: If a key is missing.
      The error types above: If values do not fit; the message names the
        checkpoint and every key that does not fit.
    """
    read_plan.check(plan,
                    self._values,
                    shape_error=shape_error,
                    dtype_error=dtype_error)

  def restore_variable_eagerly(self, name, key, variable):
    """Restores one stock resource variable now: a plan of it alone.

    Restore-on-create of a plain variable; as `restore_saveables` with it
    alone in `variables`, made short.
    """
    read_plan.restore_variable_eagerly(
        read_plan.ToVariable(name, key, variable), self._values, self.check)

  def restore_saveables(self,
                        tensor_saveables,
                        python_saveables,
                        variables=(),
                        cached=()):
    """Restores one step's values now (eagerly) or builds their restore ops.

    The step's plan is built once and checked before anything is assigned,
    so a mismatch or a damaged value leaves the objects untouched; the
    engine then executes it.

    Args:
      tensor_saveables: `{checkpoint key: SaveableObject}`.
      python_saveables: `PythonStateSaveable`s, restored now (last).
      variables: `(name, checkpoint key, variable)` of stock resource
        variables, restored by assigning their values; graph building, each
        by the restore op an earlier restore built under its name, if any.
      cached: `(name, saveable, restore op)` of saveables whose restore ops
        an earlier restore built under `name` (graph mode).

    Returns:
      The restore ops when graph building, else an empty list.
    """
    eager = context.executing_eagerly()
    plan = restore_plan.plan_of(
        named_saveables.validate_and_slice_inputs(tensor_saveables),
        python_saveables,
        variables,
        cached,
        built_ops=None if eager else self._op_cache.by_name)
    self.check(plan)
    if eager:
      read_plan.execute_eagerly(plan, self._values)
      return []
    # Python state is handed over at once, after the ops are built.
    hand_over_python_state = read_plan.read_python_state(plan, self._values)
    restore_ops = multi_device_saver.execute_plan(plan,
                                                  self._values.path_tensor,
                                                  self._options)
    hand_over_python_state()
    new_ops = {
        destination.name: restore_ops[destination.name]
        for destination in plan.destinations
        if destination.name in restore_ops and
        not isinstance(destination, read_plan.ToRestoreOp)
    }
    self._op_cache.by_name.update(new_ops)
    self._built_restore_ops.extend(new_ops.values())
    return list(restore_ops.values())


def _resolved_object_map(options, object_graph_proto, graph_index, slot_lists,
                         graph_view, save_path):
  """The `ObjectMap` of the options' `object_map`, or None without one."""
  object_map = object_maps.normalized(getattr(options, "object_map", None))
  if not object_map:
    return None
  return object_maps.resolve(object_map, object_graph_proto, graph_index,
                             slot_lists, graph_view.root,
                             graph_view.attached_dependencies, save_path)


class RestoreOpCache:
  """A saver's graph-mode restore ops, reused by all its restores.

  Restore ops read whichever checkpoint path is fed, so they are kept by
  saveable name (`by_name`) and built once. `Session.run` spends more
  Python time on each fetched op than a restore takes to run, so the
  restore ops one `restore()` builds are also grouped under a no-op, built
  with them: running restore ops never adds an op. A group runs all of its
  ops, so a restore fetches only the groups whose ops it needs every one
  of, and its other ops one by one.
  """

  def __init__(self):
    self.by_name = {}  # Saveable name -> restore op.
    self._groups = {}  # frozenset of restore ops -> the no-op running them.

  def group(self, restore_ops):
    """Groups `restore_ops` (unless empty, already grouped, or finalized)."""
    members = frozenset(restore_ops)
    if not members or members in self._groups:
      return
    graph = next(iter(members)).graph
    if graph.finalized:
      return
    with graph.as_default(), graph.control_dependencies(None):
      with graph.control_dependencies(members):
        self._groups[members] = gen_control_flow_ops.no_op(name="restore_all")

  def fetches(self, restore_ops):
    """The groups and single ops that run exactly `restore_ops`."""
    remaining = set(restore_ops)
    fetches = []
    for members, group in sorted(self._groups.items(),
                                 key=lambda item: -len(item[0])):
      if members <= remaining:
        fetches.append(group)
        remaining -= members
    fetches.extend(op for op in restore_ops if op in remaining)
    return fetches
