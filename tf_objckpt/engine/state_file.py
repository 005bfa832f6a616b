"""The `checkpoint` state file, and the checkpoints of a directory.

The state file in a directory is a text-format `CheckpointState` proto
naming the latest checkpoint and the ones still managed. It is read and
written here exactly as TensorFlow does (atomically, and flushed for durable
saves), so TensorFlow and tf_objckpt can take turns managing the same
directory. Also here: whether a checkpoint exists, its files' times, and
removing one; `checkpoint_management` makes these TensorFlow's public names.
"""

import contextlib
import os
import re
from typing import List, Optional, Sequence

from google.protobuf import text_format
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState
from tensorflow.python.util import deprecation

from tf_objckpt.engine import commit
from tf_objckpt.engine import temporary_names

STATE_FILENAME = "checkpoint"
# The data files of a V2 checkpoint, as a glob pattern after its prefix.
V2_DATA_GLOB = ".data-?????-of-?????"


def _state_path(save_dir, latest_filename):
  return os.path.join(save_dir, latest_filename or STATE_FILENAME)


def _atomic_write(file_path, contents, durable=False):
  """Writes `contents` to `file_path`: readers see the old or the new file.

  The text goes to a uniquely named temporary file beside `file_path`, which is
  then renamed over it. On file systems without atomic renames the file is
  written in place, as TensorFlow does. `durable` (local paths) flushes the
  file to disk before the rename and the directory after it.
  """
  if durable:
    commit.check_durable(file_path)
  if not file_io.has_atomic_move(file_path):
    file_io.write_string_to_file(file_path, contents)
    return
  temp_path = temporary_names.temporary_copy(file_path)
  try:
    file_io.write_string_to_file(temp_path, contents)
    if durable:
      commit.fsync(temp_path)
    file_io.rename(temp_path, file_path, overwrite=True)
    if durable:
      commit.fsync(os.path.dirname(file_path) or ".")
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


def generate_checkpoint_state_proto(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None) -> CheckpointState:
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
        "(got paths %s and timestamps %s): %d timestamps for %d paths." %
        (paths, list(all_model_checkpoint_timestamps),
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


def update_checkpoint_state_internal(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    latest_filename: Optional[str] = None,
    save_relative_paths: bool = False,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None,
    durable: bool = False) -> None:
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
  write_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths,
              latest_filename, save_relative_paths,
              all_model_checkpoint_timestamps, last_preserved_timestamp,
              durable)


