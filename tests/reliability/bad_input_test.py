"""Bad input raises TensorFlow's error types, with messages that help.

Every case runs through `tf.train.Checkpoint` and `tf_objckpt.Checkpoint`;
both must raise the same type of error. Ours must in addition name the
checkpoint path, the checkpoint key and the object path where there is one,
and must leave every variable as it was: a failed restore assigns nothing.

Covers: tf_objckpt.checkpoint, tf_objckpt.engine.reads,
tf_objckpt.engine.read_plan, tf_objckpt.restore,
tf_objckpt.api.object_checkpoints, tf_objckpt.restoring.checkpoint_position.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ops import gen_io_ops

import testlib as tl
import tf_objckpt


def _assert_op_error_like_tensorflow(errors):
  """Damaged files: ours is an OpError, as specific as TensorFlow's.

  TensorFlow raises the `OpError` base class for most damage, and even an
  `IndexError` for a truncated data file; we raise `DataLossError`.
  """
  assert errors["tf"] is not None, "TensorFlow raised nothing"
  assert isinstance(errors["ours"], tf.errors.OpError), repr(errors["ours"])
  if isinstance(errors["tf"], tf.errors.OpError):
    assert isinstance(errors["ours"], type(errors["tf"])), (
        f"TensorFlow raised {errors['tf']!r}, we raised {errors['ours']!r}")


@pytest.mark.parametrize(
    "value", [1, "text", None, 2.5,
              tf.constant(1.0),
              np.ones(2),
              object(), ()],
    ids=[
        "int", "str", "none", "float", "tensor", "ndarray", "object",
        "empty_tuple"
    ])
def test_non_trackable_argument_is_a_value_error(value):
  errors = tl.errors_by_impl(lambda cls: cls(x=value))
  tl.assert_same_error_type(errors, ValueError)
  assert "x" in str(errors["ours"])


@pytest.mark.parametrize(
    "value, keys", [([1], []), ({
        "a": 1
    }, []), ((tf.Variable(1.0),), ["x/0/.ATTRIBUTES/VARIABLE_VALUE"]),
                    (tf.Variable(1.0), ["x/.ATTRIBUTES/VARIABLE_VALUE"])],
    ids=["list", "dict", "tuple", "variable"])
def test_trackable_arguments_are_accepted(tmp_path, value, keys):
  paths = tl.write_both(tmp_path, x=value)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  assert sorted(tl.values(paths["ours"])) == keys


def _program():
  """Objects with distinctive values, to notice any assignment."""
  module = tf.Module()
  # Big enough to fill the middle of the data file, which `_damage` hits.
  module.a = tf.Variable(np.full((300, 40), -1.0, np.float32))
  module.b = tf.Variable(np.full((5,), -2, np.int64))
  module.c = tf.Variable(np.full((2, 2), -3.0, np.float64))
  return module


def _module_values(module):
  return [module.a.numpy(), module.b.numpy(), module.c.numpy()]


@pytest.fixture(name="saved")
def _saved(tmp_path):
  """A checkpoint of `_program()`'s structure with other values."""
  module = _program()
  for variable in (module.a, module.b, module.c):
    variable.assign(
        tf.cast(
            tf.reshape(tf.range(tf.size(variable)), variable.shape) + 1,
            variable.dtype))
  return tl.write("tf", tmp_path / "saved" / "ckpt", module=module)


@pytest.mark.parametrize("method", ["read", "restore"])
def test_missing_checkpoint_is_not_found(tmp_path, method):
  path = os.fspath(tmp_path / "no" / "such" / "ckpt")
  errors = tl.errors_by_impl(lambda cls: getattr(cls(module=_program()), method)
                             (path))
  tl.assert_same_error_type(errors, tf.errors.NotFoundError)
  assert path in str(errors["ours"])


def test_missing_number_suffix_is_not_found(tmp_path):
  prefix = os.fspath(tmp_path / "ckpt")
  tf_objckpt.Checkpoint(v=tf.Variable(1.0)).save(prefix)
  errors = tl.errors_by_impl(
      lambda cls: cls(v=tf.Variable(0.0)).restore(prefix))
  tl.assert_same_error_type(errors, tf.errors.NotFoundError)
  assert prefix in str(errors["ours"])
  assert "-1" in str(errors["ours"])


