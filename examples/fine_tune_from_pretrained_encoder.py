"""Fine-tune a Keras classifier from a pretrained encoder's checkpoint.

A pretrained model (an encoder and a regression head) is trained and saved
with TensorFlow's own `tf.train.Checkpoint(model=..., optimizer=...)`. A new
classifier has a backbone of the encoder's shape and a new head. One
option restores the checkpoint's `model/encoder` into the classifier's
`backbone`: `CheckpointOptions(object_map={"backbone": "model/encoder"})`.

1. A dry run first, from Python (`preview_restore`) and from the command
   line (`tf-objckpt inspect CKPT --objects MODULE:FUNCTION --map
   backbone=model/encoder`): what would go where, nothing assigned.
2. The restore, before the classifier is built: its backbone gets the
   encoder's values as Keras builds it.
3. Fine-tuning, then a save: an ordinary checkpoint of the classifier,
   which TensorFlow restores.

The example checks each step and exits non-zero if one is wrong.

Run: python examples/fine_tune_from_pretrained_encoder.py
"""

import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

import tf_objckpt

OBJECT_MAP = {"backbone": "model/encoder"}


def encoder():
  return keras.Sequential([
      keras.layers.Dense(16, activation="relu"),
      keras.layers.Dense(8, activation="relu"),
  ])


class Pretrained(keras.Model):
  """The pretraining model: the encoder, then a regression head."""

  def __init__(self):
    super().__init__()
    self.encoder = encoder()
    self.head = keras.layers.Dense(1)

  def call(self, inputs):
    return self.head(self.encoder(inputs))


class Classifier(keras.Model):
  """The model to fine-tune: a backbone like the encoder, a new head."""

  def __init__(self):
    super().__init__()
    self.backbone = encoder()
    self.classify = keras.layers.Dense(3, activation="softmax")

  def call(self, inputs):
    return self.classify(self.backbone(inputs))


def classifier_objects():
  """What `tf-objckpt inspect --objects` builds: the objects to restore.

  Built, so that the dry run sees the variables a restore would fill.
  """
  classifier = Classifier()
  classifier(np.zeros((1, 6), np.float32))
  return {"backbone": classifier.backbone}


def data(seed):
  x = np.random.RandomState(seed).rand(256, 6).astype(np.float32)
  return x, x.sum(axis=1, keepdims=True), (x[:, 0] * 3).astype(np.int32) % 3


def pretrain(directory):
  """Trains the pretraining model; saves it with TensorFlow's Checkpoint."""
  model = Pretrained()
  model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
  x, y, _ = data(0)
  model.fit(x, y, epochs=3, verbose=0)
  path = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(
      os.path.join(directory, "pretrained", "ckpt"))
  print(f"Pretrained model saved by TensorFlow at {path}")
  return path, [w.numpy() for w in model.encoder.weights]


def check(condition, message):
  if not condition:
    sys.exit(f"FAILED: {message}")


def dry_run(path):
  """What the restore would do, from Python and from the command line."""
  preview = tf_objckpt.Checkpoint(**classifier_objects()).preview_restore(
      path, tf_objckpt.CheckpointOptions(object_map=OBJECT_MAP))
  print(preview)
  check(preview.complete, "every value of the encoder fits the backbone")
  command = [
      sys.executable, "-m", "tf_objckpt", "inspect", path, "--objects",
      "fine_tune_from_pretrained_encoder:classifier_objects", "--map",
      "backbone=model/encoder"
  ]
  result = subprocess.run(command,
                          cwd=os.path.dirname(os.path.abspath(__file__)),
                          capture_output=True,
                          text=True,
                          check=False)
  print(f"$ tf-objckpt inspect {path} --objects ... --map "
        f"backbone=model/encoder\n{result.stdout}")
  check(result.returncode == 0 and "4 values would restore" in result.stdout,
        f"the command's preview: {result.stderr}")


def fine_tune(path, encoder_weights, directory):
  """Restores the encoder into the backbone, fine-tunes, saves."""
  classifier = Classifier()
  status = tf_objckpt.Checkpoint(backbone=classifier.backbone).read(
      path, options=tf_objckpt.CheckpointOptions(object_map=OBJECT_MAP))
  x, _, labels = data(1)
  classifier(x[:1])  # Built now: the backbone starts from the encoder.
  status.assert_consumed()
  for old, new in zip(encoder_weights, classifier.backbone.weights):
    check(np.array_equal(old, new.numpy()), "the backbone is the encoder")
  classifier.compile(optimizer=keras.optimizers.Adam(0.01),
                     loss="sparse_categorical_crossentropy",
                     metrics=["accuracy"])
  history = classifier.fit(x, labels, epochs=5, verbose=0)
  print(f"Fine-tuned: accuracy {history.history['accuracy'][-1]:.2f}")
  saved = tf_objckpt.Checkpoint(model=classifier).write(
      os.path.join(directory, "fine_tuned", "ckpt"))
  return classifier, saved


def restore_in_tensorflow(classifier, saved):
  """The fine-tuned checkpoint is an ordinary one: TensorFlow restores it."""
  again = Classifier()
  again(np.zeros((1, 6), np.float32))
  # The optimizer `compile` attached to the model is left for later.
  tf.train.Checkpoint(model=again).read(
      saved).expect_partial().assert_existing_objects_matched()
  for ours, theirs in zip(classifier.weights, again.weights):
    check(np.array_equal(ours.numpy(), theirs.numpy()),
          "TensorFlow restores the fine-tuned checkpoint")
  print(f"TensorFlow restored the fine-tuned checkpoint {saved}")


def main():
  with tempfile.TemporaryDirectory() as directory:
    path, encoder_weights = pretrain(directory)
    dry_run(path)
    classifier, saved = fine_tune(path, encoder_weights, directory)
    restore_in_tensorflow(classifier, saved)
  print("OK")


if __name__ == "__main__":
  main()