def write_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths,
                latest_filename, save_relative_paths,
                all_model_checkpoint_timestamps, last_preserved_timestamp,
                durable):
  """`update_checkpoint_state_internal`, returning the text written.

  A manager keeps the text, to tell later whether another writer changed
  the file since (`state_text`).
  """
  state_path = _state_path(save_dir, latest_filename)
  paths = all_model_checkpoint_paths  # Passed on as given, as TF does.
  if save_relative_paths:
    paths = paths or []

    def rel(p):
      return os.path.relpath(p, save_dir) if os.path.isabs(p) else p

    model_checkpoint_path = rel(model_checkpoint_path)
    paths = [rel(p) for p in paths]
  state = generate_checkpoint_state_proto(
      save_dir,
      model_checkpoint_path,
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
def update_checkpoint_state(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    latest_filename: Optional[str] = None,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None) -> None:
  """Atomically rewrites the checkpoint state file, keeping paths as given.

  See `update_checkpoint_state_internal` for the arguments.

  Raises:
    RuntimeError: If the checkpoint path is the state file's own path.
  """
  update_checkpoint_state_internal(
      save_dir,
      model_checkpoint_path,
      all_model_checkpoint_paths=all_model_checkpoint_paths,
      latest_filename=latest_filename,
      save_relative_paths=False,
      all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
      last_preserved_timestamp=last_preserved_timestamp)


def get_checkpoint_state(
    checkpoint_dir: str,
    latest_filename: Optional[str] = None) -> Optional[CheckpointState]:
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
  return checkpoint_state_and_text(checkpoint_dir, latest_filename)[0]


def state_text(checkpoint_dir, latest_filename=None):
  """The state file's text, or None if there is none.

  Raises:
    OpError: If the file exists and cannot be read.
  """
  state_path = _state_path(checkpoint_dir, latest_filename)
  if not file_io.file_exists(state_path):
    return None
  return file_io.read_file_to_string(state_path)


def checkpoint_state_and_text(checkpoint_dir, latest_filename=None):
  """`get_checkpoint_state`, and the text it read (None if none).

  The text is returned also when it is not a `CheckpointState` (the state
  is None then), so that a manager can tell a changed file from its own.
  """
  checkpoint_dir = os.fspath(checkpoint_dir)
  state_path = _state_path(checkpoint_dir, latest_filename)
  text = None
  try:
    text = state_text(checkpoint_dir, latest_filename)
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


def _checkpoint_file(save_path, format_version):
  """The file that marks a checkpoint: the V2 index or the V1 data file."""
  if format_version == saver_pb2.SaverDef.V2:
    return save_path + ".index"
  return save_path


def latest_checkpoint(checkpoint_dir: str,
                      latest_filename: Optional[str] = None) -> Optional[str]:
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


def checkpoint_exists_internal(checkpoint_prefix: str) -> bool:
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
def checkpoint_exists(checkpoint_prefix: str) -> bool:
  """Whether a V2 (preferred) or V1 checkpoint exists at `checkpoint_prefix`."""
  return checkpoint_exists_internal(checkpoint_prefix)


@deprecation.deprecated(date=None,
                        instructions="Stat the checkpoint's files directly.")
def get_checkpoint_mtimes(checkpoint_prefixes: Sequence[str]) -> List[float]:
  """Returns modification times (seconds) of the checkpoints that exist.

  For each prefix the V2 index file is tried first, then the V1 data file.
  Missing checkpoints are skipped, so the result may be shorter than the input.
  """
  return checkpoint_mtimes(checkpoint_prefixes)


def checkpoint_mtimes(checkpoint_prefixes):
  """`get_checkpoint_mtimes` for our own code, which warns of nothing.

  TensorFlow's deprecation warning is for callers who can change the call.
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
  name = (r".+?" if checkpoint_name is None else re.escape(checkpoint_name) +
          r"-\d+")
  files = re.compile(rf"({name})(?:\.index|\.data-\d{{5}}-of-\d{{5}})")
  try:
    entries = file_io.list_directory(directory)
  except errors.NotFoundError:
    return []
  names = {match.group(1) for match in map(files.fullmatch, entries) if match}

  def newest_first(name):
    number = re.search(r"-(\d+)$", name)
    return (-int(number.group(1)) if number else 1, name)

  return [
      os.path.join(directory, name) for name in sorted(names, key=newest_first)
  ]


def comparable(save_path):
  """`save_path` in a form equal for every spelling of one local path.

  The state file may hold absolute paths (the v1 `Saver` writes them) where
  a directory was named by a relative one; other file systems' paths are
  only normalized.
  """
  if "://" in save_path:
    return os.path.normpath(save_path)
  return os.path.abspath(save_path)


def unlisted_checkpoints(directory, listed, checkpoint_name=None):
  """`directory_checkpoints` that are not among the prefixes `listed`.

  A prefix counts as listed however it is spelled there (relative or
  absolute, with redundant separators).
  """
  seen = {comparable(path) for path in listed}
  return [
      path for path in directory_checkpoints(directory, checkpoint_name)
      if comparable(path) not in seen
  ]


def delete_matching(pattern):
  """Deletes the files matching the glob `pattern`; missing ones are fine.

  Another process may delete the same files at the same time: one that
  vanishes first is logged, not an error.
  """
  for path in file_io.get_matching_files(pattern):
    try:
      file_io.delete_file(path)
    except errors.NotFoundError:
      logging.warning(
          "Hit NotFoundError when deleting '%s', possibly because "
          "another process/thread is also deleting/moving the "
          "same file: it vanished before it could be deleted.", path)


@deprecation.deprecated(date=None,
                        instructions="Delete the checkpoint's files directly.")
def remove_checkpoint(checkpoint_prefix: str,
                      checkpoint_format_version: int = saver_pb2.SaverDef.V2,
                      meta_graph_suffix: str = "meta") -> None:
  """Deletes the files of a checkpoint and its meta graph.

  Args:
    checkpoint_prefix: Prefix of a V1 or V2 checkpoint.
    checkpoint_format_version: `SaverDef.V1` or `SaverDef.V2` (default).
    meta_graph_suffix: Suffix of the `MetaGraphDef` file.
  """
  remove_checkpoint_files(checkpoint_prefix, checkpoint_format_version,
                          meta_graph_suffix)


def remove_checkpoint_files(save_path,
                            checkpoint_format_version=saver_pb2.SaverDef.V2,
                            meta_graph_suffix="meta"):
  """`remove_checkpoint` for our own code, which warns of nothing."""
  delete_matching(meta_graph_filename(save_path, meta_graph_suffix))
  if checkpoint_format_version == saver_pb2.SaverDef.V2:
    delete_matching(save_path + ".index")
    delete_matching(save_path + V2_DATA_GLOB)
  else:
    delete_matching(save_path)


def meta_graph_filename(checkpoint_filename: str,
                        meta_graph_suffix: str = "meta") -> str:
  """Returns the meta graph file name for a (possibly sharded) checkpoint.

  A shard suffix such as "-00001-of-00002" or "-?????-of-00002" is dropped
  before `.meta_graph_suffix` is appended.
  """
  base = re.sub(r"-[\d\?]+-of-\d+$", "", checkpoint_filename)
  return base + "." + meta_graph_suffix
