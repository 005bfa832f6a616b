"""Objects saved by savers registered with `register_checkpoint_saver`.

TensorFlow's registration (used by DTensor and TPU embeddings) gives the
objects a predicate accepts their own save and restore functions. Both
libraries must write the same checkpoint (the saver's file merged first,
the object graph naming the saver), restore each other's through the
restore function, and skip objects the predicate rejects when the saver
allows it (`CheckpointPosition.skip_restore`).

Covers: tf_objckpt.engine.registered_savers.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.saved_model import registration
from tensorflow.python.trackable import autotrackable

import testlib as tl


class Table(autotrackable.AutoTrackable):
  """State only the registered saver writes (under "<name>-values")."""

  def __init__(self, values):
    self.values = tf.Variable(values, trainable=False)


class StrictTable(Table):
  """The same, with a saver that refuses objects its predicate rejects."""


class NotATable(autotrackable.AutoTrackable):
  """What a program restores into where a table was saved."""

  def __init__(self):
    self.values = tf.Variable(np.zeros(3, np.float32))


CALLS = []  # (function, sorted object names) of each call.


def _save_fn(trackables, file_prefix):
  CALLS.append(("save", sorted(trackables)))
  names = sorted(trackables)
  tf.raw_ops.SaveV2(
      prefix=file_prefix,
      tensor_names=[f"{name}-values" for name in names],
      shape_and_slices=[""] * len(names),
      tensors=[trackables[name].values.read_value() for name in names])
  return [file_prefix]


def _restore_fn(trackables, merged_prefix):
  CALLS.append(("restore", sorted(trackables)))
  names = sorted(trackables)
  values = tf.raw_ops.RestoreV2(
      prefix=merged_prefix,
      tensor_names=[f"{name}-values" for name in names],
      shape_and_slices=[""] * len(names),
      dtypes=[tf.float32] * len(names))
  for name, value in zip(names, values):
    trackables[name].values.assign(value)


registration.register_checkpoint_saver(
    package="tf_objckpt_test",
    name="Table",
    predicate=lambda obj: type(obj) is Table,  # pylint: disable=unidiomatic-typecheck
    save_fn=_save_fn,
    restore_fn=_restore_fn,
    strict_predicate_restore=False)
registration.register_checkpoint_saver(
    package="tf_objckpt_test",
    name="StrictTable",
    predicate=lambda obj: isinstance(obj, StrictTable),
    save_fn=_save_fn,
    restore_fn=_restore_fn,
    strict_predicate_restore=True)


def _model(table_type=Table):
  model = tf.Module()
  model.tables = [table_type([1., 2., 3.]), table_type([4., 5., 6.])]
  model.dense = tf.Variable([7., 8.])
  return model


def _write_both(tmp_path, table_type=Table):
  paths = {}
  for impl, lib in tl.IMPLS.items():
    del CALLS[:]
    paths[impl] = lib.Checkpoint(model=_model(table_type)).write(
        str(tmp_path / impl / "ckpt"))
    assert CALLS == [("save", ["model/tables/0", "model/tables/1"])], impl
  return paths


def test_saves_match_tensorflow(tmp_path):
  paths = _write_both(tmp_path)
  assert tl.file_layout(paths["ours"]) == tl.file_layout(paths["tf"])
  assert tl.object_graph(paths["ours"]) == tl.object_graph(paths["tf"])
  tl.assert_values_equal(tl.values(paths["tf"]), tl.values(paths["ours"]),
                         tl.TENSORFLOWS_AND_OURS)
  registered = [
      node.registered_saver
      for node in tl.object_graph(paths["ours"]).nodes
      if node.registered_saver.name
  ]
  assert [saver.object_name for saver in registered
         ] == ["model/tables/0", "model/tables/1"]
  assert registered[0].name == "tf_objckpt_test.Table"


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_restores_through_the_restore_function(tmp_path, writer, reader):
  path = _write_both(tmp_path)[writer]
  model = _model()
  for table in model.tables:
    table.values.assign(tf.zeros(3))
  model.dense.assign(tf.zeros(2))
  del CALLS[:]
  tl.IMPLS[reader].Checkpoint(model=model).read(path).assert_consumed()
  assert CALLS == [("restore", ["model/tables/0", "model/tables/1"])]
  np.testing.assert_array_equal(model.tables[1].values.numpy(), [4., 5., 6.])
  np.testing.assert_array_equal(model.dense.numpy(), [7., 8.])


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_objects_the_predicate_rejects_are_skipped(tmp_path, writer):
  """Not strict: the restore function is not called for them (both).

  Their dependencies restore as usual: the table's variable, saved under
  its own key too, gets its value from there.
  """
  path = _write_both(tmp_path)[writer]
  outcomes = {}
  for reader, lib in tl.IMPLS.items():
    model = tf.Module()
    model.tables = [NotATable(), NotATable()]
    model.dense = tf.Variable([0., 0.])
    del CALLS[:]
    lib.Checkpoint(model=model).read(path).expect_partial()
    outcomes[reader] = (list(CALLS), model.tables[0].values.numpy().tolist(),
                        model.dense.numpy().tolist())
  assert outcomes["ours"] == outcomes["tf"]
  assert outcomes["ours"] == ([], [1., 2., 3.], [7., 8.])


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_strict_savers_refuse_other_objects(tmp_path, writer):
  path = _write_both(tmp_path, StrictTable)[writer]
  errors = {}
  for reader, lib in tl.IMPLS.items():
    model = tf.Module()
    model.tables = [NotATable(), NotATable()]
    errors[reader] = tl.outcome(lib.Checkpoint(model=model).read, path).error
  for error in errors.values():
    assert isinstance(error, ValueError), errors
