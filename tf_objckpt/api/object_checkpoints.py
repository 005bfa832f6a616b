"""`Checkpoint` and `CheckpointV1`: objects saved and restored together.

`Checkpoint` saves numbered checkpoints of the objects given to it, and
restores them by walking the checkpoint's object graph; `TrackableSaver`
(`trackable_saver`) does the work, each save is a save transaction
(`save_transaction`), and a restore returns a load status (`load_status`,
`name_based_status`), whose restore ops `streaming_restore` runs as they
are created.
TensorFlow's names for this module are `checkpoint` (TensorFlow 2) and
`util` (TensorFlow 1), which re-export it.
"""

import dataclasses
import functools
import os
import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple
import weakref

from tensorflow.python.eager import context
from tensorflow.python.eager import def_function
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures as tf_data_structures

from tf_objckpt.api import load_status
from tf_objckpt.api import manager_protocol
from tf_objckpt.api import name_based_status
from tf_objckpt.api import named_restores
from tf_objckpt.api import save_transaction
from tf_objckpt.api import self_healing
from tf_objckpt.api import sessions
from tf_objckpt.api import trackable_saver
from tf_objckpt.engine import async_checkpoint
from tf_objckpt.engine import commit
from tf_objckpt.engine import sharding
from tf_objckpt.engine import state_file
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation import tensorflow_internals
from tf_objckpt.foundation.type_hints import CheckpointPath
from tf_objckpt.foundation.type_hints import Options
from tf_objckpt.foundation.type_hints import PathOrTensor
from tf_objckpt.foundation.type_hints import Session
from tf_objckpt.objects import auto_trackable
from tf_objckpt.objects import graph_walk
from tf_objckpt.objects import trackable
from tf_objckpt.objects import variable_creation
from tf_objckpt.objects import wrapping
from tf_objckpt.restoring import map_preview

# Held while a checkpoint object makes its background writer: saves into
# different directories run at the same time.
_WRITER_CREATION = threading.Lock()


def _check_trackable(name, value, accept_weak_references):
  """Returns `value` (dereferenced if a weak reference) if it is trackable.

  Raises:
    ValueError: If it is not.
  """
  if accept_weak_references and isinstance(value, weakref.ref):
    value = value()
  if not isinstance(value, (tf_base.Trackable, def_function.Function)):
    # TensorFlow's phrases: `CheckpointV1` (no weak references) does not
    # name the argument.
    expecting = (f"{name} to be a trackable object"
                 if accept_weak_references else "a trackable object")
    raise ValueError(
        f"`Checkpoint` was expecting {expecting} (an object derived from "
        f"`Trackable`), got {value!r} of type {type(value).__name__}, for "
        f"{name!r}. Only trackable objects (variables, modules, layers, "
        "optimizers, ...) can be checkpointed.")
  return value


def _assign_trackable_arguments(checkpoint, kwargs):
  """Assigns `kwargs` as attributes of `checkpoint`, requiring trackables.

  Returns:
    `{name: trackable}` in name order, weak references dereferenced.

  Raises:
    ValueError: If a value is not trackable.
  """
  assigned = {}
  for name, value in sorted(kwargs.items(), key=lambda item: item[0]):
    if isinstance(value, tf_data_structures.NoDependency):
      value = value.value  # Tracked all the same, as TensorFlow does.
    setattr(checkpoint, name, value)
    assigned[name] = _check_trackable(
        name,
        getattr(checkpoint, name),
        accept_weak_references=checkpoint._ACCEPTS_WEAK_REFERENCES)
  return assigned


