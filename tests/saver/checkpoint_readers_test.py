"""Our `load_checkpoint` and its kin against TensorFlow's, on the same files.

The readers are `load_checkpoint`, `list_variables` and `load_variable`.

On the same checkpoints (object-based and name-based, sharded or not,
written by either library) both readers give the same keys, shapes, dtypes
and values. Where they differ on purpose, both behaviours are pinned:
ours takes the checkpoint's own files as users type them (TensorFlow reads
an `.index` path as an empty checkpoint and a data file as a damaged one),
`load_variable` also takes object paths, and errors name the checkpoint
and the closest keys, with TensorFlow's error types.

Covers: tf_objckpt.inspection.checkpoint_reader, tf_objckpt.checkpoint_utils.
"""

import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import base as tf_base

import testlib as tl

_BY_NAME = {
    "dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3),
    "dense/bias": np.array([1, 2, 3], np.int64),
    "step": np.array(7, np.int64),
    "note": np.array(b"text", dtype=object)
}


class _Pair(tf_base.Trackable):
  """An object saving two values of its own."""

  def __init__(self):
    self.first = tf.Variable(1.0)
    self.second = tf.Variable([2, 3])

  def _serialize_to_tensors(self):
    return {"first": self.first, "second": self.second}

  def _restore_from_tensors(self, restored_tensors):
    return tf.group(self.first.assign(restored_tensors["first"]),
                    self.second.assign(restored_tensors["second"]))


def _object_based(impl, prefix):
  """An object-based checkpoint of a small model (one per library)."""
  model = tf.Module()
  model.layer = tf.Module()
  model.layer.kernel = tf.Variable(np.arange(4, dtype=np.float32))
  model.layer.bias = tf.Variable([0.5, 1.5])
  model.names = tf.Variable([b"a", b"b"])
  model.pair = _Pair()
  return tl.write(impl, prefix, model=model)


def _checkpoints(tmp_path):
  """`{description: prefix}`: every kind a reader meets."""
  paths = {}
  for impl in tl.IMPLS:
    (tmp_path / impl).mkdir()
    paths[f"object-based by {impl}"] = _object_based(impl,
                                                     tmp_path / impl / "obj")
    paths[f"name-based by {impl}"] = tl.write_with_saver(
        impl, tmp_path / impl / "names", _BY_NAME)
  (tmp_path / "sharded").mkdir()
  two_cpus = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  with tf.Graph().as_default(), tf.compat.v1.Session(
      config=two_cpus) as session:
    with tf.device("/cpu:0"):
      tf.compat.v1.get_variable("a", initializer=np.ones([3], np.float32))
    with tf.device("/cpu:1"):
      tf.compat.v1.get_variable("b", initializer=np.zeros([2], np.int32))
    session.run(tf.compat.v1.global_variables_initializer())
    paths["sharded name-based"] = tf.compat.v1.train.Saver(sharded=True).save(
        session, str(tmp_path / "sharded" / "ckpt"), write_meta_graph=False)
  return paths


def _utils(impl):
  return tl.IMPLS[impl].checkpoint_utils


def _read_everything(impl, path):
  """What `impl`'s readers say about `path`: keys, shapes, dtypes, values."""
  utils = _utils(impl)
  reader = utils.load_checkpoint(path)
  listed = utils.list_variables(path)
  return {
      "listed":
          listed,
      "shapes":
          reader.get_variable_to_shape_map(),
      "dtypes":
          reader.get_variable_to_dtype_map(),
      "has": [reader.has_tensor(key) for key, _ in listed] +
             [reader.has_tensor("nothing")],
      "values": {
          key: reader.get_tensor(key) for key, _ in listed
      },
      "loaded": {
          key: utils.load_variable(path, key) for key, _ in listed
      },
      "debug":
          reader.debug_string(),
  }


@pytest.fixture(name="checkpoints")
def _checkpoints_fixture(tmp_path):
  return _checkpoints(tmp_path)


def test_readers_agree_with_tensorflow(checkpoints):
  for path in checkpoints.values():
    for name in (path, os.path.dirname(path)):
      read = tl.agreed(_read_everything, name)
      assert read["listed"] == sorted(read["shapes"].items())


def test_path_like_and_bytes_paths(checkpoints):
  path = checkpoints["object-based by ours"]
  for given in (pathlib.Path(path), path.encode()):
    tl.agreed(lambda impl, name: _utils(impl).list_variables(name), given)


