"""What the tests share: TensorFlow and tf_objckpt side by side.

Tests are differential: they do the same thing with TensorFlow (the oracle)
and with tf_objckpt, and compare. This module holds

- `IMPLS`, the two implementations by name ("tf", "ours");
- readers of a checkpoint as `tf.train.load_checkpoint` sees it (keys with
  shapes and dtypes, the parsed object graph, values), and comparisons;
- `outcome`, the one way tests catch what a call raises;
- Python state objects (`Counter`, `Recorder`, `NumpyWrapper`, ...);
- `GraphProgram`, a graph-mode program with its own graph and session, and
  `GraphModel`, a small trained model in one;
- Keras models and optimizers of Keras 3 and tf_keras (Keras 2);
- child processes (`run_python`, the command line tool `run_cli`) and what
  failed or killed saves leave in a directory (`leftovers`);
- distributed runs: free localhost ports, in-process servers, child
  processes killed with their process group (`run_cluster_program`), and
  which data file holds each key and slice (`file_layout`).
"""

import contextlib
import ctypes
import json
import functools
import importlib.metadata
import io
import logging as py_logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import typing

from absl import logging as absl_logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint
from tensorflow.python.checkpoint import checkpoint_management as tf_management
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import data_structures as tf_data_structures
from tensorflow.python.trackable import python_state
from tensorflow.python.training import saver as tf_saver

import tf_objckpt
from tf_objckpt import base
from tf_objckpt import checkpoint_management
from tf_objckpt import data_structures
from tf_objckpt.engine import bundle_index
from tf_objckpt import saver
from tf_objckpt import util

# The checkout (or Bazel's runfiles tree) the tests run from.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class Impl(typing.NamedTuple):
  """One implementation's classes and modules, by TensorFlow's names.

  `checkpoint` is the module of `list_objects`, `gather_initializers`,
  `streaming_restore`, `frozen_saver`, `add_variable` and
  `capture_dependencies`; `saver` the module of the v1 `Saver` and its
  builders.
  """
  # pylint: disable=invalid-name
  Checkpoint: type
  CheckpointV1: type
  CheckpointManager: type
  AutoTrackable: type
  Saver: type
  # pylint: enable=invalid-name
  import_meta_graph: typing.Callable
  checkpoint: typing.Any
  checkpoint_management: typing.Any
  data_structures: typing.Any
  saver: typing.Any


# The implementations under test, by the names tests give them.
IMPLS = {
    "tf": Impl(
        Checkpoint=tf.train.Checkpoint,
        CheckpointV1=tf.compat.v1.train.Checkpoint,
        CheckpointManager=tf.train.CheckpointManager,
        AutoTrackable=tf_autotrackable.AutoTrackable,
        Saver=tf.compat.v1.train.Saver,
        import_meta_graph=tf.compat.v1.train.import_meta_graph,
        checkpoint=tf_checkpoint,
        checkpoint_management=tf_management,
        data_structures=tf_data_structures,
        saver=tf_saver),
    "ours": Impl(
        Checkpoint=tf_objckpt.Checkpoint,
        CheckpointV1=tf_objckpt.CheckpointV1,
        CheckpointManager=tf_objckpt.CheckpointManager,
        AutoTrackable=tf_objckpt.AutoTrackable,
        Saver=saver.Saver,
        import_meta_graph=saver.import_meta_graph,
        checkpoint=util,
        checkpoint_management=checkpoint_management,
        data_structures=data_structures,
        saver=saver),
}
# Objects to attach variables to: ours, and one of TensorFlow's.
OWNERS = {"ours": tf_objckpt.AutoTrackable, "tf_module": tf.Module}
# Every (writer, reader) pair of implementations.
PAIRS = [(writer, reader) for writer in IMPLS for reader in IMPLS]


def other(impl):
  """The implementation that is not `impl`."""
  return "ours" if impl == "tf" else "tf"


# ----------------------------------------------------------------------------
# Checkpoints as `tf.train.load_checkpoint` sees them.
# ----------------------------------------------------------------------------


def object_graph(path):
  """The parsed `TrackableObjectGraph` stored in the checkpoint at `path`."""
  reader = tf.train.load_checkpoint(path)
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  proto.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  return proto