class _CheckpointBase(auto_trackable.AutoTrackable,
                      manager_protocol.ManagedCheckpoint):
  """What `Checkpoint` and `CheckpointV1` share: objects, a save counter,
  and what a `CheckpointManager` asks of them (`ManagedCheckpoint`)."""

  # Whether arguments may be weak references to trackables.
  _ACCEPTS_WEAK_REFERENCES = False
  # Whether the asynchronous option is honoured (TensorFlow's `CheckpointV1`
  # saves synchronously).
  _ASYNC_SAVES = False

  def __init__(self, **kwargs: Any) -> None:
    super().__init__()
    _assign_trackable_arguments(self, kwargs)
    self._save_counter: Any = None  # Created lazily, for restore-on-create.
    self._save_assign_op = None
    self._pending_writes = None  # This checkpoint's background writer.
    self._saver = trackable_saver.saver_with_op_caching(self)

  def _maybe_create_save_counter(self):
    if self._save_counter is None:
      with ops.device("/cpu:0"):
        self._save_counter = wrapping.NoDependency(
            variable_creation.add_variable(self,
                                           name="save_counter",
                                           initializer=0,
                                           dtype=dtypes.int64,
                                           trainable=False))
      self._attach_save_counter()

  def _attach_save_counter(self):
    """Hook for `Checkpoint(root=...)`, whose save counter is attached."""

  @property
  def save_counter(self):
    """An int64 variable counting saves; numbers the checkpoints."""
    self._maybe_create_save_counter()
    return self._save_counter

  def _write(self, file_prefix, session=None, options=None):
    """Writes a checkpoint at `file_prefix`: a save that records no state.

    Returns:
      The path written (a tensor inside a `tf.function`).
    """
    file_prefix = _as_path(file_prefix)
    with save_transaction.one_save_at_a_time(file_prefix):
      self._finish_pending_write()
      if getattr(options, "durable", False):
        commit.check_durable(file_prefix)
      plan = save_transaction.planned(file_prefix, options, make_directory=True)
      return self._save_planned(plan, options, session=session)

  def _save(self, save_path, session=None, options=None):
    """Counts the save, writes "<save_path>-<count>", records it as latest.

    Returns:
      The path written.
    """
    save_path = _as_path(save_path)
    with save_transaction.one_save_at_a_time(save_path):
      return self._save_numbered(save_path, session, options)

  def _save_numbered(self, save_path, session, options):
    """`_save`, alone among the saves into its directory."""
    self._finish_pending_write()
    if getattr(options, "durable", False):
      commit.check_durable(save_path)
    try:
      count, session = self._count_save(save_path, session, options)
      numbered_path = save_transaction.numbered(save_path, count)
      plan = save_transaction.planned(numbered_path,
                                      options,
                                      base=save_path,
                                      state_file=state_file.STATE_FILENAME,
                                      make_directory=True)
      return self._save_planned(plan,
                                options,
                                session=session,
                                record=functools.partial(
                                    save_transaction.record_latest,
                                    durable=plan.durable))
    finally:  # A save that failed before writing leaves no ops built for it.
      self._saver.forget_built_save_ops()

  def save_planned(self,
                   plan: save_transaction.SavePlan,
                   options: Options,
                   record: Optional[Callable] = None) -> PathOrTensor:
    """Runs the rest of a save a `CheckpointManager` planned (eagerly, or
    in the default session)."""
    return self._save_planned(plan, options, record=record)

  def _save_planned(self, plan, options, session=None, record=None):
    """Runs the rest of a save planned by `save`, `write` or a manager.

    Steps 2 to 4 of `save_transaction`, with `record` as step 4.

    Returns:
      The path written (a tensor inside a `tf.function`).
    """
    if self._writes_in_background(options):
      return self._save_in_background(plan, options, record)
    transaction = save_transaction.SaveTransaction(plan, record)
    return transaction.run(lambda save_path: save_transaction.path_string(
        self._saver.write_shards(save_path, session, options)))

  def _save_in_background(self, plan, options, record):
    """An asynchronous save: steps 2 to 4 run in the background.

    The values are read first, the last part of the plan.

    Returns:
      The path the save writes.
    """
    snapshot = self._saver.snapshot()
    plan = dataclasses.replace(plan,
                               save_path=save_transaction.path_string(
                                   plan.save_path))
    transaction = save_transaction.SaveTransaction(plan, record)
    self._async_writer().start(lambda: transaction.run(
        lambda save_path: snapshot.write(save_path, options)))
    return plan.save_path

  def _count_save(self, save_path, session, options):
    """Adds one to the save counter; returns the count and the session.

    Graph building, the counter's and the save's ops are built at the
    first save, then run in `session` (default: the default session).

    Raises:
      NotImplementedError: Inside a `tf.function`.
    """
    if context.executing_eagerly():
      return self._increment_save_counter().numpy(), session
    if ops.inside_function():
      raise NotImplementedError(
          "Calling tf.train.Checkpoint.save() from a function is not "
          "supported: save() also numbers the checkpoint and records it in "
          "the directory's state file, which a traced function cannot do. "
          "Call tf.train.Checkpoint.write() in the function instead; it "
          "writes the checkpoint only, so tf.train.latest_checkpoint() will "
          "not list it.")
    session = sessions.default_session(session,
                                       f"save checkpoint to {save_path!r}")
    if self._save_assign_op is None:  # Built once, then run at each save.
      return self._count_first_graph_save(session, options), session
    return session.run(self._save_assign_op), session

  def _count_first_graph_save(self, session, options):
    """The first graph-mode save's count, the save's ops built first.

    A session sends its whole graph again at each run that finds new ops,
    and plans every new set of fetches over the whole graph (tens of ms per
    thousand variables each), so the counter's and the save's ops are all
    built before anything runs, and a new counter is set to 1 in one run
    instead of initialized, then incremented. A sharding callback may run
    the counter while the save's ops are built: with one, a new counter is
    initialized first (TensorFlow's order).
    """
    new_counter = self._save_counter is None
    increment = self._increment_save_counter()
    first_count = None
    if new_counter and sharding.sharding_callback(options) is not None:
      session.run(self.save_counter.initializer)
    elif new_counter:
      with ops.colocate_with(self.save_counter):
        first_count = self.save_counter.assign(1, read_value=True)
    try:
      self._saver.build_save_ops(options)
    except Exception:
      if first_count is not None:  # A later save increments the counter.
        session.run(self.save_counter.initializer)
      raise
    self._save_assign_op = wrapping.NoDependency(increment)
    return session.run(increment if first_count is None else first_count)

  def _writes_in_background(self, options):
    """Whether this save is asynchronous; graph building, never (warned)."""
    if not (self._ASYNC_SAVES and async_checkpoint.requested(options)):
      return False
    if context.executing_eagerly():
      return True
    logging.warning("Saving async checkpoint in graph mode is currently not "
                    "supported; switching to regular sync checkpoint instead "
                    "(asynchronous saves are for eager execution).")
    return False

  def _async_writer(self):
    """This checkpoint's background writer, created on first use."""
    with _WRITER_CREATION:
      if self._pending_writes is None:
        self._pending_writes = async_checkpoint.AsyncWriter()
      return self._pending_writes

  def _finish_pending_write(self):
    """Waits for a pending asynchronous write; raises its error, if any."""
    if self._pending_writes is not None:
      self._pending_writes.sync()

  def _increment_save_counter(self):
    """Adds one to the save counter; returns the new count (or its op)."""
    with ops.colocate_with(self.save_counter):
      return self.save_counter.assign_add(1, read_value=True)

  def _restore(self, save_path, options=None, check_values_first=False):
    """Restores the objects and the save counter.

    The save counter is created first, so that every restore, the first
    included, finds the same objects (and, graph building, the same restore
    ops to run together). A pending asynchronous write finishes first.
    """
    self._finish_pending_write()
    self._maybe_create_save_counter()
    status = self._saver.restore(save_path=save_path,
                                 options=options,
                                 check_values_first=check_values_first)
    if isinstance(status, name_based_status.NameBasedSaverStatus):
      status.add_to_optionally_restored(self.save_counter)
    return status

  def preview_restore(self,
                      save_path: CheckpointPath,
                      options: Options = None) -> map_preview.RestorePreview:
    """What restoring `save_path` with `options` would do; assigns nothing.

    Matches the checkpoint's objects to this checkpoint's as a restore
    would, from each pair of `options.object_map` (or from the root), and
    returns a `RestorePreview`: which value would go into which object,
    the values without an object, the objects without a value, and the
    values whose shape or dtype does not fit. `str()` of it reads as a
    report; `complete` says whether all matched and fit.

    Raises:
      NotFoundError, ValueError: As the restore would, for a path of the
        object map missing in the checkpoint or in the program.
    """
    return self._saver.preview_restore(_as_path(save_path), options)

  def restore_newest_intact(self,
                            candidates: Iterable[str],
                            options: Options = None) -> Tuple[str, List[str]]:
    """Restores the newest intact checkpoint of `candidates` (newest first).

    What `CheckpointManager.restore_or_initialize` calls: each restore is
    all or nothing; see `self_healing`. `options` are each restore's.

    Returns:
      The restored path, and the damaged paths skipped.
    """
    return self_healing.restore_newest_intact(
        lambda save_path: self._restore(
            save_path, options=options, check_values_first=True), candidates)


