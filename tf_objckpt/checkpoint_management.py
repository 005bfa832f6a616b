"""Checkpoint state files and `CheckpointManager`, compatible with TF 2.21.

The `checkpoint` state file in a directory is a text-format `CheckpointState`
proto naming the latest checkpoint and the ones still managed. Everything
here reads and writes it exactly as TensorFlow does, so TensorFlow and
tf_objckpt can take turns managing the same directory.
"""

import collections
import contextlib
import copy
import inspect
import numbers
import os
import re
import time
import uuid

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.checkpoint import checkpoint_management as tf_checkpoint_management
from tensorflow.python.checkpoint import checkpoint_options
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState
from tensorflow.python.util import deprecation

from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import commit
from tf_objckpt.engine import writes

STATE_FILENAME = "checkpoint"
_V2_DATA_GLOB = ".data-?????-of-?????"


def _state_path(save_dir, latest_filename):
  return os.path.join(save_dir, latest_filename or STATE_FILENAME)


def _atomic_write(path, contents, durable=False):
  """Writes `contents` to `path` so readers see the old or the new file only.

  The text goes to a uniquely named temporary file beside `path`, which is
  then renamed over it. On file systems without atomic renames the file is
  written in place, as TensorFlow does. `durable` (local paths) flushes the
  file to disk before the rename and the directory after it.
  """
  if durable:
    commit.check_durable(path)
  if not file_io.has_atomic_move(path):
    file_io.write_string_to_file(path, contents)
    return
  temp_path = "%s.tmp%s" % (path, uuid.uuid4().hex)
  try:
    file_io.write_string_to_file(temp_path, contents)
    if durable:
      commit.fsync(temp_path)
    file_io.rename(temp_path, path, overwrite=True)
    if durable:
      commit.fsync(os.path.dirname(path) or ".")
  except BaseException:
    try:
      file_io.delete_file(temp_path)
    except errors.OpError:
      pass
    raise


def _recorded_paths(all_model_checkpoint_paths, model_checkpoint_path):
  """The managed paths, ending with the latest one.

  A list argument is itself extended (and returned), like TensorFlow's;
  other sequences are copied.
  """
  paths = all_model_checkpoint_paths
  if paths is None:
    paths = []
  elif not isinstance(paths, list):
    paths = list(paths)
  if not paths or paths[-1] != model_checkpoint_path:
    logging.info("Adding %s to all_model_checkpoint_paths.",
                 model_checkpoint_path)
    paths.append(model_checkpoint_path)
  return paths


def generate_checkpoint_state_proto(save_dir,
                                    model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None):
  """Builds a `CheckpointState` proto.

  Args:
    save_dir: Directory the checkpoints live in.
    model_checkpoint_path: The latest checkpoint prefix.
    all_model_checkpoint_paths: Prefixes of the managed checkpoints, oldest
      first. `model_checkpoint_path` is appended if it is not the last one.
    all_model_checkpoint_timestamps: Optional creation times (seconds since
      the Epoch), one per entry of `all_model_checkpoint_paths`.
    last_preserved_timestamp: Optional time of the last checkpoint kept by
      `keep_checkpoint_every_n_hours`.

  Returns:
    The `CheckpointState`. When `save_dir` is relative, relative paths are
    rewritten to be relative to `save_dir`. A list given as
    `all_model_checkpoint_paths` is updated to the recorded paths, as
    TensorFlow does.

  Raises:
    ValueError: If timestamps are given and their number differs from the
      number of paths.
  """
  paths = _recorded_paths(all_model_checkpoint_paths, model_checkpoint_path)
  if (all_model_checkpoint_timestamps and
      len(all_model_checkpoint_timestamps) != len(paths)):
    raise ValueError(
        "Checkpoint timestamps, if provided, must match checkpoint paths "
        "(got paths %s and timestamps %s): %d timestamps for %d paths." % (
            paths, list(all_model_checkpoint_timestamps),
            len(all_model_checkpoint_timestamps), len(paths)))
  if not os.path.isabs(save_dir):
    def rel(p):
      return p if os.path.isabs(p) else os.path.relpath(p, save_dir)
    model_checkpoint_path = rel(model_checkpoint_path)
    paths[:] = [rel(p) for p in paths]
  return CheckpointState(
      model_checkpoint_path=model_checkpoint_path,
      all_model_checkpoint_paths=paths,
      all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
      last_preserved_timestamp=last_preserved_timestamp)


