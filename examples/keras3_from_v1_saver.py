"""Load a tf.compat.v1 `Saver` checkpoint into the equivalent Keras 3 model.

A legacy graph-mode program (a small two-layer network, variables made with
`tf.compat.v1.get_variable`) trains with `AdamOptimizer` and saves with
`tf.compat.v1.train.Saver`; its checkpoint keys values by variable names such
as `hidden/kernel`, Adam's slots as `hidden/kernel/Adam` and
`hidden/kernel/Adam_1`, and its step count only as `beta1_power`. The same
network rewritten as a Keras 3 `Sequential` names its variables
`classifier/hidden/kernel` (its `variable.path`).
`tf_objckpt.Checkpoint.restore` matches the two by name, dropping the model's
name; an `assignment_map` (as for `tf.compat.v1.train.init_from_checkpoint`)
names what differs otherwise (here the legacy `logits` scope is the Keras
layer `output`). The Keras 3 `Adam` gets the slots and its `iterations`
(recovered from `beta1_power`), so training continues where the legacy
program stopped: one more Keras step gives the weights of one more legacy
step. The status reports every match, and the Keras model predicts exactly
what the legacy graph did. TensorFlow's own `tf.train.Checkpoint` restores
none of these values into the Keras 3 model.

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

  Then trains one more step, to compare with Keras.

  Returns:
    The checkpoint path, the network's predictions for `INPUTS` when saved,
    and `{variable name: value}` after the extra step.
  """
  with tf.Graph().as_default():
    inputs = tf.compat.v1.placeholder(tf.float32, (None, 4))
    labels = tf.compat.v1.placeholder(tf.float32, (None, 3))
    hidden = tf.nn.relu(v1_dense(inputs, 16, "hidden"))
    logits = v1_dense(hidden, 3, "logits")
    loss = tf.reduce_mean(tf.square(logits - labels))
    train = tf.compat.v1.train.AdamOptimizer(0.01, epsilon=1e-7).minimize(loss)
    saver = tf.compat.v1.train.Saver()
    feed = {inputs: INPUTS, labels: LABELS}
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for _ in range(5):
        session.run(train, feed)
      predictions = session.run(logits, {inputs: INPUTS})
      path = saver.save(session, os.path.join(directory, "legacy", "model"))
      session.run(train, feed)
      after = {
          variable.op.name: session.run(variable)
          for variable in tf.compat.v1.trainable_variables()
      }
  return path, predictions, after


def keras_model():
  """The same network in Keras 3; built on its first call."""
  return keras.Sequential([
      keras.layers.Dense(16, activation="relu", name="hidden"),
      keras.layers.Dense(3, name="output"),
  ],
                          name="classifier")


def load_into_keras(path):
  """Restores the model and Adam; returns predictions, report, model, Adam."""
  model = keras_model()
  optimizer = keras.optimizers.Adam(0.01)
  options = tf_objckpt.CheckpointOptions(
      assignment_map={"logits/": "classifier/output/"})
  status = tf_objckpt.Checkpoint(model=model,
                                 optimizer=optimizer).restore(path,
                                                              options=options)
  predictions = model(INPUTS).numpy()  # Builds the model: values land here.
  optimizer.build(model.trainable_variables)  # The slots land here.
  status.assert_consumed()
  return predictions, status.report(), model, optimizer


def keras_step(model, optimizer):
  """One training step, as the legacy program's."""
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(INPUTS) - LABELS))
  gradients = tape.gradient(loss, model.trainable_variables)
  optimizer.apply_gradients(zip(gradients, model.trainable_variables))


def legacy_name(variable):
  """`classifier/output/kernel` -> `logits/kernel`, as the map says."""
  return variable.path.partition("/")[2].replace("output/", "logits/")


def main():
  with tempfile.TemporaryDirectory() as directory:
    path, legacy_predictions, legacy_after = legacy_train_and_save(directory)
    predictions, report, model, optimizer = load_into_keras(path)
    print(report)
    failures = []
    if not report.complete:
      failures.append(f"not everything matched:\n{report}")
    if len(report.restored) != 14:  # 4 variables, 8 slots, 2 beta powers.
      failures.append(f"expected 14 restored values:\n{report}")
    if not np.allclose(predictions, legacy_predictions, rtol=1e-6, atol=1e-6):
      failures.append("Keras predictions differ from the legacy graph's")
    if int(optimizer.iterations) != 5:
      failures.append(f"iterations {int(optimizer.iterations)}, not 5")
    keras_step(model, optimizer)
    for variable in model.trainable_variables:
      if not np.allclose(variable.numpy(),
                         legacy_after[legacy_name(variable)],
                         rtol=2e-5,
                         atol=1e-6):
        failures.append(f"{variable.path} stepped unlike the legacy program")

    tf_model = keras_model()
    tf.train.Checkpoint(model=tf_model).restore(path).expect_partial()
    if np.allclose(tf_model(INPUTS).numpy(), legacy_predictions):
      failures.append("tf.train.Checkpoint unexpectedly restored the values")
  if failures:
    print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
  print("The Keras 3 model predicts what the v1 graph did, and its Adam "
        "steps on as the v1 AdamOptimizer did.")


if __name__ == "__main__":
  main()
