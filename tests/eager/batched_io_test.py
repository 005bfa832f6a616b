"""Eager checkpoints of many variables, which go through the batched paths.

Many variables are read with one `_ReadVariablesOp` per device, and large
reads run `RestoreV2` in several threads. Each test checks, against
TensorFlow, that these checkpoints have TensorFlow's keys and values,
restore both ways, and fail as TensorFlow's. (Graph mode:
`graph/graph_many_variables_test.py`.)

Covers: tf_objckpt.engine.variable_batches, tf_objckpt.engine.reads,
tf_objckpt.engine.tuning.
"""

import os

import pytest
import tensorflow as tf
from tensorflow.python.framework import op_callbacks

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import tuning


def _eager_module(scale):
  module = tf.Module()
  module.variables_list = [
      tf.Variable(tl.mixed_value(i, scale)) for i in range(tl.MANY)
  ]
  return module


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_eager_many_variables_round_trip(tmp_path, writer):
  saved = _eager_module(scale=1)
  path = tl.write(writer, tmp_path / "ckpt", m=saved)
  other_path = tl.write(tl.other(writer), tmp_path / "other", m=saved)
  tl.assert_same_checkpoint(*((path,
                               other_path) if writer == "tf" else (other_path,
                                                                   path)))
  fresh = _eager_module(scale=3)
  tl.IMPLS[tl.other(writer)].Checkpoint(m=fresh).read(path).assert_consumed()
  tl.assert_variables_equal(tl.variable_values(saved.variables_list),
                            tl.variable_values(fresh.variables_list))


def test_eager_threaded_read_matches_tensorflow(tmp_path, monkeypatch):
  """A read split across threads gives every variable its own value."""
  monkeypatch.setattr(tuning.TUNING, "parallel_read_min_bytes", 0)
  saved = _eager_module(scale=1)
  path = tl.write("tf", tmp_path / "ckpt", m=saved)
  fresh = _eager_module(scale=5)
  tf_objckpt.Checkpoint(m=fresh).read(path).assert_consumed()
  tl.assert_variables_equal(tl.variable_values(saved.variables_list),
                            tl.variable_values(fresh.variables_list))


def test_eager_threaded_read_of_a_corrupt_file_names_it(tmp_path, monkeypatch):
  """An error in any thread fails the read, naming the checkpoint.

  TensorFlow fails too, with an IndexError from deep inside; we raise
  DataLossError, as for any unreadable checkpoint, and assign nothing.
  """
  monkeypatch.setattr(tuning.TUNING, "parallel_read_min_bytes", 0)
  path = tl.write("ours", tmp_path / "ckpt", m=_eager_module(scale=1))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "r+b") as f:
    f.truncate(os.path.getsize(data_file) // 2)
  outcomes = {
      impl: tl.outcome(lib.Checkpoint(m=_eager_module(5)).read, path).name
      for impl, lib in tl.IMPLS.items()
  }
  assert outcomes == {"tf": "IndexError", "ours": "DataLossError"}
  fresh = _eager_module(scale=5)
  before = tl.variable_values(fresh.variables_list)
  with pytest.raises(tf.errors.DataLossError, match=path):
    tf_objckpt.Checkpoint(m=fresh).read(path)
  tl.assert_variables_equal(before, tl.variable_values(fresh.variables_list))


_EAGER_READ_IN_A_GRAPH_MODE_PROCESS = """
import sys
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_callbacks
from tensorflow.python.eager import context
import testlib as tl

tf.compat.v1.disable_eager_execution()  # New threads start graph building.
impl, path = sys.argv[1:]
with context.eager_mode():
  saved = tf.Module()
  saved.values = [tf.Variable(np.full([3], i, np.float32))
                  for i in range(tl.MANY)]
  tl.IMPLS[impl].Checkpoint(m=saved).write(path)
  fresh = tf.Module()
  fresh.values = [tf.Variable(np.zeros([3], np.float32))
                  for _ in range(tl.MANY)]
  tl.IMPLS[impl].Checkpoint(m=fresh).read(path).assert_consumed()
  print(sum(float(v.numpy().sum()) for v in fresh.values))
"""


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_eager_read_assigns_eagerly_in_a_graph_mode_process(tmp_path, impl):
  """Many variables are assigned on a thread of ours (a shallow stack).

  Such a thread starts in the process's default mode: in a process that
  disabled eager execution, an eager restore must still assign eagerly
  there, rather than build assign ops into a graph.
  """
  result = tl.run_python(_EAGER_READ_IN_A_GRAPH_MODE_PROCESS, impl,
                         tmp_path / "ckpt")
  assert result.returncode == 0, result.stderr[-3000:]
  assert float(result.stdout.split()[-1]) == 3 * sum(range(tl.MANY))


def test_op_callbacks_see_the_assigns_of_a_restore(tmp_path):
  """Op callbacks are kept per thread: with some, assigns stay on the caller's.

  As in TensorFlow, a callback registered before the restore sees one
  assign per variable.
  """
  path = tl.write("tf", tmp_path / "ckpt", m=_eager_module(scale=1))
  assigns = {}
  for impl, lib in tl.IMPLS.items():
    seen = []

    def record(op_type, *unused_args, seen=seen, **unused_kwargs):
      seen.append(op_type)

    fresh = _eager_module(scale=5)
    op_callbacks.add_op_callback(record)
    try:
      lib.Checkpoint(m=fresh).read(path).assert_consumed()
    finally:
      op_callbacks.remove_op_callback(record)
    assigns[impl] = seen.count(b"AssignVariableOp") + seen.count(
        "AssignVariableOp")
  assert assigns == {"tf": tl.MANY, "ours": tl.MANY}
