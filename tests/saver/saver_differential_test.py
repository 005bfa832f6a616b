"""More differential tests of tf_objckpt.saver against TensorFlow's Saver.

Each test runs one scenario with tf.compat.v1.train.Saver and with ours, on
real files and sessions, and compares what comes out: file names, values,
error types. They cover corners found by probing both implementations:
unusual global steps and write versions, builders reading other keys,
unreadable checkpoints, savers used in a graph they were not built in, and
eager restores of the wrong shape.

Covers: tf_objckpt.saver, tf_objckpt.v1.saver_builders,
tf_objckpt.v1.name_based_saver.
"""

import contextlib
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.framework import errors
from tensorflow.python.ops import io_ops

import testlib as tl


@contextlib.contextmanager
def _one_variable_saver(impl, **saver_kwargs):
  """Yields a Saver of an initialized graph variable "v", and a session."""
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [1])
    saver = tl.IMPLS[impl].Saver([v], **saver_kwargs)
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      yield saver, sess


def _graph_checkpoint(directory, values):
  """A checkpoint of `{name: value}` written by TensorFlow's Saver."""
  os.makedirs(directory, exist_ok=True)
  return tl.write_with_saver("tf", os.path.join(directory, "m"), values)


# ----------------------------------------------------------------------------
# Checkpoint names and the kept-checkpoint list.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", [True, np.int32(7), np.int64(12)])
@pytest.mark.parametrize("pad", [False, True])
def test_global_step_is_written_as_an_integer(tmp_path, step, pad):
  results = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    os.makedirs(directory)
    with _one_variable_saver(impl, pad_step_number=pad) as (saver, sess):
      path = saver.save(sess, os.path.join(directory, "m"), global_step=step)
    results[impl] = (os.path.basename(path), tl.files_under(directory))
  assert results["ours"] == results["tf"]
  assert "True" not in results["ours"][0]


def test_set_last_checkpoints_with_time_keeps_the_callers_list(tmp_path):
  """Later saves update the very list that was passed in."""
  results = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    os.makedirs(directory)
    with tf.Graph().as_default():
      v = tf.compat.v1.get_variable("v", [1])
      saver = tl.IMPLS[impl].Saver([v], max_to_keep=2)
      given = [(os.path.join(directory, "old"), 1.0)]
      saver.set_last_checkpoints_with_time(given)
      with tf.compat.v1.Session() as sess:
        sess.run(v.initializer)
        for step in (1, 2):
          saver.save(sess, os.path.join(directory, "m"), global_step=step)
    results[impl] = ([os.path.basename(path) for path, _ in given],
                     [os.path.basename(p) for p in saver.last_checkpoints],
                     tl.files_under(directory))
  assert results["ours"] == results["tf"]
  assert results["ours"][0] == ["m-1", "m-2"]


# ----------------------------------------------------------------------------
# Write versions.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("sharded", [False, True])
def test_unknown_write_version_raises_tensorflows_error_type(sharded):
  observed = {}
  for impl in tl.IMPLS:
    with tf.Graph().as_default():
      v = tf.compat.v1.get_variable("v", [1])
      observed[impl] = tl.outcome(tl.IMPLS[impl].Saver, [v],
                                  write_version=7,
                                  sharded=sharded).error
  # TensorFlow fails building its message: a TypeError, not the RuntimeError
  # it documents. Ours is both.
  assert type(observed["tf"]) is TypeError  # pylint: disable=unidiomatic-typecheck
  assert isinstance(observed["ours"], TypeError)
  assert isinstance(observed["ours"], RuntimeError)
  assert "write_version: 7" in str(observed["ours"])


def test_eager_saver_def_of_legacy_version(tmp_path):
  """Eagerly a given SaverDef is rebuilt with its (LEGACY) version."""
  observed = {}
  for impl in tl.IMPLS:
    v = tf.Variable([1.], name="v")
    saver = tl.IMPLS[impl].Saver([v], saver_def=saver_pb2.SaverDef())
    observed[impl] = tl.outcome(saver.save, None, str(tmp_path / impl)).error
  assert type(observed["tf"]) is TypeError  # pylint: disable=unidiomatic-typecheck
  assert isinstance(observed["ours"], TypeError)
  assert not os.listdir(tmp_path)


# ----------------------------------------------------------------------------
# Restores the up-front check must leave to the restore op.
# ----------------------------------------------------------------------------


def _custom_builder(impl):
  """A builder reading every spec from the key `<name>_old`."""

  class OldNames(tl.IMPLS[impl].saver.BaseSaverBuilder):

    def restore_op(self, filename_tensor, saveable, preferred_shard):
      del preferred_shard  # Unused.
      return [
          io_ops.restore_v2(filename_tensor, [spec.name + "_old"],
                            [spec.slice_spec], [spec.dtype])[0]
          for spec in saveable.specs
      ]

  return OldNames()


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_builder_reading_other_keys_graph(tmp_path, impl):
  path = _graph_checkpoint(str(tmp_path), {"a_old": np.float32([5., 6.])})
  with tf.Graph().as_default():
    a = tf.compat.v1.get_variable("a", [2])
    saver = tl.IMPLS[impl].Saver([a], builder=_custom_builder(impl))
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, path)
      np.testing.assert_array_equal(sess.run(a), [5., 6.])
      # A key the builder does not find fails as TensorFlow's does.
      b = tf.compat.v1.get_variable("b", [2])
      other = tl.IMPLS[impl].Saver([b], builder=_custom_builder(impl))
      with pytest.raises(errors.NotFoundError,
                         match="Restoring from checkpoint failed"):
        other.restore(sess, path)


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_builder_reading_other_keys_eager(tmp_path, impl):
  path = _graph_checkpoint(str(tmp_path), {"a_old": np.float32([5., 6.])})
  a = tf.Variable([0., 0.], name="a")
  tl.IMPLS[impl].Saver([a], builder=_custom_builder(impl)).restore(None, path)
  np.testing.assert_array_equal(a.numpy(), [5., 6.])