def update_checkpoint_state_internal(save_dir,
                                     model_checkpoint_path,
                                     all_model_checkpoint_paths=None,
                                     latest_filename=None,
                                     save_relative_paths=False,
                                     all_model_checkpoint_timestamps=None,
                                     last_preserved_timestamp=None,
                                     durable=False):
  """Atomically rewrites the checkpoint state file in `save_dir`.

  Args:
    save_dir: Directory the checkpoints live in.
    model_checkpoint_path: The latest checkpoint prefix.
    all_model_checkpoint_paths: Prefixes of the managed checkpoints, oldest
      first.
    latest_filename: Name of the state file; defaults to "checkpoint".
    save_relative_paths: If True, absolute paths are stored relative to
      `save_dir`.
    all_model_checkpoint_timestamps: Optional creation times of the paths.
    last_preserved_timestamp: Optional time of the last preserved checkpoint.
    durable: Flush the file to disk (local paths only).

  Raises:
    RuntimeError: If the checkpoint path is the state file's own path.
  """
  _write_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths,
               latest_filename, save_relative_paths,
               all_model_checkpoint_timestamps, last_preserved_timestamp,
               durable)


def _write_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths,
                 latest_filename, save_relative_paths,
                 all_model_checkpoint_timestamps, last_preserved_timestamp,
                 durable):
  """`update_checkpoint_state_internal`; returns the text written."""
  state_path = _state_path(save_dir, latest_filename)
  paths = all_model_checkpoint_paths  # Passed on as given, as TF does.
  if save_relative_paths:
    paths = paths or []
    def rel(p):
      return os.path.relpath(p, save_dir) if os.path.isabs(p) else p
    model_checkpoint_path = rel(model_checkpoint_path)
    paths = [rel(p) for p in paths]
  state = generate_checkpoint_state_proto(
      save_dir, model_checkpoint_path,
      all_model_checkpoint_paths=paths,
      all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
      last_preserved_timestamp=last_preserved_timestamp)
  if state.model_checkpoint_path == state_path:
    raise RuntimeError(
        "Save path '%s' conflicts with path used for checkpoint state: it "
        "is the checkpoint state file. Please use a different save path." %
        model_checkpoint_path)
  text = text_format.MessageToString(state)
  _atomic_write(state_path, text, durable=durable)
  return text


@deprecation.deprecated(
    date=None,
    instructions="Let `tf.train.CheckpointManager` maintain the state file.")
def update_checkpoint_state(save_dir,
                            model_checkpoint_path,
                            all_model_checkpoint_paths=None,
                            latest_filename=None,
                            all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None):
  """Atomically rewrites the checkpoint state file, keeping paths as given.

  See `update_checkpoint_state_internal` for the arguments.

  Raises:
    RuntimeError: If the checkpoint path is the state file's own path.
  """
  update_checkpoint_state_internal(
      save_dir, model_checkpoint_path,
      all_model_checkpoint_paths=all_model_checkpoint_paths,
      latest_filename=latest_filename,
      save_relative_paths=False,
      all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
      last_preserved_timestamp=last_preserved_timestamp)


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
  """Reads the checkpoint state file of `checkpoint_dir`.

  Relative paths in the file are returned joined to `checkpoint_dir`.

  Args:
    checkpoint_dir: Directory of the checkpoints (str or path-like).
    latest_filename: Name of the state file; defaults to "checkpoint".

  Returns:
    The `CheckpointState`, or None if the file is missing, unreadable or not
    a text-format `CheckpointState`.

  Raises:
    ValueError: If the file parses but names no `model_checkpoint_path`.
  """
  return _checkpoint_state(checkpoint_dir, latest_filename)[0]


def _state_text(checkpoint_dir, latest_filename=None):
  """The state file's text, or None if there is none."""
  state_path = _state_path(checkpoint_dir, latest_filename)
  if not file_io.file_exists(state_path):
    return None
  return file_io.read_file_to_string(state_path)