def signature(path):
  """`{key: (shape, dtype name)}` for every key of the checkpoint."""
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  assert set(shapes) == set(dtypes)
  return {key: (tuple(shapes[key]), dtypes[key].name) for key in shapes}


def values(path):
  """`{key: numpy value}` of every key but the object graph."""
  reader = tf.train.load_checkpoint(path)
  return {key: reader.get_tensor(key)
          for key in reader.get_variable_to_shape_map()
          if key != OBJECT_GRAPH_KEY}


def assert_values_equal(expected, actual):
  """Asserts two `{key: value}` dicts hold the same keys, values and dtypes."""
  assert sorted(expected) == sorted(actual)
  for key in expected:
    np.testing.assert_array_equal(np.asarray(actual[key]),
                                  np.asarray(expected[key]), err_msg=key)
    assert np.asarray(actual[key]).dtype == np.asarray(expected[key]).dtype, key


def _dict_diff(expected, actual):
  """Describes how two dicts differ, for assertion messages."""
  lines = []
  for key in sorted(set(expected) | set(actual)):
    if expected.get(key, "<missing>") != actual.get(key, "<missing>"):
      lines.append(f"  {key}: expected {expected.get(key, '<missing>')}, "
                   f"got {actual.get(key, '<missing>')}")
  return "\n".join(lines)


def assert_same_checkpoint(tf_path, our_path, compare_values=True):
  """Asserts TensorFlow's and our checkpoint are the same checkpoint."""
  expected, actual = signature(tf_path), signature(our_path)
  assert actual == expected, "keys differ:\n" + _dict_diff(expected, actual)
  expected, actual = object_graph(tf_path), object_graph(our_path)
  assert actual == expected, (
      f"object graphs differ.\nTensorFlow's:\n{expected}\nOurs:\n{actual}")
  if compare_values:
    assert_values_equal(values(tf_path), values(our_path))


def write(impl, prefix, **objects):
  """Writes `objects` with `impl`'s `Checkpoint.write`; returns the path."""
  return IMPLS[impl].Checkpoint(**objects).write(os.fspath(prefix))


def write_both(tmp_path, **objects):
  """Writes the same objects with both; returns `{impl: path}`."""
  return {impl: write(impl, tmp_path / impl / "ckpt", **objects)
          for impl in IMPLS}


def snapshot(tmp_path, **objects):
  """The values of `objects` as TensorFlow checkpoints them."""
  path = write("tf", tmp_path / "snapshot" / f"s{len(os.listdir(tmp_path))}",
               **objects)
  return values(path)


def files_under(directory):
  """Paths of the files below `directory`, relative to it, sorted."""
  return sorted(
      os.path.relpath(os.path.join(root, name), directory)
      for root, _, names in os.walk(directory) for name in names)


def assert_same_files(tmp_path):
  """`tmp_path/tf` and `tmp_path/ours` hold the same files, byte for byte.

  A `checkpoint` state file is compared with its directory replaced, as it
  may name it.
  """
  directories = {impl: tmp_path / impl for impl in IMPLS}
  names = files_under(directories["tf"])
  assert any(name.endswith(".index") for name in names), names
  assert any(".data-" in name for name in names), names
  assert files_under(directories["ours"]) == names
  for name in names:
    contents = {}
    for impl, directory in directories.items():
      contents[impl] = (directory / name).read_bytes()
      if os.path.basename(name) == "checkpoint":
        contents[impl] = contents[impl].replace(os.fsencode(directory),
                                                b"<dir>")
    assert contents["ours"] == contents["tf"], (
        f"{name} differs from byte "
        f"{_first_difference(contents['tf'], contents['ours'])}")


def _first_difference(expected, actual):
  return next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b),
              min(len(expected), len(actual)))


# Enough variables for every batched path: graph mode makes their handles in
# batches of 64 (`variable_batches.GRAPH_BATCH_SIZE`); this is two batches and
# a partial one.
MANY = 2 * 64 + 7
_MIXED_DTYPES = (np.float32, np.int64, np.bool_, np.float16, np.complex64,
                 np.int8, np.uint16, object)


def mixed_value(index, scale):
  """A value whose dtype and shape vary with `index`, its content with both."""
  dtype = _MIXED_DTYPES[index % len(_MIXED_DTYPES)]
  shape = [index % 3, 2] if index % 5 else []
  if dtype is object:
    return np.full(shape, f"s{index * scale}", dtype=object)
  return (np.ones(shape) * (index * scale % 7)).astype(dtype)