def test_directory_instead_of_checkpoint(tmp_path, saved):
  directory = os.path.dirname(saved)
  errors = tl.errors_by_impl(lambda cls: cls(module=_program()).read(directory))
  tl.assert_same_error_type(errors, tf.errors.OpError)
  assert directory in str(errors["ours"])


def _damage(path, which, how):
  """Truncates or overwrites part of a checkpoint file in place.

  Returns:
    The name of the damaged file.
  """
  if which == "index":
    file_name = path + ".index"
  else:
    file_name, = glob.glob(path + ".data-*")
  with open(file_name, "rb") as f:
    content = bytearray(f.read())
  if how == "truncate":
    content = content[:len(content) // 2]
  elif how == "empty":
    content = bytearray()
  else:  # Flip bits in the middle of the file.
    middle = len(content) // 2
    for i in range(middle - 4, middle + 4):
      content[i] ^= 0xFF
  with open(file_name, "wb") as f:
    f.write(bytes(content))
  return file_name


@pytest.mark.parametrize("how", ["truncate", "empty", "flip"])
@pytest.mark.parametrize("which", ["index", "data"])
def test_damaged_checkpoint_is_an_op_error_and_assigns_nothing(
    saved, which, how):
  damaged_file = _damage(saved, which, how)
  programs = {}

  def restore(cls):
    program = programs[cls] = _program()
    cls(module=program).read(saved)

  errors = tl.errors_by_impl(restore)
  _assert_op_error_like_tensorflow(errors)
  assert damaged_file in str(errors["ours"])
  tl.assert_variables_equal(_module_values(_program()),
                            _module_values(programs[tf_objckpt.Checkpoint]))


def test_damaged_data_found_when_creating_a_variable(saved):
  """Restore-on-create reads later; a damaged file is noticed then."""
  damaged_file = _damage(saved, "data", "flip")
  errors = {}
  for impl, lib in tl.IMPLS.items():
    module = tf.Module()
    lib.Checkpoint(module=module).read(saved)  # The index is fine.
    errors[impl] = tl.outcome(setattr, module, "a",
                              tf.Variable(np.zeros((300, 40),
                                                   np.float32))).error
  _assert_op_error_like_tensorflow(errors)
  assert damaged_file in str(errors["ours"])
  assert "module/a/.ATTRIBUTES/VARIABLE_VALUE" in str(errors["ours"])


def test_corrupt_object_graph(tmp_path):
  path = os.fspath(tmp_path / "ckpt")
  gen_io_ops.save_v2(path, ["_CHECKPOINTABLE_OBJECT_GRAPH"], [""],
                     [tf.constant(b"\x08\xff\xff not a proto")])
  errors = tl.errors_by_impl(lambda cls: cls(v=tf.Variable(1.0)).read(path))
  # TensorFlow lets protobuf's DecodeError through; ours is a DataLossError.
  assert type(errors["tf"]).__name__ == "DecodeError", repr(errors["tf"])
  _assert_op_error_like_tensorflow(errors)
  assert isinstance(errors["ours"], tf.errors.DataLossError)
  assert path in str(errors["ours"])


def _two_layer_model(units, dtype="float32", built=True, flavor="tf_keras"):
  k = tl.keras_module(flavor)
  layers = [k.layers.Dense(3, dtype=dtype), k.layers.Dense(units, dtype=dtype)]
  if not built:
    return k.Sequential(layers)
  if flavor == "keras3":
    return k.Sequential([k.Input((4,))] + layers)
  model = k.Sequential(layers)
  model.build((None, 4))
  return model


# Object paths of the layers' weights in a checkpoint of `model=`.
_LAYER_PATHS = {
    "tf_keras": "model/layer_with_weights-{}/",
    "keras3": "model/_functional/_operations/{}/_"
}
_LAYER_NUMBERS = {"tf_keras": (0, 1), "keras3": (1, 2)}


def _weight_paths(flavor, layer):
  """Object paths of a layer's kernel and bias; `layer` is 0 or 1."""
  prefix = _LAYER_PATHS[flavor].format(_LAYER_NUMBERS[flavor][layer])
  return prefix + "kernel", prefix.rstrip("_") + "bias"


def _saved_model_of(tmp_path, flavor):
  model = _two_layer_model(2, flavor=flavor)
  for weight in model.weights:
    weight.assign(tf.fill(weight.shape, 7.0))
  path = tl.write("tf", tmp_path / "model" / "ckpt", model=model)
  assert all(p + "/.ATTRIBUTES/VARIABLE_VALUE" in tl.signature(path)
             for layer in (0, 1)
             for p in _weight_paths(flavor, layer))
  return path


def _read_into_a_misfit(saved_model, flavor, **model_args):
  """Reads `saved_model` into a `_two_layer_model(**model_args)` of both.

  Returns:
    `{impl: the exception raised}`, and `{impl: for each weight, whether it
    holds a checkpointed value}`.
  """
  errors, assigned = {}, {}
  for impl, lib in tl.IMPLS.items():
    model = _two_layer_model(flavor=flavor, **model_args)
    errors[impl] = tl.outcome(lib.Checkpoint(model=model).read,
                              saved_model).error
    assigned[impl] = [bool(np.any(w.numpy() == 7.0)) for w in model.weights]
  return errors, assigned


@pytest.mark.parametrize("flavor", ["tf_keras", "keras3"])
def test_shape_mismatch_is_a_value_error_and_assigns_nothing(tmp_path, flavor):
  saved_model = _saved_model_of(tmp_path, flavor)
  errors, assigned = _read_into_a_misfit(saved_model, flavor, units=5)
  tl.assert_same_error_type(errors, ValueError)
  tl.assert_names_the_value(errors["ours"], saved_model,
                            *_weight_paths(flavor, 1))
  # TensorFlow assigns the first layer before failing; we assign nothing.
  assert assigned == {"tf": [True, True, False, False], "ours": [False] * 4}


@pytest.mark.parametrize("flavor", ["tf_keras", "keras3"])
def test_dtype_mismatch_is_an_invalid_argument_error_and_assigns_nothing(
    tmp_path, flavor):
  saved_model = _saved_model_of(tmp_path, flavor)
  errors, assigned = _read_into_a_misfit(saved_model,
                                         flavor,
                                         units=2,
                                         dtype="float64")
  tl.assert_same_error_type(errors, tf.errors.InvalidArgumentError)
  tl.assert_names_the_value(errors["ours"], saved_model,
                            *_weight_paths(flavor, 0))
  assert assigned == {"tf": [False] * 4, "ours": [False] * 4}


def test_mismatch_in_a_deferred_subtree_assigns_nothing(tmp_path):
  """A mismatch found when an object is attached restores none of it."""
  source = tf.Module()
  source.child = tf.Module()
  source.child.a = tf.Variable([1.0, 2.0])
  source.child.b = tf.Variable([[3.0]])
  path = tl.write("tf", tmp_path / "ckpt", tree=source)
  target = tf_objckpt.AutoTrackable()
  tf_objckpt.Checkpoint(tree=target).read(path)
  child = tf.Module()
  child.a = tf.Variable([0.0, 0.0])
  child.b = tf.Variable([[0.0, 0.0]])  # Wrong shape.
  error = tl.outcome(setattr, target, "child", child).error
  assert isinstance(error, ValueError)
  tl.assert_names_the_value(error, path, "tree/child/b")
  tl.assert_variables_equal([[0.0, 0.0], [[0.0, 0.0]]], [child.a, child.b])


@pytest.mark.parametrize("flavor", ["tf_keras", "keras3"])
@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_mismatch_on_create(tmp_path, change, flavor):
  """Restore first, then build a model that does not fit the checkpoint."""
  saved_model = _saved_model_of(tmp_path, flavor)
  errors, models = {}, {}
  for impl in tl.IMPLS:
    if change == "shape":
      model = _two_layer_model(5, built=False, flavor=flavor)
    else:
      model = _two_layer_model(2, dtype="float64", built=False, flavor=flavor)
    models[impl] = model
    tl.IMPLS[impl].Checkpoint(model=model).read(saved_model)
    errors[impl] = tl.outcome(model.build, (None, 4)).error
  tl.assert_same_error_type(errors)
  if flavor == "keras3":  # Keras 3 creates, then we restore (and check).
    tl.assert_names_the_value(
        errors["ours"], saved_model,
        *_weight_paths(flavor, 1 if change == "shape" else 0))
  # Variables are restored one by one as they are created: the first layer,
  # which fits, has its values; the failing one has none.
  last = models["ours"].layers[1]
  for weight in last.weights:
    assert not np.any(weight.numpy() == 7.0), weight.name


def test_dtype_mismatch_on_add_variable(tmp_path):
  source = tf_objckpt.AutoTrackable()
  source.v = tf.Variable(np.ones((2, 3), np.float32))
  path = tl.write("tf", tmp_path / "ckpt", tree=source)
  errors = {}
  for impl, lib in tl.IMPLS.items():
    target = tf_objckpt.AutoTrackable()
    lib.Checkpoint(tree=target).read(path)
    errors[impl] = tl.outcome(
        tf_objckpt.add_variable,
        target,
        "v",
        shape=(2, 3),
        dtype=tf.float64,
        initializer=tf.compat.v1.zeros_initializer()).error
  tl.assert_same_error_type(errors, ValueError)


@pytest.mark.parametrize("owner", sorted(tl.OWNERS))
@pytest.mark.parametrize("reader", tl.IMPLS)
def test_shape_mismatch_on_add_variable(tmp_path, reader, owner):
  """TensorFlow's add_variable creates a variable of the checkpoint's shape.

  Ours raises a ValueError; when it restores into its own objects, the
  message names the value.
  """
  source = tf_objckpt.AutoTrackable()
  source.v = tf.Variable(np.ones((2, 3), np.float32))
  path = tl.write("tf", tmp_path / "ckpt", tree=source)
  target = tl.OWNERS[owner]()
  tl.IMPLS[reader].Checkpoint(tree=target).read(path)
  error = tl.outcome(tf_objckpt.add_variable,
                     target,
                     "v",
                     shape=(3, 2),
                     initializer=tf.compat.v1.zeros_initializer()).error
  assert isinstance(error, ValueError), error
  if reader == "ours" and owner == "ours":
    tl.assert_names_the_value(error, path, "tree/v")
  assert "v" not in target._trackable_children()  # pylint: disable=protected-access


def test_errors_are_not_raised_from_a_half_restored_checkpoint(saved):
  """After a failed restore, a correct restore still works."""
  program = _program()
  program.c = tf.Variable(np.zeros((3,), np.float64))  # Wrong shape.
  with pytest.raises(ValueError):
    tf_objckpt.Checkpoint(module=program).read(saved)
  program = _program()
  tf_objckpt.Checkpoint(module=program).read(saved).assert_consumed()
  assert float(program.a.numpy()[0, 0]) == 1.0


def test_damaged_value_only_fails_its_own_variable(tmp_path):
  """Values are read lazily (or read ahead): one bad value spoils no other."""
  pattern = np.full((4096,), 1234.5, np.float32)
  source = tf.Module()
  source.good = tf.Variable([1.0, 2.0])
  source.bad = tf.Variable(pattern)
  path = tl.write("tf", tmp_path / "ckpt", tree=source)
  data_file, = glob.glob(path + ".data-*")
  with open(data_file, "rb") as f:
    content = bytearray(f.read())
  start = bytes(content).index(pattern.tobytes()[:64])
  content[start + 100] ^= 0xFF
  with open(data_file, "wb") as f:
    f.write(bytes(content))
  results = {}
  for impl, lib in tl.IMPLS.items():
    target = tf.Module()
    lib.Checkpoint(tree=target).read(path)
    target.good = tf.Variable([0.0, 0.0])  # Restored: its value is fine.
    good = target.good.numpy().tolist()
    error = tl.outcome(setattr, target, "bad",
                       tf.Variable(np.zeros((4096,), np.float32))).error
    results[impl] = (good, type(error).__name__)
    if impl == "ours":
      assert path in str(error)
  assert results["ours"] == results["tf"] == ([1.0, 2.0], "DataLossError")
