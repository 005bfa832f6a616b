"""Train a Keras model, checkpoint it, and restore it on creation elsewhere.

The parent process trains a small Keras model for a few steps and saves it
with `tf_objckpt.Checkpoint`. A child process (a fresh Python interpreter,
as after a crash) calls `restore()` BEFORE the model has any variables, then
builds it: the variables start with the checkpointed values. The child
prints the restored weights and the parent checks they equal its own.

Run: python examples/keras_restore_on_create.py
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

import tf_objckpt


def make_model():
  return tf.keras.Sequential([
      tf.keras.layers.Dense(16, activation="relu"),
      tf.keras.layers.Dense(1),
  ])


def train_and_save(directory):
  """Trains a few steps, saves, and returns the path and the weights."""
  model = make_model()
  model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
  x = np.random.RandomState(0).rand(64, 4).astype(np.float32)
  y = x.sum(axis=1, keepdims=True)
  model.fit(x, y, epochs=3, verbose=0)
  checkpoint = tf_objckpt.Checkpoint(model=model, optimizer=model.optimizer)
  path = checkpoint.save(os.path.join(directory, "ckpt"))
  return path, [w.tolist() for w in model.get_weights()]


def restore_on_create(directory):
  """Restores into an unbuilt model, then builds it (child process)."""
  model = make_model()
  status = tf_objckpt.Checkpoint(model=model).restore(
      tf_objckpt.latest_checkpoint(directory))
  model.build([None, 4])  # Variables are created now, from the checkpoint.
  status.expect_partial()  # The optimizer's values are not needed here.
  status.assert_existing_objects_matched()
  print(json.dumps([w.tolist() for w in model.get_weights()]))


def main():
  if len(sys.argv) == 3 and sys.argv[1] == "--restore":
    restore_on_create(sys.argv[2])
    return
  with tempfile.TemporaryDirectory() as directory:
    path, trained = train_and_save(directory)
    print(f"Saved {path}")
    child = subprocess.run([sys.executable, __file__, "--restore", directory],
                           check=True,
                           capture_output=True,
                           text=True)
    restored = json.loads(child.stdout.strip().splitlines()[-1])
    for want, got in zip(trained, restored):
      np.testing.assert_allclose(got, want)
    print(f"Restored {len(restored)} weight arrays on creation in a new "
          "process; values match.")


if __name__ == "__main__":
  main()
