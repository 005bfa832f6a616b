"""Checkpoints as `tf.train.load_checkpoint` sees them, and comparisons.

Readers of a checkpoint's keys with shapes and dtypes (`signature`), its
parsed object graph and its values; assertions that two checkpoints, or two
lists of variables, are the same; and writers of small checkpoints with
either implementation.
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from testlib import impls

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def object_graph(path):
  """The parsed `TrackableObjectGraph` stored in the checkpoint at `path`."""
  reader = tf.train.load_checkpoint(path)
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  proto.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  return proto


def signature(path):
  """`{key: (shape, dtype name)}` for every key of the checkpoint."""
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  assert set(shapes) == set(dtypes)
  return {key: (tuple(shapes[key]), dtypes[key].name) for key in shapes}


def keys(path):
  """Every key of the checkpoint at `path`, the object graph's too, sorted."""
  return sorted(signature(path))


def values(path, as_lists=False):
  """`{key: value}` of every key but the object graph.

  Values are numpy values, or with `as_lists` their `tolist()` (which `==`
  compares as a whole).
  """
  reader = tf.train.load_checkpoint(path)
  found = {
      key: reader.get_tensor(key)
      for key in reader.get_variable_to_shape_map()
      if key != OBJECT_GRAPH_KEY
  }
  if as_lists:
    return {key: value.tolist() for key, value in found.items()}
  return found


def values_by_name(path):
  """`{name: value}` of the checkpoint's variables that are root children.

  A variable the root tracks as `name` is saved under
  `name/.ATTRIBUTES/VARIABLE_VALUE`; a partitioned one reads back whole.
  """
  suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
  return {
      key[:-len(suffix)]: value
      for key, value in values(path).items()
      if key.endswith(suffix) and "/" not in key[:-len(suffix)]
  }


_SIDES = ("expected", "actual")
# The `sides` of a comparison of TensorFlow's values (expected) with ours.
TENSORFLOWS_AND_OURS = ("TensorFlow's", "ours")


def assert_values_equal(expected, actual, sides=_SIDES):
  """Asserts two `{key: value}` dicts hold the same keys, values and dtypes.

  `sides` names `expected` and `actual` in failure messages.
  """
  assert sorted(expected) == sorted(actual), (
      "keys differ:\n" + _dict_diff(dict.fromkeys(expected, "present"),
                                    dict.fromkeys(actual, "present"), sides))
  for key in expected:
    value = {
        side: np.asarray(values[key])
        for side, values in zip(sides, (expected, actual))
    }
    np.testing.assert_array_equal(
        value[sides[1]],
        value[sides[0]],
        err_msg=f"{key} (numpy's ACTUAL is {sides[1]}, DESIRED {sides[0]})")
    assert value[sides[1]].dtype == value[sides[0]].dtype, (
        f"{key}: {sides[0]} dtype {value[sides[0]].dtype}, "
        f"{sides[1]} {value[sides[1]].dtype}")


def _dict_diff(expected, actual, sides=_SIDES):
  """Describes how two dicts differ, for assertion messages."""
  lines = []
  for key in sorted(set(expected) | set(actual)):
    if expected.get(key, "<missing>") != actual.get(key, "<missing>"):
      lines.append(f"  {key}: {sides[0]} {expected.get(key, '<missing>')}, "
                   f"{sides[1]} {actual.get(key, '<missing>')}")
  return "\n".join(lines)


def assert_same_checkpoint(tf_path, our_path, compare_values=True):
  """Asserts TensorFlow's and our checkpoint are the same checkpoint."""
  expected, actual = signature(tf_path), signature(our_path)
  assert actual == expected, "keys differ:\n" + _dict_diff(
      expected, actual, TENSORFLOWS_AND_OURS)
  expected, actual = object_graph(tf_path), object_graph(our_path)
  assert actual == expected, (
      f"object graphs differ.\nTensorFlow's:\n{expected}\nOurs:\n{actual}")
  if compare_values:
    assert_values_equal(values(tf_path), values(our_path), TENSORFLOWS_AND_OURS)


def write(impl, prefix, **objects):
  """Writes `objects` with `impl`'s `Checkpoint.write`; returns the path."""
  return impls.IMPLS[impl].Checkpoint(**objects).write(os.fspath(prefix))


def write_both(tmp_path, **objects):
  """Writes the same objects with both; returns `{impl: path}`."""
  return {
      impl: write(impl, tmp_path / impl / "ckpt", **objects)
      for impl in impls.IMPLS
  }


def write_with_saver(impl, prefix, by_name, eager=False):
  """Writes `by_name`, `{name: value}`, with `impl`'s v1 `Saver`.

  The variables are made eagerly with `eager`, else with
  `tf.compat.v1.get_variable` in a graph of their own, and named as the
  keys of `by_name`. The parent directory of `prefix` must exist.

  Returns:
    The path of the checkpoint.
  """
  saver_cls = impls.IMPLS[impl].Saver
  if eager:
    variables = [
        tf.Variable(value, name=name) for name, value in by_name.items()
    ]
    return saver_cls(variables).save(None, os.fspath(prefix))
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variables = [
        tf.compat.v1.get_variable(name, initializer=tf.constant(value))
        for name, value in by_name.items()
    ]
    session.run(tf.compat.v1.global_variables_initializer())
    return saver_cls(variables).save(session, os.fspath(prefix))


def snapshot(tmp_path, **objects):
  """The values of `objects` as TensorFlow checkpoints them."""
  path = write("tf", tmp_path / "snapshot" / f"s{len(os.listdir(tmp_path))}",
               **objects)
  return values(path)


# Enough variables for every batched path: graph mode makes their handles in
# batches of 64 (`variable_batches.GRAPH_BATCH_SIZE`); this is two batches and
# a partial one.
MANY = 2 * 64 + 7
_MIXED_DTYPES = (np.float32, np.int64, np.bool_, np.float16, np.complex64,
                 np.int8, np.uint16, object)


def mixed_value(index, scale):
  """A value whose dtype and shape vary with `index`, its content with both."""
  dtype = _MIXED_DTYPES[index % len(_MIXED_DTYPES)]
  shape = [index % 3, 2] if index % 5 else []
  if dtype is object:
    return np.full(shape, f"s{index * scale}", dtype=object)
  return (np.ones(shape) * (index * scale % 7)).astype(dtype)


def variable_values(variables):
  """The numpy values of a list of variables."""
  return [np.asarray(v.numpy()) for v in variables]


def assert_variables_equal(expected, actual):
  """Asserts two lists of variables (or arrays) hold equal values."""
  assert len(expected) == len(actual)
  for a, b in zip(expected, actual):
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a)
    b = np.asarray(b.numpy() if hasattr(b, "numpy") else b)
    np.testing.assert_array_equal(b, a)