def test_checkpoint_files_name_their_checkpoint(checkpoints):
  path = checkpoints["name-based by tf"]
  expected = tf.train.list_variables(path)
  index, data = path + ".index", path + ".data-00000-of-00001"
  ours = _utils("ours")
  assert ours.list_variables(index) == expected
  assert ours.list_variables(data) == expected
  np.testing.assert_array_equal(ours.load_variable(data, "dense/kernel"),
                                _BY_NAME["dense/kernel"])
  # TensorFlow reads the index as an empty V1 checkpoint and fails on a
  # data file.
  assert tf.train.list_variables(index) == []
  assert isinstance(
      tl.outcome(tf.train.list_variables, data).error, tf.errors.DataLossError)


def test_no_checkpoint_raises_tensorflows_types_naming_the_path(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  unlisted = tmp_path / "unlisted"
  unlisted.mkdir()
  tl.write("tf", unlisted / "ckpt", v=tf.Variable(1.0))
  for path, error_type in ((str(tmp_path / "missing"), tf.errors.NotFoundError),
                           (str(empty), ValueError), (str(unlisted),
                                                      ValueError)):
    errors = {
        impl: tl.outcome(_utils(impl).load_checkpoint, path).error
        for impl in tl.IMPLS
    }
    tl.assert_same_error_type(errors, error_type)
    assert path in str(errors["ours"])
  # A directory without a state file: ours lists the checkpoints it holds.
  assert str(unlisted / "ckpt") in str(
      tl.outcome(_utils("ours").load_checkpoint, str(unlisted)).error)


def test_data_files_without_their_index(checkpoints):
  path = checkpoints["name-based by ours"]
  os.remove(path + ".index")
  errors = {
      impl: tl.outcome(_utils(impl).list_variables, path).error
      for impl in tl.IMPLS
  }
  tl.assert_same_error_type(errors, tf.errors.NotFoundError)
  assert f"{path + '.index'!r} is missing" in str(errors["ours"])


def test_missing_key_names_the_checkpoint_and_the_closest(checkpoints):
  path = checkpoints["name-based by tf"]
  readers = {impl: _utils(impl).load_checkpoint(path) for impl in tl.IMPLS}
  errors = {
      impl: tl.outcome(reader.get_tensor, "dense/kernal").error
      for impl, reader in readers.items()
  }
  tl.assert_same_error_type(errors, tf.errors.NotFoundError)
  message = str(errors["ours"])
  assert message.startswith("Key dense/kernal not found in checkpoint")
  assert path in message and "Closest: dense/kernel" in message


def test_load_variable_takes_object_paths(checkpoints):
  path = checkpoints["object-based by tf"]
  ours = _utils("ours")
  key = "model/layer/kernel/.ATTRIBUTES/VARIABLE_VALUE"
  np.testing.assert_array_equal(ours.load_variable(path, "model/layer/kernel"),
                                tf.train.load_variable(path, key))
  np.testing.assert_array_equal(ours.load_variable(path, "model/names:0"),
                                [b"a", b"b"])
  # TensorFlow takes keys only; its reader, and ours, too.
  assert isinstance(
      tl.outcome(tf.train.load_variable, path, "model/layer/kernel").error,
      tf.errors.NotFoundError)
  error = tl.outcome(
      ours.load_checkpoint(path).get_tensor, "model/layer/kernel").error
  assert isinstance(error, tf.errors.NotFoundError)
  assert repr(key) in str(error)


def test_load_variable_names_what_an_object_path_holds(checkpoints):
  path = checkpoints["object-based by ours"]
  ours = _utils("ours")
  # The pair holds two values: the error names their keys.
  error = tl.outcome(ours.load_variable, path, "model/pair").error
  assert isinstance(error, tf.errors.NotFoundError)
  assert "holds several values" in str(error)
  assert "model/pair/.ATTRIBUTES/second" in str(error)
  # `model/layer` holds none of its own: the closest paths are its children.
  error = tl.outcome(ours.load_variable, path, "model/layer").error
  assert "Closest: model/layer/bias," in str(error)
  error = tl.outcome(ours.load_variable, path, "model/layer/kernl").error
  assert isinstance(error, tf.errors.NotFoundError)
  assert "Closest: model/layer/kernel" in str(error)


def test_load_variable_strips_the_output_index(checkpoints):
  path = checkpoints["name-based by ours"]
  np.testing.assert_array_equal(
      tl.agreed(lambda impl: _utils(impl).load_variable(path, "dense/bias:0")),
      _BY_NAME["dense/bias"])
