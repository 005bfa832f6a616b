"""Load a tf.compat.v1 `Saver` checkpoint into the equivalent Keras 3 model.

A legacy graph-mode program (a small two-layer network, variables made with
`tf.compat.v1.get_variable`) trains and saves with `tf.compat.v1.train.
Saver`; its checkpoint keys values by variable names such as
`hidden/kernel`. The same network rewritten as a Keras 3 `Sequential` names
its variables `classifier/hidden/kernel` (its `variable.path`).
`tf_objckpt.Checkpoint.restore` matches the two by name, dropping the model's
name; an `assignment_map` (as for `tf.compat.v1.train.init_from_checkpoint`)
names what differs otherwise (here the legacy `logits` scope is the Keras
layer `output`). The status reports every match, and the Keras model predicts
exactly what the legacy graph did. TensorFlow's own `tf.train.Checkpoint`
restores none of these values into the Keras 3 model.

Run: python examples/keras3_from_v1_saver.py (exits non-zero when wrong).
"""

import os
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

import tf_objckpt

INPUTS = np.random.RandomState(0).rand(8, 4).astype(np.float32)
LABELS = np.random.RandomState(1).rand(8, 3).astype(np.float32)


def v1_dense(inputs, units, scope):
  """A dense layer the TF1 way: variables by name, in a variable scope."""
  with tf.compat.v1.variable_scope(scope):
    kernel = tf.compat.v1.get_variable("kernel", (inputs.shape[-1], units))
    bias = tf.compat.v1.get_variable("bias", (units,),
                                     initializer=tf.zeros_initializer())
  return tf.matmul(inputs, kernel) + bias


def legacy_train_and_save(directory):
  """Trains the graph-mode network a few steps, saves it with `Saver`.

  Returns:
    The checkpoint path and the network's predictions for `INPUTS`.
  """
  with tf.Graph().as_default():
    inputs = tf.compat.v1.placeholder(tf.float32, (None, 4))
    labels = tf.compat.v1.placeholder(tf.float32, (None, 3))
    hidden = tf.nn.relu(v1_dense(inputs, 16, "hidden"))
    logits = v1_dense(hidden, 3, "logits")
    loss = tf.reduce_mean(tf.square(logits - labels))
    train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for _ in range(5):
        session.run(train, {inputs: INPUTS, labels: LABELS})
      predictions = session.run(logits, {inputs: INPUTS})
      path = saver.save(session, os.path.join(directory, "legacy", "model"))
  return path, predictions


def keras_model():
  """The same network in Keras 3; built on its first call."""
  return keras.Sequential([
      keras.layers.Dense(16, activation="relu", name="hidden"),
      keras.layers.Dense(3, name="output"),
  ], name="classifier")


def load_into_keras(path):
  model = keras_model()
  options = tf_objckpt.CheckpointOptions(
      assignment_map={"logits/": "classifier/output/"})
  status = tf_objckpt.Checkpoint(model=model).restore(path, options=options)
  predictions = model(INPUTS).numpy()  # Builds the model: values land here.
  status.assert_consumed()
  return predictions, status.report()


def main():
  with tempfile.TemporaryDirectory() as directory:
    path, legacy_predictions = legacy_train_and_save(directory)
    predictions, report = load_into_keras(path)
    print(report)
    failures = []
    if not report.complete:
      failures.append(f"not everything matched:\n{report}")
    if len(report.restored) != 4:
      failures.append(f"expected 4 restored variables:\n{report}")
    if not np.allclose(predictions, legacy_predictions, rtol=1e-6,
                       atol=1e-6):
      failures.append("Keras predictions differ from the legacy graph's")

    tf_model = keras_model()
    tf.train.Checkpoint(model=tf_model).restore(path).expect_partial()
    if np.allclose(tf_model(INPUTS).numpy(), legacy_predictions):
      failures.append("tf.train.Checkpoint unexpectedly restored the values")
  if failures:
    print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
  print("The Keras 3 model predicts what the v1 graph did.")


if __name__ == "__main__":
  main()