def function_library_names(graph):
  """The sorted names of the functions in `graph`'s library."""
  return sorted(function.signature.name
                for function in graph.as_graph_def().library.function)


def variable_values(variables):
  """The numpy values of a list of variables."""
  return [np.asarray(v.numpy()) for v in variables]


def assert_variables_equal(expected, actual):
  """Asserts two lists of variables (or arrays) hold equal values."""
  assert len(expected) == len(actual)
  for a, b in zip(expected, actual):
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a)
    b = np.asarray(b.numpy() if hasattr(b, "numpy") else b)
    np.testing.assert_array_equal(b, a)


# ----------------------------------------------------------------------------
# Errors and logs.
# ----------------------------------------------------------------------------


class Outcome(typing.NamedTuple):
  """What a call did: its result, or the exception it raised."""
  result: typing.Any
  error: typing.Optional[Exception]

  @property
  def name(self):
    """"ok", or the name of the exception's type (messages may differ)."""
    return "ok" if self.error is None else type(self.error).__name__


def outcome(fn, *args, **kwargs):
  """Calls `fn(*args, **kwargs)`; returns an `Outcome`, never raises."""
  try:
    return Outcome(fn(*args, **kwargs), None)
  except Exception as e:  # pylint: disable=broad-except
    return Outcome(None, e)


STATUS_ASSERTIONS = ("assert_consumed", "assert_existing_objects_matched",
                     "assert_nontrivial_match")


def assertion_outcomes(status, names=STATUS_ASSERTIONS):
  """For each method `names` of a load status: "ok", or what it raised."""
  return [outcome(getattr(status, name)).name for name in names]


def errors_by_impl(fn):
  """`{impl: exception or None}` from `fn(impl's Checkpoint class)`."""
  return {impl: outcome(fn, lib.Checkpoint).error
          for impl, lib in IMPLS.items()}


def assert_same_error_type(errors, expected_type=None):
  """Both raised, exceptions of one type (and of `expected_type`)."""
  assert errors["tf"] is not None, "TensorFlow raised nothing"
  assert errors["ours"] is not None, "tf_objckpt raised nothing"
  assert type(errors["ours"]) is type(errors["tf"]), (
      f"TensorFlow raised {errors['tf']!r}, we raised {errors['ours']!r}")
  if expected_type is not None:
    assert isinstance(errors["ours"], expected_type)


def assert_names_the_value(error, path, *object_paths):
  """The message names `path`, and one of `object_paths` with its key."""
  message = str(error)
  assert path in message, message
  assert any(f"{object_path}/.ATTRIBUTES/VARIABLE_VALUE" in message and
             f"'{object_path}'" in message
             for object_path in object_paths), message


class _Collect(py_logging.Handler):

  def __init__(self):
    super().__init__(level=py_logging.DEBUG)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_logs(level=py_logging.DEBUG):
  """Collects messages logged at `level` or above while the scope is open.

  Both absl's logger and TensorFlow's ("tensorflow", where TensorFlow's
  checkpointing logs) are captured. With `level` None the loggers keep
  their levels: what is captured is what a program logs by default.
  """
  handler = _Collect()
  loggers = [absl_logging.get_absl_logger(), tf.get_logger()]
  levels = [logger.level for logger in loggers]
  for logger in loggers:
    if level is not None:
      logger.setLevel(level)
    logger.addHandler(handler)
  try:
    yield handler.messages
  finally:
    for logger, level in zip(loggers, levels):
      logger.removeHandler(handler)
      logger.setLevel(level)


@contextlib.contextmanager
def tensorflow_patched():
  """`tf_objckpt.patch_tensorflow()` for the block, unpatched after it."""
  tf_objckpt.patch_tensorflow()
  try:
    yield
  finally:
    tf_objckpt.unpatch_tensorflow()


# ----------------------------------------------------------------------------
# Python state.
# ----------------------------------------------------------------------------


class Counter(python_state.PythonState):
  """Python state saved as a string, through TensorFlow's `PythonState`."""

  def __init__(self, count=0):
    self.count = count

  def serialize(self):
    return str(self.count)

  def deserialize(self, string_value):
    self.count = int(string_value)


