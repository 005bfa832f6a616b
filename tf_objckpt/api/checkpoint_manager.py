"""`CheckpointManager`: numbers, keeps and deletes one object's checkpoints.

A manager plans each save of its checkpoint object and records it (steps 1
and 4 of `api.save_transaction`) in the directory's `checkpoint` state
file (`engine.state_file`), so TensorFlow and tf_objckpt can take turns
managing the same directory. Which checkpoints it keeps is decided by
`retention`, from its checkpoint list alone. TensorFlow's name for this
module is `checkpoint_management`, which re-exports it with the state
file's functions.
"""

import collections
import copy
import dataclasses
import functools
import inspect
import numbers
import os
import time
from typing import Any, Callable, List, Optional, Union

import numpy as np
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management as tf_checkpoint_management
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.api import manager_protocol
from tf_objckpt.api import retention
from tf_objckpt.api import save_transaction
from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import commit
from tf_objckpt.engine import directory_lock
from tf_objckpt.engine import leftovers
from tf_objckpt.engine import save_errors
from tf_objckpt.engine import state_file
from tf_objckpt.foundation import module_names
from tf_objckpt.foundation.type_hints import Options


def _evaluate(value):
  """Returns the value of a tensor, variable or Python number."""
  if isinstance(value, (numbers.Number, np.number)):
    return value
  if tf.executing_eagerly():
    return value.numpy()
  return tf.compat.v1.get_default_session().run(value)


def _accepts_options(fn):
  try:
    params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return False
  return any(p.name == "options" or p.kind == p.VAR_KEYWORD for p in params)


