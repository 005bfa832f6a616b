"""Checkpoints of many variables, which go through the batched paths.

Many variables are read with one `_ReadVariablesOp` per device (and, when
graph building, found through `_VarHandlesOp`s), large eager reads run
`RestoreV2` in several threads, and graph-mode restores read and assign
batches of variables with one function call each. Each test checks, against TensorFlow, that these checkpoints have
TensorFlow's keys and values, restore both ways, and fail as TensorFlow's.
"""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import compat_util as cu
from tf_objckpt import functional_saver
from tf_objckpt import variable_batches
import tf_objckpt

# Enough variables for graph-mode batches, several of them and a partial one.
_COUNT = variable_batches.GRAPH_BATCH_SIZE * 2 + 7
_DTYPES = (np.float32, np.int64, np.bool_, np.float16, np.complex64,
           np.int8, np.uint16, object)


def _initial_value(index, scale):
  """A value of a dtype and shape that vary with `index`."""
  dtype = _DTYPES[index % len(_DTYPES)]
  shape = [index % 3, 2] if index % 5 else []
  if dtype is object:
    return np.full(shape, f"s{index * scale}", dtype=object)
  return (np.ones(shape) * (index * scale % 7)).astype(dtype)


def _eager_module(scale):
  module = tf.Module()
  module.variables_list = [tf.Variable(_initial_value(i, scale))
                           for i in range(_COUNT)]
  return module


@pytest.mark.parametrize("writer", cu.IMPLS)
def test_eager_many_variables_round_trip(tmp_path, writer):
  saved = _eager_module(scale=1)
  path = cu.write(writer, tmp_path / "ckpt", m=saved)
  other_path = cu.write(cu.other(writer), tmp_path / "other", m=saved)
  cu.assert_same_checkpoint(*((path, other_path) if writer == "tf"
                              else (other_path, path)))
  fresh = _eager_module(scale=3)
  cu.CHECKPOINT_CLASSES[cu.other(writer)](m=fresh).read(path).assert_consumed()
  cu.assert_variables_equal(cu.variable_values(saved.variables_list),
                            cu.variable_values(fresh.variables_list))


def test_eager_threaded_read_matches_tensorflow(tmp_path, monkeypatch):
  """A read split across threads gives every variable its own value."""
  monkeypatch.setattr(functional_saver, "_PARALLEL_READ_MIN_BYTES", 0)
  saved = _eager_module(scale=1)
  path = cu.write("tf", tmp_path / "ckpt", m=saved)
  fresh = _eager_module(scale=5)
  tf_objckpt.Checkpoint(m=fresh).read(path).assert_consumed()
  cu.assert_variables_equal(cu.variable_values(saved.variables_list),
                            cu.variable_values(fresh.variables_list))


