"""Keep using a v1 `Saver` checkpoint, then move it to object-based code.

A legacy program trains with `tf.compat.v1.train.Saver` (keyed by variable
names). tf_objckpt's `Saver` restores that checkpoint into the same graph
and saves it again. Then eager object-based code loads the name-based
checkpoint into a `tf.Module`, matching by variable names, re-saves it as
an object-based checkpoint, and a fresh module restores that one on
creation.

Run: python examples/name_based_migration.py
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

import tf_objckpt


def legacy_train_and_save(directory):
  """A TF1 program writes a name-based checkpoint; returns it and values."""
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope("dense"):
      kernel = tf.compat.v1.get_variable("kernel",
                                         initializer=np.arange(
                                             6, dtype=np.float32).reshape(3, 2))
      bias = tf.compat.v1.get_variable("bias", initializer=[0.5, -0.5])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      path = saver.save(session,
                        os.path.join(directory, "legacy", "model"),
                        global_step=7)
      return path, session.run([kernel, bias])


def resave_with_our_saver(path, directory):
  """Our v1 Saver restores TensorFlow's checkpoint and writes its own."""
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope("dense"):
      kernel = tf.compat.v1.get_variable("kernel", [3, 2])
      bias = tf.compat.v1.get_variable("bias", [2])
    saver = tf_objckpt.Saver()
    with tf.compat.v1.Session() as session:
      saver.restore(session, path)
      values = session.run([kernel, bias])
      new_path = saver.save(session,
                            os.path.join(directory, "ours", "model"),
                            global_step=8)
  return new_path, values


class Dense(tf.Module):
  """The legacy layer rewritten as a `tf.Module`, with the same names."""

  def __init__(self):
    super().__init__(name="dense")
    with self.name_scope:  # Names the variables "dense/kernel", "dense/bias".
      self.kernel = tf.Variable(tf.zeros([3, 2]), name="kernel")
      self.bias = tf.Variable(tf.zeros([2]), name="bias")


def migrate(name_based_path, directory):
  """Loads the name-based checkpoint by names; writes an object-based one."""
  layer = Dense()
  status = tf_objckpt.Checkpoint(layer=layer).restore(name_based_path)
  status.assert_consumed()  # Every variable found its name.
  return tf_objckpt.Checkpoint(layer=layer).save(
      os.path.join(directory, "objects", "ckpt"))


def main():
  with tempfile.TemporaryDirectory() as directory:
    path, legacy_values = legacy_train_and_save(directory)
    our_path, values = resave_with_our_saver(path, directory)
    for want, got in zip(legacy_values, values):
      np.testing.assert_array_equal(got, want)
    print(f"Our Saver restored {path} and saved {our_path}.")

    object_path = migrate(our_path, directory)
    print(f"Migrated to the object-based checkpoint {object_path}.")
    fresh = tf.Module()
    status = tf_objckpt.Checkpoint(layer=fresh).restore(object_path)
    fresh.kernel = tf.Variable(tf.zeros([3, 2]))  # Restored on creation.
    fresh.bias = tf.Variable(tf.zeros([2]))
    status.assert_existing_objects_matched()
    for want, got in zip(legacy_values, [fresh.kernel, fresh.bias]):
      np.testing.assert_array_equal(got.numpy(), want)
    print("A fresh module restored the migrated values on creation.")


if __name__ == "__main__":
  main()