def _checkpoint_state(checkpoint_dir, latest_filename=None):
  """`get_checkpoint_state`, and the text it read (None if none)."""
  checkpoint_dir = os.fspath(checkpoint_dir)
  state_path = _state_path(checkpoint_dir, latest_filename)
  text = None
  try:
    text = _state_text(checkpoint_dir, latest_filename)
    if text is None:
      return None, None
    state = CheckpointState()
    text_format.Merge(text, state)
  except (errors.OpError, text_format.ParseError) as e:
    logging.warning("%s: %s", type(e).__name__, e)
    logging.warning("%s: Checkpoint ignored", state_path)
    return None, text
  if not state.model_checkpoint_path:
    raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
  if not os.path.isabs(state.model_checkpoint_path):
    state.model_checkpoint_path = os.path.join(checkpoint_dir,
                                               state.model_checkpoint_path)
  for i, p in enumerate(state.all_model_checkpoint_paths):
    if not os.path.isabs(p):
      state.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, p)
  return state, text


def _checkpoint_file(prefix, format_version):
  """The file that marks a checkpoint: the V2 index or the V1 data file."""
  if format_version == saver_pb2.SaverDef.V2:
    return prefix + ".index"
  return prefix


def latest_checkpoint(checkpoint_dir, latest_filename=None):
  """Returns the prefix of the latest checkpoint in `checkpoint_dir`.

  Args:
    checkpoint_dir: Directory of the checkpoints.
    latest_filename: Name of the state file; defaults to "checkpoint".

  Returns:
    The prefix named by the state file if a V2 or V1 checkpoint exists there,
    otherwise None.
  """
  state = get_checkpoint_state(checkpoint_dir, latest_filename)
  if state is None or not state.model_checkpoint_path:
    return None
  prefix = state.model_checkpoint_path
  if checkpoint_exists_internal(prefix):
    return prefix
  logging.error("Couldn't match files for checkpoint %s", prefix)
  return None


def checkpoint_exists_internal(checkpoint_prefix):
  """Whether a V2 (preferred) or V1 checkpoint exists at `checkpoint_prefix`."""
  return bool(
      file_io.get_matching_files(
          _checkpoint_file(checkpoint_prefix, saver_pb2.SaverDef.V2)) or
      file_io.get_matching_files(checkpoint_prefix))


def directory_instead_of_prefix(save_path):
  """Says what a directory given as a checkpoint prefix holds, else None."""
  if not isinstance(save_path, str) or not file_io.is_directory(save_path):
    return None
  latest = latest_checkpoint(save_path)
  if latest is None:
    return (f"{save_path!r} is a directory, not a checkpoint prefix, and "
            "holds no checkpoint (no 'checkpoint' state file in it names "
            "one).")
  return (f"{save_path!r} is a directory, not a checkpoint prefix; its "
          f"latest checkpoint is {latest!r} (tf.train.latest_checkpoint "
          "gives it).")


@contextlib.contextmanager
def explaining_directories(save_path):
  """Re-raises a failed read of a directory, saying what the directory holds.

  The error keeps its type (TensorFlow raises `DataLossError` for a
  directory); its message says that the path is a directory and names its
  latest checkpoint, or says that it holds none.
  """
  try:
    yield
  except errors.OpError as e:
    explanation = directory_instead_of_prefix(save_path)
    if explanation is None:
      raise
    raise type(e)(e.node_def, e.op, explanation) from e


@deprecation.deprecated(
    date=None, instructions="Check for the checkpoint's files directly.")
def checkpoint_exists(checkpoint_prefix):
  """Whether a V2 (preferred) or V1 checkpoint exists at `checkpoint_prefix`."""
  return checkpoint_exists_internal(checkpoint_prefix)


@deprecation.deprecated(
    date=None, instructions="Stat the checkpoint's files directly.")
def get_checkpoint_mtimes(checkpoint_prefixes):
  """Returns modification times (seconds) of the checkpoints that exist.

  For each prefix the V2 index file is tried first, then the V1 data file.
  Missing checkpoints are skipped, so the result may be shorter than the input.
  """
  mtimes = []
  for prefix in checkpoint_prefixes:
    for pattern in (_checkpoint_file(prefix, saver_pb2.SaverDef.V2), prefix):
      matches = file_io.get_matching_files(pattern)
      if matches:
        mtimes.append(file_io.stat(matches[0]).mtime_nsec / 1e9)
        break
  return mtimes


