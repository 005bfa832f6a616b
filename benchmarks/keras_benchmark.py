"""Times tf_objckpt against tf.train.Checkpoint on real Keras models (eager).

Models: `keras3` is Keras 3's ResNet50 (`weights=None`, 25.6M parameters)
with Adam, its slots built (about 300 MiB of variables); `tf_keras` is the
same with tf_keras (Keras 2). Each measurement runs in a fresh process
(`fresh_process`): the first and second `write()` of the model and
optimizer, and the first and second `read()` of that checkpoint into a
freshly built model and optimizer in another process.

Run: python benchmarks/keras_benchmark.py [--models=keras3,tf_keras]
     [--repeats=3]
"""

import json
import os
import tempfile

from absl import app
from absl import flags
import tensorflow as tf

import fresh_process
import tf_objckpt

_MODELS = flags.DEFINE_list("models", ["keras3", "tf_keras"],
                            "Which Keras flavors to run.")
_REPEATS = flags.DEFINE_integer(
    "repeats", 3, "Fresh processes per "
    "measurement and library.")
_CHILD = flags.DEFINE_string("child", None, "Internal: one measurement.")

_LIBRARIES = {
    "tensorflow": tf.train.Checkpoint,
    "tf_objckpt": tf_objckpt.Checkpoint
}


def _keras(flavor):
  if flavor == "keras3":
    import keras  # pylint: disable=g-import-not-at-top
    return keras
  import tf_keras  # pylint: disable=g-import-not-at-top
  return tf_keras


def _model_and_optimizer(flavor):
  """A ResNet50 and an Adam with every slot variable created."""
  keras = _keras(flavor)
  model = keras.applications.ResNet50(weights=None)
  optimizer = keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  return {"model": model, "optimizer": optimizer}


def _run_child(request):
  checkpoint = _LIBRARIES[request["library"]](
      **_model_and_optimizer(request["model"]))
  prefix = request["prefix"]
  if request["operation"] == "write":
    fresh_process.clear(prefix, prefix + "_again")
    result = {
        "first write":
            fresh_process.timed(lambda: checkpoint.write(prefix)),
        "second write":
            fresh_process.timed(lambda: checkpoint.write(prefix + "_again"))
    }
  else:
    result = {
        "first read":
            fresh_process.timed(
                lambda: checkpoint.read(prefix).assert_consumed()),
        "second read":
            fresh_process.timed(lambda: checkpoint.read(prefix))
    }
  fresh_process.emit(result)


def main(argv):
  del argv
  if _CHILD.value:
    _run_child(json.loads(_CHILD.value))
    return
  with tempfile.TemporaryDirectory() as directory:
    for model in _MODELS.value:

      def measure(library, model=model):
        prefix = os.path.join(directory, f"{model}_{library}")
        result = {}
        for operation in ("write", "read"):
          result.update(
              fresh_process.run_child(__file__,
                                      library=library,
                                      model=model,
                                      operation=operation,
                                      prefix=prefix))
        return result

      fresh_process.print_medians(
          model, fresh_process.repeated(_REPEATS.value, measure))


if __name__ == "__main__":
  app.run(main)
