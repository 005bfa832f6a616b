"""A damaged value in a data file is reported by its own key.

An eager restore reads many values with one `RestoreV2`; when one of them
fails its checksum, the error is TensorFlow's `DataLossError` and names
that value's key (not the first key of the read) and the checkpoint; and
nothing is assigned.

Covers: tf_objckpt.engine.reads.
"""

import numpy as np
import tensorflow as tf

import tf_objckpt

_MARK = np.float32(7.25)


def _module(base):
  """Three variables of 16 values: `base`, the mark, and `base` + 1."""
  module = tf.Module()
  module.first = tf.Variable(np.full([16], base, np.float32))
  module.second = tf.Variable(np.full([16], _MARK, np.float32))
  module.third = tf.Variable(np.full([16], base + 1, np.float32))
  return module


def test_damaged_value_is_named_by_its_key(tmp_path):
  path = tf_objckpt.Checkpoint(module=_module(0.)).write(str(tmp_path / "ckpt"))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "rb") as f:
    data = f.read()
  start = data.index(np.full([16], _MARK, np.float32).tobytes())
  with open(data_file, "r+b") as f:
    f.seek(start + 8)
    f.write(b"\xff" * 8)
  errors = {}
  for impl, checkpoint_class in (("tf", tf.train.Checkpoint),
                                 ("ours", tf_objckpt.Checkpoint)):
    target = _module(10.)
    try:
      checkpoint_class(module=target).restore(path)
      errors[impl] = None
    except tf.errors.OpError as e:
      errors[impl] = e
    if impl == "ours":  # Nothing was assigned.
      np.testing.assert_array_equal(target.first.numpy(), 10.)
      np.testing.assert_array_equal(target.third.numpy(), 11.)
  assert isinstance(errors["tf"], tf.errors.DataLossError)
  assert isinstance(errors["ours"], tf.errors.DataLossError)
  message = str(errors["ours"])
  assert "module/second/.ATTRIBUTES/VARIABLE_VALUE" in message
  assert "module/first/" not in message
  assert path in message
