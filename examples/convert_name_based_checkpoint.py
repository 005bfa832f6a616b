"""Convert a v1 `Saver` checkpoint for a Keras 3 model with `tf-objckpt convert`.

A TF1 program saved its weights by variable names (`encoder/kernel`,
`head/kernel`, ...). The new program is a Keras 3 model whose layers are
named "dense" and "head". The command line tool builds the model with
`build_objects` below (`--objects MODULE:FUNCTION`), matches each Keras
variable to a checkpoint name (exact name, then the name without the
model's scope, then `--map`), and writes an object-based checkpoint. Without
`--map encoder/=dense/` the "dense" layer finds nothing, and the tool
refuses to write a partial checkpoint. The result verifies, and TensorFlow's
own `tf.train.Checkpoint` restores it.

Run: python examples/convert_name_based_checkpoint.py
"""

import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

KERNEL = np.arange(12, dtype=np.float32).reshape(4, 3)
HEAD = np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1)


def build_objects():
  """The new program's objects: `--objects convert_name_based_checkpoint:build_objects`."""
  model = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(3, name="dense"),
      keras.layers.Dense(1, name="head", use_bias=False)
  ],
                           name="classifier")
  return {"model": model}


def legacy_save(directory):
  """A TF1 program saves a name-based checkpoint; returns its prefix."""
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("encoder/kernel", initializer=KERNEL)
    tf.compat.v1.get_variable("encoder/bias", initializer=[0.5, 0.0, -0.5])
    tf.compat.v1.get_variable("head/kernel", initializer=HEAD)
    tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, os.path.join(directory, "legacy", "model"))


def tf_objckpt_command(*args):
  """Runs `python -m tf_objckpt ARGS` (the `tf-objckpt` command)."""
  here = os.path.dirname(os.path.abspath(__file__))
  path = os.pathsep.join(
      [here, os.path.dirname(here),
       os.environ.get("PYTHONPATH", "")])
  result = subprocess.run([sys.executable, "-m", "tf_objckpt", *args],
                          capture_output=True,
                          text=True,
                          check=False,
                          env=dict(os.environ,
                                   PYTHONPATH=path,
                                   TF_CPP_MIN_LOG_LEVEL="3"))
  print(f"$ tf-objckpt {' '.join(args)}\n{result.stdout}")
  return result


def main():
  with tempfile.TemporaryDirectory() as directory:
    legacy = legacy_save(directory)
    out = os.path.join(directory, "converted", "ckpt")
    objects = "convert_name_based_checkpoint:build_objects"

    refused = tf_objckpt_command("convert", legacy, out, "--objects", objects)
    assert refused.returncode == 1, refused.stderr
    assert "classifier/dense/kernel" in refused.stdout
    assert not os.path.exists(out + ".index"), "a partial result was written"

    converted = tf_objckpt_command("convert", legacy, out, "--objects", objects,
                                   "--map", "encoder/=dense/")
    assert converted.returncode == 0, converted.stderr
    assert "classifier/head/kernel <- head/kernel (without model name)" in (
        converted.stdout)
    assert "global_step" in converted.stdout  # Left over, and reported.

    verified = tf_objckpt_command("verify", out)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    model = build_objects()["model"]
    tf.train.Checkpoint(model=model).restore(out).assert_consumed()
    dense, head = model.layers
    np.testing.assert_array_equal(dense.kernel.numpy(), KERNEL)
    np.testing.assert_array_equal(dense.bias.numpy(), [0.5, 0.0, -0.5])
    np.testing.assert_array_equal(head.kernel.numpy(), HEAD)
    print("TensorFlow restored the converted checkpoint into the Keras 3 "
          "model.")


if __name__ == "__main__":
  main()
