"""`patch_tensorflow()` makes TensorFlow's `checkpoint_utils` functions ours.

Each function is patched where TensorFlow exposes it: `tf.train` and
`tf.compat.v2.train` (which tf_keras uses), `tf.compat.v1.train`, and the
module itself, where TensorFlow's own callers look them up;
`unpatch_tensorflow()` puts TensorFlow's back. TensorFlow's warm start
(`tf.compat.v1.train.warm_start`) then builds our batched initializers,
and tf_keras's `SidecarEvaluator` reads checkpoints with our reader.

Covers: tf_objckpt.tools.patching, tf_objckpt.checkpoint_utils,
tf_objckpt.v1.warm_start.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.training import checkpoint_utils as tf_checkpoint_utils
from tf_keras.src.utils import sidecar_evaluator

import testlib as tl

_OURS = tl.IMPLS["ours"].checkpoint_utils
_V2_NAMES = ("load_checkpoint", "list_variables", "load_variable",
             "checkpoints_iterator")
_PLACES = {
    "tf.train": (tf.train, _V2_NAMES),
    "tf.compat.v2.train": (tf.compat.v2.train, _V2_NAMES),
    "tf.compat.v1.train":
        (tf.compat.v1.train, _V2_NAMES + ("init_from_checkpoint",)),
    "checkpoint_utils":
        (tf_checkpoint_utils,
         _V2_NAMES + ("init_from_checkpoint", "wait_for_new_checkpoint")),
}


def _held():
  """`{place.name: function}` for every place and name."""
  return {
      f"{place}.{name}": getattr(module, name)
      for place, (module, names) in _PLACES.items() for name in names
  }


def test_each_function_is_ours_where_tensorflow_exposes_it():
  before = _held()
  assert all(function.__module__ == tf_checkpoint_utils.__name__
             for function in before.values())
  with tl.tensorflow_patched():
    for name, function in _held().items():
      assert function is getattr(_OURS, name.rsplit(".", 1)[1]), name
  assert _held() == before


def test_tensorflows_warm_start_builds_our_initializers(tmp_path):
  saved = {f"layer_{i}/kernel": np.full([3], i, np.float32) for i in range(20)}
  path = tl.write_with_saver("tf", tmp_path / "ckpt", saved)

  def warm_start(program):
    made = [
        tf.compat.v1.get_variable(f"layer_{i}/kernel", [3],
                                  initializer=tf.zeros_initializer(),
                                  use_resource=True) for i in range(20)
    ]
    tf.compat.v1.train.warm_start(path)
    program.initialize()
    np.testing.assert_array_equal(program.run(made[7]), saved["layer_7/kernel"])
    return sum(op.type == "RestoreV2" for op in program.graph.get_operations())

  with tl.GraphProgram("tf") as program:
    assert warm_start(program) == 20
  with tl.tensorflow_patched(), tl.GraphProgram("tf") as program:
    # The initializers are one call of our restore function, the initial
    # values one RestoreV2.
    assert warm_start(program) == 1
    assert any(
        op.type.startswith("tf_objckpt_restore_variables")
        for op in program.graph.get_operations())


def test_tf_keras_reads_checkpoints_through_ours(tmp_path):
  path = tl.write("tf",
                  tmp_path / "ckpt",
                  model=tf.Module(),
                  optimizer=tf.Variable(1.0))
  index = path + ".index"
  # TensorFlow's reader takes the index for an empty checkpoint.
  assert sidecar_evaluator.list_checkpoint_attributes(index) == set()
  with tl.tensorflow_patched():
    assert sidecar_evaluator.list_checkpoint_attributes(index) == {
        "optimizer", "_CHECKPOINTABLE_OBJECT_GRAPH"
    }