class Recorder(python_state.PythonState):
  """Saves `payload`; records every value `deserialize` receives."""

  def __init__(self, payload):
    self.payload = payload
    self.received = []

  def serialize(self):
    return self.payload

  def deserialize(self, string_value):
    self.received.append(string_value)


class NumpyWrapper(python_state.PythonState):
  """The example of `PythonState`'s documentation: an array as .npy bytes.

  Records the types of the values `deserialize` receives.
  """

  def __init__(self, array):
    self.array = array
    self.received_types = []

  def serialize(self):
    string_file = io.BytesIO()
    np.save(string_file, self.array, allow_pickle=False)
    return string_file.getvalue()

  def deserialize(self, string_value):
    self.received_types.append(type(string_value).__name__)
    self.array = np.load(io.BytesIO(string_value), allow_pickle=False)


class StringState(tf_objckpt.AutoTrackable):
  """Python state saved through our `PythonStringStateSaveable` factory."""

  impl = "ours"

  def __init__(self):
    super().__init__()
    self.state = "initial"
    self.restored = []

  def _gather_saveables_for_checkpoint(self):
    return {python_state.PYTHON_STATE: functools.partial(
        base.PythonStringStateSaveable, state_callback=lambda: self.state,
        restore_callback=self._restore)}

  def _restore(self, string_value):
    self.restored.append(string_value.decode())


class TfStringState(python_state.PythonState):
  """The same Python state as `StringState`, saved TensorFlow's way."""

  impl = "tf"

  def __init__(self):
    self.state = "initial"
    self.restored = []

  def serialize(self):
    return self.state

  def deserialize(self, string_value):
    self.restored.append(string_value.decode())


# ----------------------------------------------------------------------------
# Graph-mode programs.
# ----------------------------------------------------------------------------


class GraphProgram:
  """One run of a graph-mode program: its own graph and session.

  Use it as a context manager: inside, its graph is the default graph (its
  session is not the default session); on the way out the session is
  closed. `lib` holds `impl`'s classes. After
  `track()`, `root` holds `variables` and `checkpoint` is a `CheckpointV1`
  of it.
  """

  def __init__(self, impl, config=None, target=""):
    self.impl = impl
    self.lib = IMPLS[impl]
    self.graph = tf.Graph()
    self.session = None
    self.variables = []
    self.root = None
    self.checkpoint = None
    self._config = config
    self._target = target
    self._scopes = contextlib.ExitStack()

  def __enter__(self):
    self._scopes.enter_context(self.graph.as_default())
    self.session = self._scopes.enter_context(contextlib.closing(
        tf.compat.v1.Session(self._target, graph=self.graph,
                             config=self._config)))
    return self

  def __exit__(self, *exc_info):
    return self._scopes.__exit__(*exc_info)

  def variable(self, name, value, **kwargs):
    """A `tf.compat.v1.get_variable` whose initial value is `value`."""
    return tf.compat.v1.get_variable(name, initializer=tf.constant(value),
                                     **kwargs)

  def track(self, variables):
    """Tracks `variables` as `root.variables`, and initializes them."""
    self.variables = list(variables)
    self.root = self.lib.AutoTrackable()
    self.root.variables = self.variables
    self.checkpoint = self.lib.CheckpointV1(root=self.root)
    self.initialize()

  def run(self, fetches, feed_dict=None):
    return self.session.run(fetches, feed_dict)

  def initialize(self):
    self.run(tf.compat.v1.global_variables_initializer())

  def values(self):
    """The values of `variables`."""
    return self.run(self.variables)

  def uninitialized(self):
    """Names of the graph's uninitialized variables, sorted."""
    return sorted(self.run(
        tf.compat.v1.report_uninitialized_variables()).tolist())

  def num_ops(self):
    return len(self.graph.get_operations())

  def save(self, prefix):
    """Saves a numbered checkpoint at `prefix`; returns its path."""
    return self.checkpoint.save(prefix, session=self.session)