def directory_checkpoints(directory, checkpoint_name=None):
  """Prefixes of the checkpoints in `directory`, found by their files.

  A prefix with an `.index` file or a data file counts, so that one whose
  index is lost is found too; temporary files of saves do not.

  Args:
    directory: The directory to look in.
    checkpoint_name: If given, only prefixes `<checkpoint_name>-<number>`.

  Returns:
    The prefixes, highest number first, then by name.
  """
  name = (r".+?" if checkpoint_name is None else
          re.escape(checkpoint_name) + r"-\d+")
  files = re.compile(rf"({name})(?:\.index|\.data-\d{{5}}-of-\d{{5}})")
  try:
    entries = file_io.list_directory(directory)
  except errors.NotFoundError:
    return []
  names = {match.group(1) for match in map(files.fullmatch, entries) if match}

  def newest_first(name):
    number = re.search(r"-(\d+)$", name)
    return (-int(number.group(1)) if number else 1, name)

  return [os.path.join(directory, name) for name in sorted(names,
                                                           key=newest_first)]


def _delete_matching(pattern):
  for path in file_io.get_matching_files(pattern):
    try:
      file_io.delete_file(path)
    except errors.NotFoundError:
      logging.warning("Hit NotFoundError when deleting '%s', possibly because "
                      "another process/thread is also deleting/moving the "
                      "same file: it vanished before it could be deleted.",
                      path)


@deprecation.deprecated(
    date=None, instructions="Delete the checkpoint's files directly.")
def remove_checkpoint(checkpoint_prefix,
                      checkpoint_format_version=saver_pb2.SaverDef.V2,
                      meta_graph_suffix="meta"):
  """Deletes the files of a checkpoint and its meta graph.

  Args:
    checkpoint_prefix: Prefix of a V1 or V2 checkpoint.
    checkpoint_format_version: `SaverDef.V1` or `SaverDef.V2` (default).
    meta_graph_suffix: Suffix of the `MetaGraphDef` file.
  """
  _delete_matching(meta_graph_filename(checkpoint_prefix, meta_graph_suffix))
  if checkpoint_format_version == saver_pb2.SaverDef.V2:
    _delete_matching(checkpoint_prefix + ".index")
    _delete_matching(checkpoint_prefix + _V2_DATA_GLOB)
  else:
    _delete_matching(checkpoint_prefix)


def meta_graph_filename(checkpoint_filename, meta_graph_suffix="meta"):
  """Returns the meta graph file name for a (possibly sharded) checkpoint.

  A shard suffix such as "-00001-of-00002" or "-?????-of-00002" is dropped
  before `.meta_graph_suffix` is appended.
  """
  base = re.sub(r"-[\d\?]+-of-\d+$", "", checkpoint_filename)
  return base + "." + meta_graph_suffix


def _evaluate(value):
  """Returns the value of a tensor, variable or Python number."""
  if isinstance(value, (numbers.Number, np.number)):
    return value
  if tf.executing_eagerly():
    return value.numpy()
  return tf.compat.v1.get_default_session().run(value)


