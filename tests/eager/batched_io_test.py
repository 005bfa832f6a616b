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

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import tuning


def _eager_module(scale):
  module = tf.Module()
  module.variables_list = [tf.Variable(tl.mixed_value(i, scale))
                           for i in range(tl.MANY)]
  return module


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_eager_many_variables_round_trip(tmp_path, writer):
  saved = _eager_module(scale=1)
  path = tl.write(writer, tmp_path / "ckpt", m=saved)
  other_path = tl.write(tl.other(writer), tmp_path / "other", m=saved)
  tl.assert_same_checkpoint(*((path, other_path) if writer == "tf"
                              else (other_path, path)))
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


def test_eager_threaded_read_of_a_corrupt_file_names_it(tmp_path,
                                                        monkeypatch):
  """An error in any thread fails the read, naming the checkpoint.

  TensorFlow fails too, with an IndexError from deep inside; we raise
  DataLossError, as for any unreadable checkpoint, and assign nothing.
  """
  monkeypatch.setattr(tuning.TUNING, "parallel_read_min_bytes", 0)
  path = tl.write("ours", tmp_path / "ckpt", m=_eager_module(scale=1))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "r+b") as f:
    f.truncate(os.path.getsize(data_file) // 2)
  outcomes = {impl: tl.outcome(lib.Checkpoint(m=_eager_module(5)).read,
                               path).name
              for impl, lib in tl.IMPLS.items()}
  assert outcomes == {"tf": "IndexError", "ours": "DataLossError"}
  fresh = _eager_module(scale=5)
  before = tl.variable_values(fresh.variables_list)
  with pytest.raises(tf.errors.DataLossError, match=path):
    tf_objckpt.Checkpoint(m=fresh).read(path)
  tl.assert_variables_equal(before, tl.variable_values(fresh.variables_list))