def write_in_graph(impl, prefix, **initial_values):
  """Writes, from a graph of its own, a root holding `initial_values`.

  Each value is a variable of the root, named as its attribute.

  Returns:
    The path of the checkpoint, written by `impl`'s `CheckpointV1.write`.
  """
  with GraphProgram(impl) as program:
    root = program.lib.AutoTrackable()
    for name, value in initial_values.items():
      setattr(root, name, program.variable(name, value))
    program.initialize()
    return program.lib.CheckpointV1(root=root).write(
        prefix, session=program.session)


def rewrite_without(path, key):
  """Rewrites the checkpoint at `path` without the value of `key`."""
  reader = tf.train.load_checkpoint(path)
  keys = [k for k in reader.get_variable_to_shape_map() if k != key]
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    session.run(tf.raw_ops.SaveV2(
        prefix=path, tensor_names=keys, shape_and_slices=[""] * len(keys),
        tensors=[reader.get_tensor(k) for k in keys]))


GRAPH_OPTIMIZERS = {
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.1),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
}
VARIABLE_KINDS = ("resource", "reference", "partitioned")


def v1_dense(inputs, units, scope):
  """A dense layer the v1 way: `<scope>/kernel` and `<scope>/bias`."""
  with tf.compat.v1.variable_scope(scope):
    kernel = tf.compat.v1.get_variable("kernel", (inputs.shape[-1], units))
    bias = tf.compat.v1.get_variable(
        "bias", (units,), initializer=tf.compat.v1.random_normal_initializer())
  return tf.matmul(inputs, kernel) + bias


class GraphModel(GraphProgram):
  """A small model in a `GraphProgram`, with a v1 optimizer.

  The model is `tf.compat.v1.get_variable` variables (resource, reference
  or partitioned) on `root`, trained by a `tf.compat.v1.train` optimizer, so
  checkpoints hold slot variables and non-slot optimizer variables such as
  Adam's `beta1_power`. `checkpoint` is a `CheckpointV1` of both.
  """

  def __init__(self, impl, kind="resource", optimizer="adam",
               create_optimizer=True, seed=1):
    super().__init__(impl)
    self.kind = kind
    self.optimizer = None
    self.train_op = None
    self._optimizer_name = optimizer
    self._create_optimizer = create_optimizer
    self._seed = seed

  def __enter__(self):
    super().__enter__()
    init = tf.compat.v1.random_uniform_initializer(seed=self._seed)
    use_resource = self.kind != "reference"
    self.root = self.lib.AutoTrackable()
    self.root.w = tf.compat.v1.get_variable(
        "w", [3, 2], initializer=init, use_resource=use_resource)
    self.root.b = tf.compat.v1.get_variable(
        "b", [2], initializer=init, use_resource=use_resource)
    self.variables = [self.root.w, self.root.b]
    if self.kind == "partitioned":
      self.root.parts = list(tf.compat.v1.get_variable(
          "p", [4, 2], initializer=init,
          partitioner=tf.compat.v1.fixed_size_partitioner(2)))
      self.variables.extend(self.root.parts)
    self.optimizer = GRAPH_OPTIMIZERS[self._optimizer_name]()
    self.checkpoint = self.lib.CheckpointV1(model=self.root,
                                            optimizer=self.optimizer)
    if self._create_optimizer:
      self.create_slots()
    return self

  def create_slots(self):
    """Builds the training op, creating slot and non-slot variables."""
    x = tf.constant([[1., 2., 3.]])
    loss = tf.reduce_sum(tf.square(tf.matmul(x, self.root.w) + self.root.b))
    for part in self.variables[2:]:
      loss += tf.reduce_sum(tf.square(part))
    self.train_op = self.optimizer.minimize(loss)

  def labelled_values(self):
    """`{label: value}` of model and optimizer variables (see `labelled`)."""
    variables = labelled(
        {"w": self.root.w, "b": self.root.b,
         **{f"p{i}": part for i, part in enumerate(self.variables[2:])}},
        self.optimizer)
    return dict(zip(variables, self.run(list(variables.values()))))

  def train(self, steps=3):
    for _ in range(steps):
      self.run(self.train_op)


def labelled(variables, optimizer):
  """Adds an optimizer's slot and non-slot variables to `{label: variable}`.

  Labels do not depend on graph names, which differ between programs (and
  between eager and graph mode).
  """
  result = dict(variables)
  for label, variable in variables.items():
    for slot_name in optimizer.get_slot_names():
      slot = optimizer.get_slot(variable, slot_name)
      if slot is not None:
        result[f"{label}/{slot_name}"] = slot
  for (name, _), variable in optimizer._non_slot_dict.items():  # pylint: disable=protected-access
    result[name] = variable
  return result