def with_write_callback(options, callback):
  """A copy of `tf.train.CheckpointOptions` (or new ones) adding `callback`.

  Write callbacks run once a checkpoint's files are complete; the copy
  keeps the caller's options unchanged.
  """
  options = (checkpoint_options.CheckpointOptions() if options is None
             else copy.copy(options))
  options.experimental_write_callbacks = (
      list(options.experimental_write_callbacks or []) + [callback])
  return options


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

  def __init__(self,  # pylint: disable=super-init-not-called
               checkpoint,
               directory,
               max_to_keep,
               keep_checkpoint_every_n_hours=None,
               checkpoint_name="ckpt",
               step_counter=None,
               checkpoint_interval=None,
               init_fn=None,
               last_checkpoint_step=None):
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
    self._max_to_keep = max_to_keep
    # Seconds between checkpoints kept beyond `max_to_keep` (None: none).
    self._preserve_interval = (keep_checkpoint_every_n_hours * 3600.
                               if keep_checkpoint_every_n_hours else None)
    self._directory = os.fspath(directory)
    self._checkpoint_prefix = os.path.join(self._directory, checkpoint_name)
    self._init_fn = init_fn
    self._checkpoint_interval = checkpoint_interval
    if checkpoint_interval is not None:
      self._step_counter = step_counter
      self._last_checkpoint_step = last_checkpoint_step
    self._maybe_delete = collections.OrderedDict()
    # Names of checkpoints `restore_or_initialize` found damaged: kept on
    # disk, unless a save replaces them.
    self._damaged = set()
    self._recover_state()
    commit.remove_stale(self._checkpoint_prefix, keep=self._listed_names(),
                        state_file=STATE_FILENAME)

  def _recover_state(self):
    """Loads the managed checkpoints from the directory's state file."""
    state, self._state_seen = _checkpoint_state(self._directory)
    now = time.time()
    if state is None:
      self._latest_checkpoint = None
      # A second back, so a manager re-created at once still preserves.
      self._last_preserved_timestamp = now - 1.
      return
    self._latest_checkpoint = state.model_checkpoint_path
    self._last_preserved_timestamp = state.last_preserved_timestamp
    if now < self._last_preserved_timestamp:
      logging.warning(
          "time.time() returned a value %f seconds behind the last preserved "
          "checkpoint timestamp." % (self._last_preserved_timestamp - now))
      self._last_preserved_timestamp = now
    paths = list(state.all_model_checkpoint_paths)
    timestamps = (list(state.all_model_checkpoint_timestamps) or
                  [self._last_preserved_timestamp] * len(paths))
    for path, timestamp in zip(paths, timestamps):
      timestamp = min(timestamp, now)
      if timestamp > self._last_preserved_timestamp:
        self._maybe_delete[path] = timestamp

  @property
  def directory(self):
    return self._directory

  @property
  def checkpoint_interval(self):
    return self._checkpoint_interval

  @property
  def checkpoint(self):
    """The managed checkpoint object."""
    return self._checkpoint

  @property
  def latest_checkpoint(self):
    """Prefix of the newest checkpoint in `directory`, or None."""
    return self._latest_checkpoint

  @property
  def checkpoints(self):
    """Prefixes of the active checkpoints, oldest first.

    Checkpoints preserved by `keep_checkpoint_every_n_hours` are not listed.
    """
    return list(self._maybe_delete)

  @property
  def _prefix(self):
    return self._checkpoint_prefix

  def _listed_names(self):
    """Names of the checkpoints the state file lists, or found damaged."""
    return {os.path.basename(path) for path in
            list(self._maybe_delete) + [self._latest_checkpoint] if path
            } | self._damaged

  def _check_state_unchanged(self):
    """Raises if another writer changed the state file since we saw it.

    Raises:
      FailedPreconditionError: If the state file differs from the one this
        manager last read or wrote.
    """
    text = _state_text(self._directory)
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

  def _sweep(self):
    """Deletes or preserves the checkpoints beyond `max_to_keep`."""
    if not self._max_to_keep:
      return
    while len(self._maybe_delete) > self._max_to_keep:
      path, timestamp = self._maybe_delete.popitem(last=False)
      interval = self._preserve_interval
      if (interval and
          timestamp - interval >= self._last_preserved_timestamp):
        self._last_preserved_timestamp = timestamp
        continue
      _delete_matching(path + ".index")
      _delete_matching(path + _V2_DATA_GLOB)

  def _record_state(self, durable=False):
    """Writes the manager's state to the directory's state file."""
    paths, timestamps = zip(*self._maybe_delete.items())
    self._state_seen = _write_state(
        self._directory, model_checkpoint_path=self._latest_checkpoint,
        all_model_checkpoint_paths=paths, latest_filename=None,
        save_relative_paths=True, all_model_checkpoint_timestamps=timestamps,
        last_preserved_timestamp=self._last_preserved_timestamp,
        durable=durable)

  def _record_and_sweep(self, save_path, save, durable=False):
    """Adds `save_path` as the newest checkpoint, then deletes old ones.

    The save commits once the state file lists it; if that write fails, the
    manager forgets the checkpoint too. Durable saves are flushed to disk
    first.
    """
    if durable:
      save.sync()
    self._remove_rest_of_damaged(save_path)
    previous = (collections.OrderedDict(self._maybe_delete),
                self._latest_checkpoint)
    self._maybe_delete.pop(save_path, None)  # A rewrite moves to the end.
    self._maybe_delete[save_path] = time.time()
    self._latest_checkpoint = save_path
    # Record before deleting, so an interruption leaves the new checkpoint
    # recorded; record again once the deleted ones are gone.
    try:
      self._record_state(durable)
    except BaseException:
      self._maybe_delete, self._latest_checkpoint = previous
      raise
    save.commit()
    self._sweep()
    self._record_state(durable)

  def _remove_rest_of_damaged(self, save_path):
    """Removes the data files a damaged checkpoint `save_path` had beyond
    those of the save that replaced it (it may have had more shards)."""
    name = os.path.basename(save_path)
    if name not in self._damaged:
      return
    self._damaged.discard(name)
    header, _ = bundle_index.read_header_and_keys(save_path)
    written = "-of-%05d" % header.num_shards
    for path in file_io.get_matching_files(save_path + _V2_DATA_GLOB):
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

  def _write(self, prefix, options, save):
    """Writes the checkpoint at `prefix`, then records and sweeps.

    When the writer takes `options`, recording runs as a write callback, so
    that asynchronous writes are recorded once their files exist. A writer
    that ignores callbacks is recorded right after it returns.
    """
    durable = getattr(options, "durable", False)
    writer = getattr(self._checkpoint, "_write", None)
    if writer is None or not _accepts_options(writer):
      writer = self._checkpoint.write
    if not _accepts_options(writer):
      if options is not None:
        raise TypeError("%s does not accept `options`." % (writer,))
      save_path = writer(prefix)
      self._record_and_sweep(save_path, save)
      return save_path
    recorded = []

    def callback(save_path):
      recorded.append(save_path)
      # An asynchronous write calls back from its own thread, inside its own
      # `commit.saving(prefix)`: the record commits that one. Otherwise this
      # thread's save of `prefix` is `save`.
      with commit.saving(prefix) as current:
        self._record_and_sweep(save_path, current, durable)

    options = with_write_callback(options, callback)
    save_path = writer(prefix, options=options)
    if not recorded and not getattr(
        options, "experimental_enable_async_checkpoint", False):
      self._record_and_sweep(save_path, save, durable)
    return save_path

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

  @writes.one_save_at_a_time
  def save(self, checkpoint_number=None, check_interval=True, options=None):
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
    due, step = self._due(check_interval)
    if not due:
      return None
    if getattr(options, "durable", False):
      commit.check_durable(self._prefix)
    # A pending asynchronous save records (or raises) before we check.
    self.sync()
    with commit.explaining_failures(self._prefix):
      file_io.recursive_create_dir(self._directory)  # To lock it.
    with commit.exclusively(self._directory):
      self._check_state_unchanged()
      if self._checkpoint_interval is not None:
        self._last_checkpoint_step = step
      counter = self._increment_save_counter()
      if checkpoint_number is None:
        checkpoint_number = counter
      if not isinstance(checkpoint_number, (numbers.Integral, np.integer)):
        checkpoint_number = int(_evaluate(checkpoint_number))
      prefix = "%s-%d" % (self._prefix, checkpoint_number)
      with commit.saving(prefix, base=self._prefix,
                         keep=self._listed_names(),
                         state_file=STATE_FILENAME) as save:
        return self._write(prefix, options, save)

  def restore_or_initialize(self):
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

    Returns:
      The restored prefix, or None if nothing was restored.

    Raises:
      The newest checkpoint's error if every checkpoint is damaged; at once,
      the error of a restore failing for another reason (a shape mismatch).
    """
    restore_newest_intact = getattr(self._checkpoint,
                                    "_restore_newest_intact", None)
    if restore_newest_intact is None:
      restored = self._latest_checkpoint
      if restored is not None:
        self._checkpoint.restore(restored)
    else:
      restored = self._restore_newest_intact(restore_newest_intact)
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
    seen = {os.path.normpath(path) for path in listed}
    return [path for path in directory_checkpoints(
        self._directory, os.path.basename(self._checkpoint_prefix))
            if os.path.normpath(path) not in seen]

  def sync(self):
    """Waits for the checkpoint object's outstanding saves and restores."""
    sync = getattr(self._checkpoint, "sync", None)
    if sync is not None:
      sync()
