"""`PythonState` objects restored by graph-mode CheckpointV1, against TF.

TensorFlow hands `PythonState.deserialize` the checkpointed bytes, as the
`NumpyWrapper` example in `tensorflow/python/trackable/python_state.py`
expects (it reads them with `io.BytesIO`); serialized state need not be
UTF-8.
"""

import io
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import python_state

import tf_objckpt

_IMPLS = {"tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
          "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1)}


class NumpyWrapper(python_state.PythonState):
  """TensorFlow's documented example: a numpy array saved as .npy bytes."""

  def __init__(self, array):
    self.array = array
    self.received_types = []

  def serialize(self):
    string_file = io.BytesIO()
    np.save(string_file, self.array, allow_pickle=False)
    return string_file.getvalue()

  def deserialize(self, string_value):
    self.received_types.append(type(string_value).__name__)
    self.array = np.load(io.BytesIO(string_value), allow_pickle=False)


class Text(python_state.PythonState):
  """UTF-8 state; records what `deserialize` receives."""

  def __init__(self):
    self.value = "saved"
    self.received = []

  def serialize(self):
    return self.value

  def deserialize(self, string_value):
    self.received.append(string_value)


def _save_change_restore(impl, directory):
  autotrackable, checkpoint_cls = _IMPLS[impl]
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    root = autotrackable()
    root.numpy = NumpyWrapper(np.arange(4.))
    root.text = Text()
    checkpoint = checkpoint_cls(root=root)
    path = checkpoint.save(os.path.join(directory, impl, "ckpt"),
                           session=session)
    root.numpy.array = np.zeros(4)
    root.text.value = "changed"
    checkpoint.restore(path).run_restore_ops(session)
    return (root.numpy.array.tolist(), root.numpy.received_types,
            root.text.received)


def test_deserialize_receives_bytes(tmp_path):
  theirs = _save_change_restore("tf", tmp_path)
  assert theirs == ([0., 1., 2., 3.], ["bytes"], [b"saved"])
  assert _save_change_restore("ours", tmp_path) == theirs


def test_deferred_python_state_receives_bytes(tmp_path):
  """State attached after restore() is restored when it is tracked."""
  results = {}
  for impl, (autotrackable, checkpoint_cls) in _IMPLS.items():
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      saved = autotrackable()
      saved.text = Text()
      path = checkpoint_cls(root=saved).write(
          os.path.join(tmp_path, impl, "ckpt"), session=session)
      root = autotrackable()
      status = checkpoint_cls(root=root).restore(path)
      root.text = Text()
      status.run_restore_ops(session)
      results[impl] = root.text.received
  assert results["tf"] == [b"saved"]
  assert results["ours"] == results["tf"]