class CheckpointManager(tf_checkpoint_management.CheckpointManager):
  """Numbers, keeps and deletes the checkpoints of one checkpoint object.

  Works with `tf.train.Checkpoint`, `tf_objckpt.Checkpoint` and any object
  with `save_counter`, `write` (or `_write`) and `restore`. Its state lives in
  the `checkpoint` file of `directory`, so a new manager resumes where the
  last one stopped.

  One manager writes in a directory at a time. A manager that finds the
  state file changed since it last read or wrote it (another manager, in
  this process or another, saved there since) refuses to save, rather than
  forget or delete the other's checkpoints; a new manager takes over. On
  local paths the check and the save run under an exclusive lock of the
  directory, so two processes cannot both pass it.

  Starting, and at each save, a manager removes what interrupted saves of
  its checkpoints left behind (see `commit`), and a failed save leaves
  neither files nor a changed state file.

  A subclass of `tf.train.CheckpointManager` only so that TensorFlow code
  that recognises managers by type (`PreemptionCheckpointHandler`) accepts
  this one: every method and property is ours, and TensorFlow's
  constructor never runs.
  """

  def __init__(
      self,  # pylint: disable=super-init-not-called
      checkpoint: Any,
      directory: Union[str, os.PathLike],
      max_to_keep: Optional[int],
      keep_checkpoint_every_n_hours: Optional[float] = None,
      checkpoint_name: str = "ckpt",
      step_counter: Any = None,
      checkpoint_interval: Optional[int] = None,
      init_fn: Optional[Callable[[], Any]] = None,
      last_checkpoint_step: Optional[int] = None) -> None:
    """Creates a manager for the checkpoints of `checkpoint` in `directory`.

    Args:
      checkpoint: The checkpoint object to save and restore.
      directory: Where checkpoints and the state file are written.
      max_to_keep: How many checkpoints stay in the active set; older ones
        are deleted unless preserved. None keeps all of them.
      keep_checkpoint_every_n_hours: When leaving the active set, a checkpoint
        at least this many hours younger than the last preserved one is kept
        on disk (and forgotten). None preserves nothing.
      checkpoint_name: Base name of the checkpoint prefixes.
      step_counter: A variable holding the training step; required with
        `checkpoint_interval`.
      checkpoint_interval: Minimum number of steps between two checkpoints.
      init_fn: Called by `restore_or_initialize` if there is no checkpoint.
      last_checkpoint_step: Step of the last checkpoint saved, if known.

    Raises:
      ValueError: If `max_to_keep` is not positive or None, or if
        `checkpoint_interval` is given without `step_counter`.
    """
    if max_to_keep is not None and max_to_keep <= 0:
      raise ValueError(
          "Expected a positive integer or `None` for `max_to_keep`, got %d." %
          (max_to_keep,))
    if checkpoint_interval is not None and step_counter is None:
      raise ValueError("`step_counter` should be passed if "
                       "`checkpoint_interval` is not None.")
    self._checkpoint = checkpoint
    self._save_counter_assign = None
    self._retention = retention.Policy(max_to_keep,
                                       keep_checkpoint_every_n_hours)
    self._directory = os.fspath(directory)
    self._checkpoint_prefix = os.path.join(self._directory, checkpoint_name)
    self._init_fn = init_fn
    self._checkpoint_interval = checkpoint_interval
    if checkpoint_interval is not None:
      self._step_counter = step_counter
      self._last_checkpoint_step = last_checkpoint_step
    self._maybe_delete: "collections.OrderedDict[str, float]" = (
        collections.OrderedDict())
    # Names of checkpoints `restore_or_initialize` found damaged: kept on
    # disk, unless a save replaces them.
    self._damaged: set[str] = set()
    self._recover_state()
    leftovers.remove_stale(self._checkpoint_prefix,
                           keep=self._listed_names(),
                           state_file=state_file.STATE_FILENAME)

  def _recover_state(self):
    """Loads the managed checkpoints from the directory's state file."""
    state, self._state_seen = state_file.checkpoint_state_and_text(
        self._directory)
    now = time.time()
    if state is None:
      self._latest_checkpoint = None
      # A second back, so a manager re-created at once still preserves.
      self._last_preserved_timestamp = now - 1.
      return
    self._latest_checkpoint = state.model_checkpoint_path
    if now < state.last_preserved_timestamp:
      logging.warning(
          "time.time() returned a value %f seconds behind the last preserved "
          "checkpoint timestamp." % (state.last_preserved_timestamp - now))
    retained = retention.after_restart(state.all_model_checkpoint_paths,
                                       state.all_model_checkpoint_timestamps,
                                       state.last_preserved_timestamp, now)
    self._maybe_delete.update(retained.active)
    self._last_preserved_timestamp = retained.last_preserved_timestamp

  @property
  def directory(self) -> str:
    return self._directory

  @property
  def checkpoint_interval(self) -> Optional[int]:
    return self._checkpoint_interval

  @property
  def checkpoint(self) -> Any:
    """The managed checkpoint object."""
    return self._checkpoint

  @property
  def latest_checkpoint(self) -> Optional[str]:
    """Prefix of the newest checkpoint in `directory`, or None."""
    return self._latest_checkpoint

  @property
  def checkpoints(self) -> List[str]:
    """Prefixes of the active checkpoints, oldest first.

    Checkpoints preserved by `keep_checkpoint_every_n_hours` are not listed.
    """
    return list(self._maybe_delete)

  @property
  def _prefix(self):
    return self._checkpoint_prefix

  def _listed_names(self):
    """Names of the checkpoints the state file lists, or found damaged."""
    return {
        os.path.basename(path)
        for path in list(self._maybe_delete) + [self._latest_checkpoint]
        if path
    } | self._damaged

  def _check_state_unchanged(self):
    """Raises if another writer changed the state file since we saw it.

    Raises:
      FailedPreconditionError: If the state file differs from the one this
        manager last read or wrote.
    """
    text = state_file.state_text(self._directory)
    if text is None or text == self._state_seen:
      return
    raise errors.FailedPreconditionError(
        None, None,
        f"The checkpoint state file in {self._directory!r} changed since "
        "this CheckpointManager last read or wrote it: another "
        "CheckpointManager (in this process or another) or a "
        "Checkpoint.save() has saved there since. Saving now would forget "
        "or delete its checkpoints, so nothing was saved. Only one manager "
        "may write in a directory; create a new CheckpointManager to take "
        "the directory over.")

  def _record_state(self, durable=False):
    """Writes the manager's state to the directory's state file."""
    paths, timestamps = zip(*self._maybe_delete.items())
    self._state_seen = state_file.write_state(
        self._directory,
        model_checkpoint_path=self._latest_checkpoint,
        all_model_checkpoint_paths=paths,
        latest_filename=None,
        save_relative_paths=True,
        all_model_checkpoint_timestamps=timestamps,
        last_preserved_timestamp=self._last_preserved_timestamp,
        durable=durable)

  def _record_and_sweep(self, save_path, save, durable=False):
    """Step 4 of a save: lists `save_path` as the newest, deletes old ones.

    The state file is written once, listing the new checkpoint and no
    longer those beyond `max_to_keep`, and only then are their files
    deleted. A process killed in between leaves files the state file does
    not list (a data file without its index is removed as a leftover when
    the next manager starts), never a listed checkpoint whose files are
    gone. (TensorFlow writes the state file before and after deleting.)
    The save is kept (`save.keep()`) once the state file lists it; if that
    write fails, the manager forgets the checkpoint too.
    """
    self._remove_rest_of_damaged(save_path)
    retained = retention.after_save(self._maybe_delete.items(),
                                    (save_path, time.time()),
                                    self._last_preserved_timestamp,
                                    self._retention)
    previous = (self._maybe_delete, self._latest_checkpoint,
                self._last_preserved_timestamp)
    self._maybe_delete = collections.OrderedDict(retained.active)
    self._latest_checkpoint = save_path
    self._last_preserved_timestamp = retained.last_preserved_timestamp
    try:
      self._record_state(durable)
    except BaseException:
      (self._maybe_delete, self._latest_checkpoint,
       self._last_preserved_timestamp) = previous
      raise
    save.keep()
    self._sweep(retained.deleted)

  def _sweep(self, deleted_paths=()):
    """Deletes the files of the checkpoints retention dropped.

    TensorFlow's `_sweep` also decides what to drop; ours is told, since
    `retention.after_save` decides before the state file is written.
    """
    for path in deleted_paths:
      state_file.delete_matching(path + ".index")
      state_file.delete_matching(path + state_file.V2_DATA_GLOB)

  def _remove_rest_of_damaged(self, save_path):
    """Removes the data files a damaged checkpoint `save_path` had beyond
    those of the save that replaced it (it may have had more shards)."""
    name = os.path.basename(save_path)
    if name not in self._damaged:
      return
    self._damaged.discard(name)
    header, _ = bundle_index.read_header_and_keys(save_path)
    written = "-of-%05d" % header.num_shards
    for path in file_io.get_matching_files(save_path + state_file.V2_DATA_GLOB):
      if not path.endswith(written):
        file_io.delete_file(path)

  def _increment_save_counter(self):
    """Adds one to the checkpoint's save counter and returns the counter."""
    if tf.executing_eagerly():
      counter = self._checkpoint.save_counter
      counter.assign_add(1)
      return counter
    session = tf.compat.v1.get_default_session()

    def initializing_creator(next_creator, **kwargs):
      v = next_creator(**kwargs)
      session.run(v.initializer)
      return v

    with tf.variable_creator_scope(initializing_creator):
      counter = self._checkpoint.save_counter
    if self._save_counter_assign is None:
      self._save_counter_assign = counter.assign_add(1, read_value=False)
    session.run(self._save_counter_assign)
    return counter

  def _write(self, plan, options):
    """Steps 2 to 4 of a save planned by `save`; step 4 records and sweeps.

    Our checkpoint objects run them (`ManagedCheckpoint`; in the
    background, for asynchronous saves); others are written through their
    own `write`.
    """
    record = functools.partial(self._record_and_sweep, durable=plan.durable)
    if isinstance(self._checkpoint, manager_protocol.ManagedCheckpoint):
      return self._checkpoint.save_planned(plan, options, record=record)
    # Their write runs the options' callbacks itself.
    transaction = save_transaction.SaveTransaction(
        dataclasses.replace(plan, callbacks=()), record)
    return self._write_through(transaction, options)

  def _write_through(self, transaction, options):
    """Writes with the checkpoint object's own `write` (TensorFlow's).

    TensorFlow's asynchronous write says its files are final only through
    the options' write callbacks, from its own thread: the save commits and
    records from there, as TensorFlow's manager records.
    """
    writer = getattr(self._checkpoint, "_write", None)
    if writer is None or not _accepts_options(writer):
      writer = self._checkpoint.write
    if not _accepts_options(writer):
      if options is not None:
        raise TypeError("%s does not accept `options`." % (writer,))
      return transaction.run(writer)
    if not getattr(options, "experimental_enable_async_checkpoint", False):
      return transaction.run(
          lambda save_path: writer(save_path, options=options))
    options = copy.copy(options)
    options.experimental_write_callbacks = (
        list(options.experimental_write_callbacks or []) + [transaction.finish])
    return transaction.start(
        lambda save_path: writer(save_path, options=options))

  def _due(self, check_interval):
    """Whether to save now, with `checkpoint_interval`, and the step."""
    if self._checkpoint_interval is None:
      return True, None
    step = _evaluate(self._step_counter)
    last = self._last_checkpoint_step
    if last is not None:
      if step == last:
        return False, step
      if check_interval and step < last + self._checkpoint_interval:
        return False, step
    return True, step

  def save(self,
           checkpoint_number: Any = None,
           check_interval: bool = True,
           options: Options = None) -> Optional[str]:
    """Writes a new checkpoint and deletes the ones no longer kept.

    Args:
      checkpoint_number: Number for the new prefix: an int, or an integer
        tensor or variable (read, never incremented). Defaults to the
        checkpoint's `save_counter`, which is incremented either way.
      check_interval: With `checkpoint_interval`, skip saving unless at least
        that many steps passed since the last checkpoint. If False, save
        unless the step already has a checkpoint.
      options: Optional `tf.train.CheckpointOptions` for the write.

    Returns:
      The new checkpoint's prefix, or None if nothing was saved.

    Raises:
      FailedPreconditionError: If another writer changed the state file
        since this manager last read or wrote it.
    """
    with save_transaction.one_save_at_a_time(self._prefix):
      return self._save_when_due(check_interval, checkpoint_number, options)

  def _save_when_due(self, check_interval, checkpoint_number, options):
    """`save`, alone among the saves into the manager's directory."""
    due, step = self._due(check_interval)
    if not due:
      return None
    if getattr(options, "durable", False):
      commit.check_durable(self._prefix)
    # A pending asynchronous save records (or raises) before we check.
    self.sync()
    with save_errors.explaining_failures(self._prefix):
      file_io.recursive_create_dir(self._directory)  # To lock it.
    with directory_lock.exclusively(self._directory):
      self._check_state_unchanged()
      if self._checkpoint_interval is not None:
        self._last_checkpoint_step = step
      counter = self._increment_save_counter()
      if checkpoint_number is None:
        checkpoint_number = counter
      if not isinstance(checkpoint_number, (numbers.Integral, np.integer)):
        checkpoint_number = int(_evaluate(checkpoint_number))
      plan = save_transaction.planned(save_transaction.numbered(
          self._prefix, checkpoint_number),
                                      options,
                                      base=self._prefix,
                                      keep=frozenset(self._listed_names()),
                                      state_file=state_file.STATE_FILENAME)
      return self._write(plan, options)

  def restore_or_initialize(self, options: Options = None) -> Optional[str]:
    """Restores the newest intact checkpoint, or calls `init_fn` if none.

    With a tf_objckpt checkpoint, a damaged checkpoint (what `tf-objckpt
    verify` finds: a missing or damaged index, a missing, short or corrupt
    data file, a damaged object graph) is skipped with a warning, and the
    next newest is tried: the managed checkpoints, then the directory's
    other `<checkpoint_name>-<n>`, such as those kept by
    `keep_checkpoint_every_n_hours`, also when the state file is missing or
    unreadable. Nothing is assigned from a damaged checkpoint, and damaged
    files stay on disk. `latest_checkpoint` becomes the restored path, and
    `checkpoints` leaves out the damaged ones. With another checkpoint
    object (TensorFlow's), the latest checkpoint is restored as TensorFlow
    does.

    Args:
      options: Optional `CheckpointOptions` of the restore (not
      TensorFlow's argument): an `object_map`, say, to start fine-tuning
      from a pretrained checkpoint; given to another checkpoint object's
      `restore` as is.

    Returns:
      The restored prefix, or None if nothing was restored.

    Raises:
      The newest checkpoint's error if every checkpoint is damaged; at once,
      the error of a restore failing for another reason (a shape mismatch).
    """
    if isinstance(self._checkpoint, manager_protocol.ManagedCheckpoint):
      restored = self._restore_newest_intact(
          lambda candidates: self._checkpoint.restore_newest_intact(
              candidates, options))
    else:
      restored = self._latest_checkpoint
      if restored is not None:
        if options is None:
          self._checkpoint.restore(restored)
        else:
          self._checkpoint.restore(restored, options=options)
    if restored is not None:
      if self._checkpoint_interval is not None:
        self._last_checkpoint_step = _evaluate(self._step_counter)
      return restored
    if self._init_fn is not None:
      self._init_fn()
      logging.info("Initialized through `init_fn`.")
    return None

  def _restore_newest_intact(self, restore_newest_intact):
    """Restores the newest intact candidate; None if there is none."""
    listed = [self._latest_checkpoint] if self._latest_checkpoint else []
    listed = list(dict.fromkeys(listed + list(reversed(self._maybe_delete))))
    if listed:
      candidates = self._candidates(listed)
    else:
      candidates = self._unlisted_checkpoints(listed)
      if not candidates:
        return None
      logging.warning(
          "The checkpoint state file in %r is missing or unreadable, but "
          "checkpoints are there: restoring the newest intact one.",
          self._directory)
    restored, damaged = restore_newest_intact(candidates)
    for path in damaged:
      self._maybe_delete.pop(path, None)
      self._damaged.add(os.path.basename(path))
    self._latest_checkpoint = restored
    return restored

  def _candidates(self, listed):
    """`listed`, then the directory's others (listed once all of those fail)."""
    yield from listed
    yield from self._unlisted_checkpoints(listed)

  def _unlisted_checkpoints(self, listed):
    """The directory's `<checkpoint_name>-<n>` not in `listed`, newest first."""
    return state_file.unlisted_checkpoints(
        self._directory, listed, os.path.basename(self._checkpoint_prefix))

  def sync(self) -> None:
    """Waits for the checkpoint object's outstanding saves and restores."""
    sync = getattr(self._checkpoint, "sync", None)
    if sync is not None:
      sync()


module_names.keep_module_name("tf_objckpt.checkpoint_management",
                              CheckpointManager)