# ----------------------------------------------------------------------------
# Keras models and optimizers, for Keras 3 (`keras`) and Keras 2
# (`tf_keras`), whose new optimizers keep their state in plain variables and
# whose legacy optimizers keep it in slot variables.
# ----------------------------------------------------------------------------

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
    stack = [layers.Dense(8, activation="relu"), layers.BatchNormalization(),
             layers.Dense(2)]
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
  rng = np.random.RandomState(0)
  return rng.rand(16, 4).astype(np.float32), rng.rand(16, 2).astype(np.float32)


def train_step(model, optimizer):
  """One step of gradient descent on `training_data()`."""
  x, y = training_data()
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
  variables = model.trainable_variables
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def trained(flavor, kind):
  """A model and its optimizer after one training step."""
  model = make_model(flavor, kind)
  optimizer = make_optimizer(flavor)
  train_step(model, optimizer)
  return model, optimizer


# ----------------------------------------------------------------------------
# Child processes, and what interrupted saves leave behind.
# ----------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds, what="the block"):
  """Raises `TimeoutError` in the block once it has run `seconds` (SIGALRM)."""

  def expire(signum, frame):
    del signum, frame
    raise TimeoutError(f"{what} ran over {seconds} seconds")

  previous = signal.signal(signal.SIGALRM, expire)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def run_python(script, *args, timeout=300, wrapper=()):
  """Runs `script` in a new Python with tf_objckpt and testlib importable.

  `wrapper` is a command line that runs the Python command line appended to
  it (for example, in a namespace of its own).

  Returns:
    Its `subprocess.CompletedProcess`; output is captured as text.
  """
  return subprocess.run([*wrapper, sys.executable, "-c", script,
                         *map(str, args)],
                        capture_output=True, text=True, env=child_env(),
                        timeout=timeout, check=False)


def child_env(**extra):
  """The environment of a child Python importing tf_objckpt and testlib."""
  path = os.pathsep.join([REPO_ROOT, os.path.join(REPO_ROOT, "tests"),
                          os.environ.get("PYTHONPATH", "")])
  return dict(os.environ, **{"PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2",
                             **extra})


def run_cli(*args, timeout=300, cwd=None, console_script=False):
  """Runs the command line tool, `python -m tf_objckpt ARGS...`.

  Modules in `cwd` (the working directory) can be imported by the command.
  With `console_script`, the `tf-objckpt` script that pip makes of the
  package's entry point runs instead (its own folder first on `sys.path`).
  TF_CPP_MIN_LOG_LEVEL is not set: the tool keeps TensorFlow quiet itself.

  Returns:
    Its `subprocess.CompletedProcess`; output is captured as text.
  """
  env = child_env()
  del env["TF_CPP_MIN_LOG_LEVEL"]
  command = ([sys.executable, _console_script()] if console_script else
             [sys.executable, "-m", "tf_objckpt"])
  return subprocess.run([*command, *map(str, args)], capture_output=True,
                        text=True, env=env, cwd=cwd, timeout=timeout,
                        check=False)


@functools.cache
def _console_script():
  """A `tf-objckpt` script as pip writes it for the entry point `cli:run`."""
  path = os.path.join(tempfile.mkdtemp(), "tf-objckpt")
  with open(path, "w") as f:
    f.write("import sys\nfrom tf_objckpt.tools.cli import run\n"
            "if __name__ == '__main__':\n  sys.exit(run())\n")
  return path


_INDEXED = re.compile(r"(.*)\.index")
_DATA = re.compile(r"(.*)\.data-\d{5}-of-\d{5}")


def leftovers(directory):
  """`{prefix: [names]}` of the files in `directory` no checkpoint owns.

  A checkpoint owns its index and data files; the state file and meta
  graphs are kept too. Anything else (temporary files, `_temp`
  directories, data files without an index, temporary state files) is
  listed under the prefix it was written for.
  """
  names = os.listdir(directory)
  indexed = {match.group(1) for match in map(_INDEXED.fullmatch, names)
             if match}
  found = {}
  for name in names:
    data = _DATA.fullmatch(name)
    if (name == "checkpoint" or name.endswith(".meta") or
        _INDEXED.fullmatch(name) or (data and data.group(1) in indexed)):
      continue
    prefix = re.split(r"\.|_temp$", name)[0]
    found.setdefault(prefix, []).append(name)
  return found