def test_eager_threaded_read_of_a_corrupt_file_names_it(tmp_path,
                                                        monkeypatch):
  """An error in any thread fails the read, naming the checkpoint.

  TensorFlow fails too, with an IndexError from deep inside; we raise
  DataLossError, as for any unreadable checkpoint, and assign nothing.
  """
  monkeypatch.setattr(functional_saver, "_PARALLEL_READ_MIN_BYTES", 0)
  path = cu.write("ours", tmp_path / "ckpt", m=_eager_module(scale=1))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "r+b") as f:
    f.truncate(os.path.getsize(data_file) // 2)
  outcomes = {impl: cu.outcome(lambda cls=cls: cls(m=_eager_module(5)).read(
      path)) for impl, cls in cu.CHECKPOINT_CLASSES.items()}
  assert outcomes == {"tf": "IndexError", "ours": "DataLossError"}
  fresh = _eager_module(scale=5)
  before = cu.variable_values(fresh.variables_list)
  with pytest.raises(tf.errors.DataLossError, match=path):
    tf_objckpt.Checkpoint(m=fresh).read(path)
  cu.assert_variables_equal(before, cu.variable_values(fresh.variables_list))


_GRAPH_IMPLS = {
    "tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
    "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1),
}


class _GraphProgram:
  """Many graph-mode variables of several dtypes, and a session."""

  def __init__(self, impl, scale):
    autotrackable_cls, checkpoint_cls = _GRAPH_IMPLS[impl]
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.variables = [
          tf.compat.v1.get_variable(
              f"v{i}", initializer=_initial_value(i, scale),
              use_resource=bool(i % 11))
          for i in range(_COUNT)]
      self.root = autotrackable_cls()
      self.root.variables = self.variables
      self.checkpoint = checkpoint_cls(root=self.root)
      self.session = tf.compat.v1.Session()
      self.session.run(tf.compat.v1.global_variables_initializer())

  def values(self):
    with self.graph.as_default():
      return self.session.run(self.variables)

  def num_ops(self):
    return len(self.graph.get_operations())


def _graph_save(impl, prefix):
  program = _GraphProgram(impl, scale=1)
  with program.graph.as_default():
    path = program.checkpoint.save(prefix, session=program.session)
    ops_after_first = program.num_ops()
    program.checkpoint.save(prefix, session=program.session)
    assert program.num_ops() == ops_after_first
  return program, path


@pytest.mark.parametrize("writer", list(_GRAPH_IMPLS))
def test_graph_many_variables_round_trip(tmp_path, writer):
  saved, path = _graph_save(writer, str(tmp_path / writer / "ckpt"))
  _, other_path = _graph_save(cu.other(writer),
                              str(tmp_path / "other" / "ckpt"))
  cu.assert_same_checkpoint(*((path, other_path) if writer == "tf"
                              else (other_path, path)))
  reader = _GraphProgram(cu.other(writer), scale=3)
  with reader.graph.as_default():
    status = reader.checkpoint.restore(path).assert_consumed()
    status.run_restore_ops(reader.session)
    before = reader.num_ops()
    reader.checkpoint.restore(path).run_restore_ops(reader.session)
    assert reader.num_ops() == before
  for expected, actual in zip(saved.values(), reader.values()):
    np.testing.assert_array_equal(np.asarray(expected), np.asarray(actual))


def test_graph_restore_ops_read_the_fed_checkpoint(tmp_path):
  """Cached batched restore ops restore whichever checkpoint is restored."""
  first, first_path = _graph_save("ours", str(tmp_path / "a" / "ckpt"))
  second = _GraphProgram("ours", scale=2)
  with second.graph.as_default():
    second_path = second.checkpoint.save(str(tmp_path / "b" / "ckpt"),
                                         session=second.session)
  reader = _GraphProgram("ours", scale=3)
  with reader.graph.as_default():
    for source, path in ((first, first_path), (second, second_path),
                         (first, first_path)):
      reader.checkpoint.restore(path).run_restore_ops(reader.session)
      for expected, actual in zip(source.values(), reader.values()):
        np.testing.assert_array_equal(np.asarray(expected),
                                      np.asarray(actual))


def test_graph_restore_in_several_batches(tmp_path, monkeypatch):
  """Full and partial restore batches each restore their own variables.

  Batches hold variables of one dtype, and one function serves every batch
  of a dtype and size.
  """
  batch_size = 4
  monkeypatch.setattr(variable_batches, "GRAPH_RESTORE_BATCH_SIZE",
                      batch_size)
  saved, path = _graph_save("tf", str(tmp_path / "ckpt"))
  reader = _GraphProgram("ours", scale=3)
  with reader.graph.as_default():
    reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
        reader.session)
  for expected, actual in zip(saved.values(), reader.values()):
    np.testing.assert_array_equal(np.asarray(expected), np.asarray(actual))
  counts = collections.Counter(
      v.dtype.base_dtype for v in reader.variables
      if resource_variable_ops.is_resource_variable(v))
  batch_kinds = {(dtype, size) for dtype, count in counts.items()
                 for size in (min(count, batch_size), count % batch_size)
                 if size}
  assert any(count % batch_size for count in counts.values())
  assert len(cu.function_library_names(reader.graph)) == len(batch_kinds)


def test_graph_restore_of_corrupt_data_fails_like_tensorflow(tmp_path):
  """A value failing its checksum fails the restore as in TensorFlow.

  The data file holds the save counter (8 bytes), the variables, then the
  object graph. The bytes overwritten here are variables'.
  """
  _, path = _graph_save("ours", str(tmp_path / "ckpt"))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "r+b") as f:
    f.seek(16)
    f.write(b"\xff" * 32)
  outcomes = {}
  for impl in _GRAPH_IMPLS:
    reader = _GraphProgram(impl, scale=3)
    with reader.graph.as_default():
      status = reader.checkpoint.restore(path)
      outcomes[impl] = cu.outcome(
          lambda: status.run_restore_ops(reader.session))  # pylint: disable=cell-var-from-loop
  assert outcomes == {"tf": "DataLossError", "ours": "DataLossError"}