def test_restore_in_a_graph_without_the_savers_ops(tmp_path):
  observed = {}
  for impl in tl.IMPLS:
    with _one_variable_saver(impl) as (saver, sess):
      path = saver.save(sess, str(tmp_path / impl))
    with tf.Graph().as_default():
      tf.compat.v1.get_variable("v", [1])
      with tf.compat.v1.Session() as sess:
        error = tl.outcome(saver.restore, sess, path).error
    observed[impl] = (type(error), str(error))
  assert observed["ours"] == observed["tf"]
  assert observed["ours"][0] is TypeError


def _unreadable(directory, kind):
  """A path that passes the existence check but is no checkpoint."""
  if kind == "directory":
    os.makedirs(os.path.join(directory, "d"))
    return os.path.join(directory, "d")
  if kind == "v1_garbage":
    with open(os.path.join(directory, "g"), "w") as f:
      f.write("not a checkpoint")
    return os.path.join(directory, "g")
  with open(os.path.join(directory, "g.index"), "w") as f:
    f.write("not a checkpoint")
  return os.path.join(directory, "g")


@pytest.mark.parametrize("kind", ["directory", "v1_garbage", "index_garbage"])
@pytest.mark.parametrize("eager", [False, True])
def test_unreadable_checkpoint_raises_tensorflows_error(tmp_path, kind, eager):
  observed = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    os.makedirs(directory)
    path = _unreadable(directory, kind)
    if eager:
      v = tf.Variable([3.], name="v")
      observed[impl] = type(
          tl.outcome(tl.IMPLS[impl].Saver([v]).restore, None, path).error)
      np.testing.assert_array_equal(v.numpy(), [3.])
      continue
    with _one_variable_saver(impl) as (saver, sess):
      observed[impl] = type(tl.outcome(saver.restore, sess, path).error)
  assert observed["ours"] is observed["tf"]
  assert issubclass(observed["ours"], errors.DataLossError)


# ----------------------------------------------------------------------------
# Eager restores.
# ----------------------------------------------------------------------------


def test_eager_shape_mismatch_is_a_value_error(tmp_path):
  """TensorFlow raises a ValueError when assigning a wrongly shaped value;
  ours raises it before assigning anything."""
  path = _graph_checkpoint(str(tmp_path), {
      "a": np.float32([1., 2.]),
      "b": np.float32([3., 4., 5.])
  })
  observed = {}
  for impl in tl.IMPLS:
    a = tf.Variable([0., 0.], name="a")
    b = tf.Variable([0., 0.], name="b")
    error = tl.outcome(tl.IMPLS[impl].Saver([a, b]).restore, None, path).error
    observed[impl] = (type(error), a.numpy(), b.numpy(), str(error))
  assert observed["tf"][0] is observed["ours"][0] is ValueError
  np.testing.assert_array_equal(observed["tf"][1], [1., 2.])
  assert not observed["ours"][1].any() and not observed["ours"][2].any()
  assert ("checkpoint key 'b': received incompatible tensor with shape (3,) "
          "when attempting to restore variable with shape (2,)") in (
              observed["ours"][3])


def test_eager_dtype_and_shape_mismatch_is_an_invalid_argument(tmp_path):
  """Values are read (and dtypes checked) before any shape is."""
  path = _graph_checkpoint(str(tmp_path), {
      "a": np.float32([1., 2.]),
      "b": np.float32([3., 4., 5.])
  })
  observed = {}
  for impl in tl.IMPLS:
    a = tf.Variable([0, 0], name="a")
    b = tf.Variable([0., 0.], name="b")
    observed[impl] = type(
        tl.outcome(tl.IMPLS[impl].Saver([b, a]).restore, None, path).error)
    assert not b.numpy().any()
  assert observed["ours"] is observed["tf"] is errors.InvalidArgumentError


def test_eager_empty_saver_saves_nothing(tmp_path):
  """TensorFlow's empty eager saver crashes on save; ours returns None."""
  observed = {
      impl:
          tl.outcome(
              lib.Saver([], allow_empty=True).save, None, str(tmp_path / impl))
      for impl, lib in tl.IMPLS.items()
  }
  assert observed["tf"].name == "AttributeError"
  assert observed["ours"] == tl.Outcome(result=None, error=None)
  assert not os.listdir(tmp_path)


def test_add_collection_def_is_tensorflows():
  """The private helper TensorFlow's code and tests call on a `Saver`."""
  protos = {}
  for impl in tl.IMPLS:
    with tf.Graph().as_default():
      saver = tl.IMPLS[impl].Saver([tf.compat.v1.get_variable("v", [1])])
      tf.compat.v1.add_to_collection("ints", 3)
      tf.compat.v1.add_to_collection("mixed", 3)
      tf.compat.v1.add_to_collection("mixed", 3.5)
      proto = tf.compat.v1.MetaGraphDef()
      for key in ("ints", "mixed", "missing"):
        saver._add_collection_def(proto, key)  # pylint: disable=protected-access
      protos[impl] = proto
  assert protos["ours"] == protos["tf"]
  assert list(protos["ours"].collection_def) == ["ints"]
