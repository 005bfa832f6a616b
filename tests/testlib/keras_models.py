"""Keras models and optimizers, for Keras 3 and Keras 2 (`tf_keras`).

Keras 3's and tf_keras's new optimizers keep their state in plain
variables; tf_keras's legacy optimizers keep it in slot variables. Each
flavor's models come in three kinds: sequential, functional, subclassed.
"""

import importlib.metadata

import numpy as np
import tensorflow as tf

# TensorFlow 2.16 and later install Keras 3 as `keras`; on 2.15 it is Keras 2,
# which is `tf.keras` there, and the Keras 3 flavor does not apply.
KERAS_3 = int(importlib.metadata.version("keras").split(".")[0]) >= 3
FLAVORS = ("keras3",) * KERAS_3 + ("tf_keras", "tf_keras_legacy")
MODEL_KINDS = ("sequential", "functional", "subclassed")


def keras_module(flavor):
  """`keras` for Keras 3, `tf_keras` for both Keras 2 flavors."""
  import keras  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  if flavor == "keras3" and not KERAS_3:
    raise RuntimeError(f"keras is Keras {keras.__version__} on TensorFlow "
                       f"{tf.__version__}: mark Keras 3 tests keras3")
  return keras if flavor == "keras3" else tf_keras


def make_optimizer(flavor):
  """A fresh Adam of `flavor`."""
  k = keras_module(flavor)
  if flavor == "tf_keras_legacy":
    return k.optimizers.legacy.Adam(learning_rate=0.01)
  return k.optimizers.Adam(learning_rate=0.01)


def create_optimizer_variables(flavor, optimizer, variables):
  """Creates every variable of `optimizer` for `variables`, untrained."""
  if flavor == "tf_keras_legacy":
    optimizer._create_all_weights(variables)  # pylint: disable=protected-access
  else:
    optimizer.build(variables)


def make_model(flavor, kind, built=True, explicit_build=True):
  """A small model with a BatchNormalization layer (non-trainable weights).

  Args:
    flavor: One of FLAVORS.
    kind: One of MODEL_KINDS.
    built: Whether the model has its weights on return. Functional models
      are always built.
    explicit_build: Whether a subclassed model builds its layers in
      `build()`. Without it, Keras 3 first builds them inside a symbolic,
      stateless scope, where no restore (TensorFlow's included) can work.
  """
  k = keras_module(flavor)
  layers = k.layers
  if kind == "sequential":
    stack = [
        layers.Dense(8, activation="relu"),
        layers.BatchNormalization(),
        layers.Dense(2)
    ]
    if built:
      return k.Sequential([k.Input((4,))] + stack)
    return k.Sequential(stack)
  if kind == "functional":
    inputs = k.Input((4,))
    hidden = layers.Dense(8, activation="relu")(inputs)
    hidden = layers.BatchNormalization()(hidden)
    return k.Model(inputs, layers.Dense(2)(hidden))

  class Subclassed(k.Model):

    def __init__(self):
      super().__init__()
      self.first = layers.Dense(8, activation="relu")
      self.norm = layers.BatchNormalization()
      heads = [layers.Dense(1), layers.Dense(1, use_bias=False)]
      if flavor == "keras3":
        # Keras 3 does not checkpoint layers held in lists.
        self.head_a, self.head_b = heads
      else:
        self.heads = heads

    @property
    def head_layers(self):
      return (self.head_a, self.head_b) if flavor == "keras3" else self.heads

    def call(self, inputs, training=False):
      hidden = self.norm(self.first(inputs), training=training)
      return k.layers.concatenate([head(hidden) for head in self.head_layers])

  class SubclassedWithBuild(Subclassed):

    def build(self, input_shape):
      self.first.build(input_shape)
      self.norm.build((None, 8))
      for head in self.head_layers:
        head.build((None, 8))
      super().build(input_shape)

  model = SubclassedWithBuild() if explicit_build else Subclassed()
  if built:
    model(np.zeros((1, 4), np.float32))
  return model


def training_data():
  """Fixed inputs and targets for `train_step`."""
  rng = np.random.RandomState(0)
  return rng.rand(16, 4).astype(np.float32), rng.rand(16, 2).astype(np.float32)


def train_step(model, optimizer):
  """One step of gradient descent on `training_data()`."""
  x, y = training_data()
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
  variables = model.trainable_variables
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def untrained(flavor, kind):
  """A model and its optimizer with all their variables, before training."""
  model = make_model(flavor, kind)
  optimizer = make_optimizer(flavor)
  create_optimizer_variables(flavor, optimizer, model.trainable_variables)
  return model, optimizer


def trained(flavor, kind):
  """A model and its optimizer after one training step."""
  model = make_model(flavor, kind)
  optimizer = make_optimizer(flavor)
  train_step(model, optimizer)
  return model, optimizer
