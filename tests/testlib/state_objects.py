"""Python state objects to checkpoint: counters, recorders, strings.

Each saves a Python value through TensorFlow's `PythonState` or our
`PythonStringStateSaveable`, and some record what restores hand them, so
tests can check both what is written and what is read back.
"""

import functools
import io

import numpy as np
from tensorflow.python.trackable import python_state

import tf_objckpt
from tf_objckpt import base


class Counter(python_state.PythonState):
  """Python state saved as a string, through TensorFlow's `PythonState`."""

  def __init__(self, count=0):
    self.count = count

  def serialize(self):
    return str(self.count)

  def deserialize(self, string_value):
    self.count = int(string_value)


class Recorder(python_state.PythonState):
  """Saves `payload`; records every value `deserialize` receives."""

  def __init__(self, payload):
    self.payload = payload
    self.received = []

  def serialize(self):
    return self.payload

  def deserialize(self, string_value):
    self.received.append(string_value)


class NumpyWrapper(python_state.PythonState):
  """The example of `PythonState`'s documentation: an array as .npy bytes.

  Records the types of the values `deserialize` receives.
  """

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


class StringState(tf_objckpt.AutoTrackable):
  """Python state saved through our `PythonStringStateSaveable` factory."""

  impl = "ours"

  def __init__(self):
    super().__init__()
    self.state = "initial"
    self.restored = []

  def _gather_saveables_for_checkpoint(self):
    return {
        python_state.PYTHON_STATE:
            functools.partial(base.PythonStringStateSaveable,
                              state_callback=lambda: self.state,
                              restore_callback=self._restore)
    }

  def _restore(self, string_value):
    self.restored.append(string_value.decode())


class TfStringState(python_state.PythonState):
  """The same Python state as `StringState`, saved TensorFlow's way."""

  impl = "tf"

  def __init__(self):
    self.state = "initial"
    self.restored = []

  def serialize(self):
    return self.state

  def deserialize(self, string_value):
    self.restored.append(string_value.decode())