def _as_path(save_path):
  """A path-like prefix as a string; strings and tensors unchanged."""
  if isinstance(save_path, os.PathLike):
    return os.fspath(save_path)
  return save_path


class CheckpointV1(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF1 API).

  Like `Checkpoint`, but `save`, `write` and `restore` work when graph
  building too: they run in `session` (default: the default session), and
  restores return restore ops to run with `run_restore_ops` or
  `initialize_or_restore`.
  """

  def write(self,
            file_prefix: CheckpointPath,
            session: Session = None,
            options: Options = None) -> PathOrTensor:
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, session=session, options=options)

  def save(self,
           file_prefix: CheckpointPath,
           session: Session = None,
           options: Options = None) -> PathOrTensor:
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, session=session, options=options)

  @named_restores.restore_pointing_to_intact
  def restore(self,
              save_path: Optional[CheckpointPath],
              options: Options = None) -> load_status.LoadStatus:
    """Restores from `save_path`; returns a load status."""
    return self._restore(save_path, options=options)


class Checkpoint(_CheckpointBase):
  """Groups trackable objects for saving and restoring (TF2 API).

  Keyword arguments become dependencies under their names:

    checkpoint = Checkpoint(model=model, optimizer=optimizer)
    path = checkpoint.save("/tmp/training/ckpt")
    checkpoint.restore(path).assert_consumed()

  Restoring before variables exist restores them when they are created.
  With `root=obj`, `obj` itself is the root of the saved object graph and
  the other arguments (and the save counter) are attached to it.
  """

  _ACCEPTS_WEAK_REFERENCES = True
  _ASYNC_SAVES = True

  def __init__(self, root: Any = None, **kwargs: Any) -> None:
    if root is None:
      self._attached_dependencies = None
      super().__init__(**kwargs)
      return
    auto_trackable.AutoTrackable.__init__(self)  # pylint: disable=non-parent-init-called
    self._root = root
    root_object = _check_trackable("root", root, accept_weak_references=True)
    tensorflow_internals.initialize(root_object)
    kwargs["root"] = root
    # Held weakly by the graph view (this checkpoint holds them), so that
    # restores deferred in the root do not form cycles through them.
    attached = []
    for name, value in _assign_trackable_arguments(self, kwargs).items():
      existing = tensorflow_internals.lookup_dependency(root_object, name)
      if existing is None:
        attached.append(graph_walk.WeakTrackableReference(name, value))
      elif existing is not value:
        raise ValueError(
            f"Cannot create a Checkpoint with keyword argument {name} if "
            f"root.{name} already exists.")
    self._attached_dependencies = wrapping.NoDependency(attached)
    existing_counter = tensorflow_internals.lookup_dependency(
        root_object, "save_counter")
    self._save_counter = wrapping.NoDependency(existing_counter)
    self._save_assign_op = None
    self._pending_writes = None
    self._saver = trackable_saver.TrackableSaver(
        graph_walk.ObjectGraphView(root, attached_dependencies=attached))

  def _attach_save_counter(self):
    if self._attached_dependencies is None:
      return
    # Held strongly, unlike the other attached objects: a load status may
    # outlive this checkpoint, and still finds the counter through the view.
    self._attached_dependencies.append(
        trackable.TrackableReference("save_counter", self._save_counter))
    root = self._saver.graph_view.root
    waiting = tensorflow_internals.deferred_dependencies(root).pop(
        "save_counter", ())
    if waiting:
      waiting[0].restore(self._save_counter)

  def write(self,
            file_prefix: CheckpointPath,
            options: Options = None) -> PathOrTensor:
    """Writes a checkpoint at `file_prefix`, without numbering or state."""
    return self._write(file_prefix, options=options)

  def save(self,
           file_prefix: CheckpointPath,
           options: Options = None) -> PathOrTensor:
    """Writes "<file_prefix>-<save_counter>" and updates `latest_checkpoint`."""
    return self._save(file_prefix, options=options)

  @named_restores.restore_pointing_to_intact
  def read(self,
           save_path: CheckpointPath,
           options: Options = None) -> load_status.LoadStatus:
    """Restores a checkpoint written by `write` (no save counter handling)."""
    self._finish_pending_write()
    return self._saver.restore(save_path=save_path, options=options)

  @named_restores.restore_pointing_to_intact
  def restore(self,
              save_path: Optional[CheckpointPath],
              options: Options = None) -> load_status.LoadStatus:
    """Restores from `save_path` (a checkpoint or a SavedModel directory).

    Returns:
      A load status.
    """
    return self._restore(_saved_model_variables_path(save_path),
                         options=options)

  def sync(self) -> None:
    """Waits for the pending asynchronous write; raises its error, if any."""
    self._finish_pending_write()


def _saved_model_variables_path(save_path):
  """The checkpoint inside a SavedModel directory, else `save_path`."""
  if save_path is None:
    return None
  path = _as_path(save_path)
  if file_io.is_directory(path) and any(
      file_io.file_exists(os.path.join(path, name))
      for name in ("saved_model.pb", "saved_model.pbtxt")):
    return os.path.join(path, "variables", "variables")
  return save_path


def streaming_restore(status: load_status.LoadStatus,
                      session: Session = None) -> None:
  """When graph building, runs restore ops as soon as they are created.

  Restore ops for dependencies added later (deferred restores) run in
  `session` as they are created. Nothing to do when executing eagerly.

  Raises:
    NotImplementedError: For name-based checkpoints.
  """
  if context.executing_eagerly():
    return
  session = sessions.default_session(session, "stream restore ops")
  if isinstance(status, name_based_status.NameBasedSaverStatus):
    raise NotImplementedError(
        "Streaming restore not supported from name-based checkpoints when "
        "graph building: restore the name-based checkpoint with "
        "`Checkpoint.restore()` (and run its restore ops), or eagerly.")
  # An object-based status here: `CheckpointLoadStatus`.
  status.stream_restore_ops(session)  # type: ignore[attr-defined]


module_names.keep_module_name("tf_objckpt.checkpoint", CheckpointV1, Checkpoint)
