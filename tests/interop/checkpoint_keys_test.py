"""Checkpoint keys from object paths, as TensorFlow makes them.

A key is part of the file format: `<path>/.ATTRIBUTES/<attribute>` with
"." doubled and "/" written ".S" in each local name, and slot variables
under `<variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot>`. Our rules
give TensorFlow's keys for names that need escaping, function by function
and in real checkpoints written by both, and read the object path back
from a key as TensorFlow does. A local name ".ATTRIBUTES" is written as
TensorFlow writes it, and read back, where TensorFlow looks for another key.

Covers: tf_objckpt.trackable_utils, tf_objckpt.foundation.checkpoint_keys.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import trackable_utils as tf_trackable_utils

import testlib as tl
from tf_objckpt import trackable_utils

# Local names that need escaping, and some that look like escapes already.
_NAMES = ("plain", "a.b", "a/b", ".ATTRIBUTES", "..S", "a//b..c/", ".S", "",
          "x.y/z")


@pytest.mark.parametrize("name", _NAMES)
def test_names_escape_as_tensorflows(name):
  assert trackable_utils.escape_local_name(name) == (
      tf_trackable_utils.escape_local_name(name))


@pytest.mark.parametrize("attribute",
                         ["VARIABLE_VALUE", "py_state", ".TENSORS", *_NAMES])
def test_attribute_keys_are_tensorflows(attribute):
  path = "model/layer.Sone"
  ours = trackable_utils.checkpoint_key(path, attribute)
  assert ours == tf_trackable_utils.checkpoint_key(path, attribute)
  assert trackable_utils.object_path_of_key(ours) == (
      tf_trackable_utils.extract_object_name(ours))


@pytest.mark.parametrize("slot", ["m", "v", "a.b", "a/b"])
def test_slot_keys_are_tensorflows(slot):
  args = ("model/kernel", "optimizer", slot)
  assert trackable_utils.slot_variable_key(
      *args) == (tf_trackable_utils.slot_variable_key(*args))


def test_a_name_based_key_is_its_own_object_path():
  assert trackable_utils.object_path_of_key("dense/kernel") == "dense/kernel"


def test_checkpoints_of_escaped_names_have_tensorflows_keys(tmp_path):
  """Names with "." and "/" as dict keys, written and read by both."""
  # TensorFlow cannot read a name ".ATTRIBUTES" back (see below).
  values = {
      name or "empty": float(i)
      for i, name in enumerate(_NAMES)
      if name != ".ATTRIBUTES"
  }

  def write(impl):
    root = tl.IMPLS[impl].AutoTrackable()
    root.table = {name: tf.Variable(value) for name, value in values.items()}
    return tl.write(impl, tmp_path / impl / "ckpt", root=root)

  paths = tl.by_impl(write)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  keys = tl.keys(paths["ours"])
  assert "table/a.Sb/.ATTRIBUTES/VARIABLE_VALUE" in keys
  assert "table/a..b/.ATTRIBUTES/VARIABLE_VALUE" in keys
  for writer, reader in tl.PAIRS:
    root = tl.IMPLS[reader].AutoTrackable()
    root.table = {name: tf.Variable(-1.) for name in values}
    tl.IMPLS[reader].Checkpoint(root=root).read(paths[writer]).assert_consumed()
    np.testing.assert_equal(
        {
            name: variable.numpy() for name, variable in root.table.items()
        },
        values,
        err_msg=f"written by {writer}, read by {reader}")


def test_a_name_like_the_attributes_segment_reads_back_in_ours(tmp_path):
  """TensorFlow writes `..ATTRIBUTES/.ATTRIBUTES/...` but reads another key."""
  read = {}
  for writer, reader in tl.PAIRS:
    root = tl.IMPLS[writer].AutoTrackable()
    root.table = {".ATTRIBUTES": tf.Variable(3.)}
    path = tl.write(writer, tmp_path / writer / "ckpt", root=root)
    assert "table/..ATTRIBUTES/.ATTRIBUTES/VARIABLE_VALUE" in tl.keys(path)
    target = tl.IMPLS[reader].AutoTrackable()
    target.table = {".ATTRIBUTES": tf.Variable(0.)}
    outcome = tl.outcome(tl.IMPLS[reader].Checkpoint(root=target).read, path)
    read[writer,
         reader] = (outcome.name, float(target.table[".ATTRIBUTES"].numpy()))
  assert read == {
      ("tf", "tf"): ("NotFoundError", 0.),
      ("ours", "tf"): ("NotFoundError", 0.),
      ("tf", "ours"): ("ok", 3.),
      ("ours", "ours"): ("ok", 3.)
  }