def bytes_under(directory, names):
  """The total size of `names` in `directory` (directories included)."""
  total = 0
  for name in names:
    path = os.path.join(directory, name)
    if os.path.isdir(path):
      total += sum(os.path.getsize(os.path.join(root, file))
                   for root, _, files in os.walk(path) for file in files)
    else:
      total += os.path.getsize(path)
  return total


# ----------------------------------------------------------------------------
# Distributed runs.
# ----------------------------------------------------------------------------

# The program tests/distributed/ runs in child processes.
CLUSTER_PROGRAMS = os.path.join(REPO_ROOT, "tests", "distributed",
                                "cluster_programs.py")
_PR_SET_PDEATHSIG = 1


def free_ports(count):
  """`count` distinct localhost ports that were free a moment ago."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for sock in sockets:
      sock.bind(("localhost", 0))
    return [sock.getsockname()[1] for sock in sockets]
  finally:
    for sock in sockets:
      sock.close()


def _die_with_parent():
  """In a child before exec: own process group, killed when the parent dies."""
  os.setpgrp()
  libc = ctypes.CDLL(None, use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_python(args, env=None, capture=True):
  """Starts Python on `args` in its own process group, dying with us.

  Args:
    args: The script and its arguments.
    env: Its environment (default: `child_env()`).
    capture: Whether to pipe its output (to be read); otherwise dropped,
      so that a long-running server never blocks on a full pipe.

  Returns:
    The `subprocess.Popen`; stop it with `kill_group`.
  """
  output = subprocess.PIPE if capture else subprocess.DEVNULL
  return subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
      [sys.executable, *map(str, args)], stdout=output, stderr=output,
      text=True, env=env or child_env(), preexec_fn=_die_with_parent)


def kill_group(process):
  """Kills `process` and everything in its process group."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait()


def finish(process, timeout):
  """Waits for `process` (killing its group on timeout); returns its output.

  Returns:
    (return code, stdout, stderr); the code is None after a timeout.
  """
  try:
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr
  except subprocess.TimeoutExpired:
    kill_group(process)
    stdout, stderr = process.communicate()
    return None, stdout, stderr
  finally:
    if process.poll() is None:
      kill_group(process)


def terminate_after_line(process, line, timeout=60):
  """Sends SIGTERM to `process` once it prints `line`; waits for its end.

  Returns:
    (return code, stderr); the code is None after a timeout.
  """
  for printed in process.stdout:
    if printed.strip() == line:
      process.send_signal(signal.SIGTERM)
      break
  code, _, stderr = finish(process, timeout)
  return code, stderr


def run_cluster_program(scenario, directory, *args, timeout=90, env=None):
  """Runs one scenario of `cluster_programs.py`; returns what it printed.

  The program runs in its own process group (servers and workers it
  starts included), killed on timeout or when this process dies.

  Returns:
    The JSON value the program printed last.

  Raises:
    AssertionError: If it fails or times out, with its output.
  """
  process = start_python([CLUSTER_PROGRAMS, scenario, directory, *args],
                         env=env)
  code, stdout, stderr = finish(process, timeout)
  assert code == 0, (
      f"{scenario} {args} {'timed out' if code is None else f'exited {code}'}"
      f":\n{stdout[-3000:]}\n{stderr[-6000:]}")
  return json.loads(stdout.strip().splitlines()[-1])


def file_layout(prefix):
  """Where each entry of a checkpoint is: `{key: (data file, offset, size)}`.

  Keys of slices (binary after the key's name) are written as `repr`s of
  their bytes; entries of sliced tensors list their slices' shapes.
  """
  index = bundle_index.read_bundle_index(prefix)
  layout = {"num_shards": index.header.num_shards}
  for key, entry in index.entries.items():
    name = repr(key.encode("utf-8", "surrogateescape"))
    layout[name] = (entry.shard_id, entry.offset, entry.size,
                    len(entry.slices))
  return layout
