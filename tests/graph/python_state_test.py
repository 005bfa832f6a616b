"""`PythonState` objects restored by graph-mode CheckpointV1, against TF.

TensorFlow hands `PythonState.deserialize` the checkpointed bytes, as the
`NumpyWrapper` example in `tensorflow/python/trackable/python_state.py`
expects (it reads them with `io.BytesIO`); serialized state need not be
UTF-8.

Covers: tf_objckpt.saveable_object_util, tf_objckpt.engine.read_plan,
tf_objckpt.restore, tf_objckpt.engine.saveable_objects,
tf_objckpt.saveables.python_state_saveables, tf_objckpt.restoring.checkpoint_position.
"""

import os

import numpy as np

import testlib as tl


def _save_change_restore(impl, directory):
  with tl.GraphProgram(impl) as program:
    root = program.lib.AutoTrackable()
    root.numpy = tl.NumpyWrapper(np.arange(4.))
    root.text = tl.Recorder("saved")
    checkpoint = program.lib.CheckpointV1(root=root)
    path = checkpoint.save(os.path.join(directory, impl, "ckpt"),
                           session=program.session)
    root.numpy.array = np.zeros(4)
    root.text.payload = "changed"
    checkpoint.restore(path).run_restore_ops(program.session)
    return (root.numpy.array.tolist(), root.numpy.received_types,
            root.text.received)


def test_deserialize_receives_bytes(tmp_path):
  theirs = _save_change_restore("tf", tmp_path)
  assert theirs == ([0., 1., 2., 3.], ["bytes"], [b"saved"])
  assert _save_change_restore("ours", tmp_path) == theirs


def test_deferred_python_state_receives_bytes(tmp_path):
  """State attached after restore() is restored when it is tracked."""
  results = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      saved = program.lib.AutoTrackable()
      saved.text = tl.Recorder("saved")
      path = program.lib.CheckpointV1(root=saved).write(os.path.join(
          tmp_path, impl, "ckpt"),
                                                        session=program.session)
      root = program.lib.AutoTrackable()
      status = program.lib.CheckpointV1(root=root).restore(path)
      root.text = tl.Recorder("other")
      status.run_restore_ops(program.session)
      results[impl] = root.text.received
  assert results["tf"] == [b"saved"]
  assert results["ours"] == results["tf"]
