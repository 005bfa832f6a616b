"""Our errors keep TensorFlow's error types and the phrases code matches on.

Each scenario is run with TensorFlow and with tf_objckpt: both must raise
the same type of error, and both messages must contain the phrase, which
is taken from TensorFlow's message (so the test checks it against
TensorFlow too). Our messages add detail after the phrase (object paths,
checkpoints, the operation at fault).

Covers: tf_objckpt.base, tf_objckpt.saveable_object_util,
tf_objckpt.checkpoint, tf_objckpt.checkpoint_management,
tf_objckpt.objects.lists, tf_objckpt.objects.dicts, tf_objckpt.saver,
tf_objckpt.objects.trackable, tf_objckpt.api.object_checkpoints,
tf_objckpt.api.checkpoint_manager, tf_objckpt.v1.name_based_saver.
"""

import functools
import os

import pytest
import tensorflow as tf
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.training.saving import saveable_object_util as tf_su

import testlib as tl
from tf_objckpt import base
from tf_objckpt import saveable_object_util

_TRACKABLE = {"tf": tf_base.Trackable, "ours": base.Trackable}
_SAVEABLE_UTIL = {"tf": tf_su, "ours": saveable_object_util}


class Scenario:
  """What a test runs for one implementation, in a scratch directory."""

  def __init__(self, impl, directory):
    self.impl = impl
    self.lib = tl.IMPLS[impl]
    self.directory = directory

  def path(self, name):
    return os.path.join(self.directory, self.impl, name)

  def write(self, **objects):
    return self.lib.Checkpoint(**objects).write(self.path("ckpt"))


def _tensorflow_checkpoint(scenario, name, **objects):
  """A checkpoint written by TensorFlow, for both implementations to read."""
  return tf.train.Checkpoint(**objects).write(scenario.path(name))


def _name_based_checkpoint(scenario):
  variable = tf.Variable(1., name="v")
  return tf.compat.v1.train.Saver([variable]).save(None, scenario.path("v1"))


# Scenarios: (what to do, TensorFlow's phrase).


def _track_twice(s):
  owner = _TRACKABLE[s.impl]()
  owner._track_trackable(tf.Variable(1.), "x")  # pylint: disable=protected-access
  owner._track_trackable(tf.Variable(2.), "x")  # pylint: disable=protected-access


def _track_non_trackable(s):
  _TRACKABLE[s.impl]()._track_trackable(3, "x")  # pylint: disable=protected-access


def _saved_list_after(operation):
  """Saves a root whose list of variables went through `operation`."""

  def scenario(s):
    root = s.lib.AutoTrackable()
    root.l = [tf.Variable(1.), tf.Variable(2.)]
    operation(root.l)
    s.write(root=root)

  return scenario


def _set_item(wrapper):
  wrapper[0] = tf.Variable(3.)


def _set_slice(wrapper):
  wrapper[0:1] = [tf.Variable(3.)]


def _delete_item(wrapper):
  del wrapper[0]


def _multiply_by_zero(wrapper):
  wrapper *= 0


_LIST_OPERATIONS = {
    "__setitem__": _set_item,
    "__setitem__ of a slice": _set_slice,
    "__delitem__": _delete_item,
    "pop": lambda wrapper: wrapper.pop(),
    "remove": lambda wrapper: wrapper.remove(wrapper[0]),
    "insert": lambda wrapper: wrapper.insert(0, tf.Variable(3.)),
    "reverse": lambda wrapper: wrapper.reverse(),
    "clear": lambda wrapper: wrapper.clear(),
    "sort": lambda wrapper: wrapper.sort(),
    "*= 0": _multiply_by_zero,
}
_REPLACED = ("A list element was replaced (__setitem__, __setslice__), "
             "deleted (__delitem__, __delslice__), or moved (sort)")


def _list_changed_outside(s):
  root = s.lib.AutoTrackable()
  plain = []
  root.l = plain
  plain.append(tf.Variable(1.))
  s.write(root=root)


def _dict_changed_outside(s):
  root = s.lib.AutoTrackable()
  plain = {}
  root.d = plain
  plain["a"] = tf.Variable(1.)
  s.write(root=root)


def _dict_with_non_string_key(s):
  root = s.lib.AutoTrackable()
  root.d = {1: tf.Variable(1.)}
  s.write(root=root)


def _list_multiplied_in_place(times):

  def scenario(s):
    values = s.lib.data_structures.List([tf.Variable(1.)])
    values *= times

  return scenario


def _mapping_overwritten(s):
  mapping = s.lib.data_structures.Mapping()
  mapping["a"] = tf.Variable(1.)
  mapping["a"] = tf.Variable(2.)


def _mapping_with_non_string_key(s):
  s.lib.data_structures.Mapping()[1] = tf.Variable(1.)


def _list_of_non_trackable(s):
  s.lib.data_structures.List().append(3)


def _saver_restore_of_another_dtype(graph):
  """A v1 `Saver` restores a float checkpoint into an int32 variable."""

  def scenario(s):
    path = _name_based_checkpoint(s)
    if not graph:
      s.lib.Saver([tf.Variable(1, name="v")]).restore(None, path)
      return
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      variable = tf.compat.v1.get_variable("v", initializer=1)
      s.lib.Saver([variable]).restore(session, path)

  return scenario


def _unresolved_object(s):
  path = _tensorflow_checkpoint(s, "two", v=tf.Variable(1.), w=tf.Variable(2.))
  s.lib.Checkpoint(v=tf.Variable(1.)).read(path).assert_consumed()


class _Attributes(tf_base.Trackable):
  """Saves a variable per attribute name, through legacy saveables."""

  def __init__(self, names):
    self._values = {name: tf.Variable(1.) for name in names}

  def _gather_saveables_for_checkpoint(self):
    return {
        name: functools.partial(tf_su.ResourceVariableSaveable, value, "")
        for name, value in self._values.items()
    }


def _unused_attribute(s):
  path = _tensorflow_checkpoint(s, "ab", v1=_Attributes(["a", "b"]))
  s.lib.Checkpoint(v1=_Attributes(["a"])).read(path).assert_consumed()


def _only_the_root_matched(s):
  path = _tensorflow_checkpoint(s, "v", v=tf.Variable(1.))
  s.lib.Checkpoint(w=tf.Variable(1.)).read(path).assert_nontrivial_match()


def _metadata_of_name_based(s):
  s.lib.checkpoint.object_metadata(_name_based_checkpoint(s))


def _streaming_restore_of_name_based(s):
  path = _name_based_checkpoint(s)
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("v", initializer=1.)
    status = s.lib.CheckpointV1(v=variable).restore(path)
    s.lib.checkpoint.streaming_restore(status, session)


def _slot_optimizer(slot_of):
  """An optimizer whose slot "m" of `slot_of` is `slot_of[variable]`."""

  class Optimizer(tf.Module):

    def get_slot_names(self):
      return ["m"]

    def get_slot(self, variable, name):
      del name
      return slot_of.get(variable.ref())

  return Optimizer()


def _slot_also_a_dependency(s):
  variable, slot = tf.Variable(1.), tf.Variable(2.)
  optimizer = _slot_optimizer({variable.ref(): slot})
  optimizer.slot = slot
  s.write(v=variable, optimizer=optimizer)


def _slot_with_dependencies(s):
  variable, slot = tf.Variable(1.), tf.Module()
  slot.x = tf.Variable(3.)
  s.write(v=variable, optimizer=_slot_optimizer({variable.ref(): slot}))


def _eager_saveable_of_a_constant(s):
  _SAVEABLE_UTIL[s.impl].validate_and_slice_inputs({"a": tf.constant(1.)})


SCENARIOS = {
    "name_already_tracked":
        (_track_twice, "but a Trackable with this name is already declared "
         "as a dependency"),
    "track_non_trackable":
        (_track_non_trackable, "Trackable._track_trackable() can only be used "
         "to track objects of type Trackable"),
    **{
        f"list_wrapper_{name}": (_saved_list_after(operation), _REPLACED) for name, operation in _LIST_OPERATIONS.items(
        )
    },
    "list_changed_outside_wrapper":
        (_list_changed_outside, "(a list wrapper constructed to track "
         "trackable TensorFlow objects). The wrapped list was modified outside "
         "the wrapper"),
    "dict_changed_outside_wrapper":
        (_dict_changed_outside, "(a dictionary wrapper constructed "
         "automatically on attribute assignment). The wrapped dictionary was "
         "modified outside the wrapper"),
    "dict_with_non_string_key":
        (_dict_with_non_string_key, "The wrapped dictionary contains a "
         "non-string key which maps to a trackable object or mutable data "
         "structure"),
    "list_times_zero":
        (_list_multiplied_in_place(0), "List only supports append, "
         "multiplying in place by 0 removes elements"),
    "list_times_minus_one":
        (_list_multiplied_in_place(-1), "List only supports append, "
         "multiplying in place by -1 removes elements"),
    "mapping_overwritten":
        (_mapping_overwritten, "Mappings are an append-only data structure. "
         "Tried to overwrite the key 'a' with value"),
    "mapping_non_string_key":
        (_mapping_with_non_string_key, "Mapping accepts only string keys, but "
         "got a key 1"),
    "list_of_non_trackable":
        (_list_of_non_trackable, "Only trackable objects (such as Layers or "
         "Optimizers) may be stored in a List object. Got 3"),
    "saver_dtype_graph":
        (_saver_restore_of_another_dtype(graph=True),
         "expected dtype int32 does not equal original dtype float"),
    "saver_dtype_eager":
        (_saver_restore_of_another_dtype(graph=False),
         "expected dtype int32 does not equal original dtype float"),
    "unresolved_object":
        (_unresolved_object, "Unresolved object in checkpoint (root).w"),
    "unused_attributes":
        (_unused_attribute, "Unused attributes in these objects (the "
         "attributes exist in the checkpoint but were not restored):"),
    "only_the_root_matched":
        (_only_the_root_matched, "Nothing except the root object matched a "
         "checkpointed value. Typically this means that the checkpoint does "
         "not match the Python program"),
    "metadata_of_name_based":
        (_metadata_of_name_based, "does not appear to be object-based (saved "
         "with TF2) since it is missing the key"),
    "streaming_restore_of_name_based":
        (_streaming_restore_of_name_based, "Streaming restore not supported "
         "from name-based checkpoints when graph building"),
    "slot_also_a_dependency":
        (_slot_also_a_dependency, "A slot variable was re-used as a dependency "
         "of a Trackable object"),
    "slot_with_dependencies":
        (_slot_with_dependencies, "Currently only variables with no "
         "dependencies can be saved as slot variables"),
    "eager_saveable_of_a_constant":
        (_eager_saveable_of_a_constant, "Can only save/restore "
         "ResourceVariables when executing eagerly"),
    "checkpoint_argument_not_trackable":
        (lambda s: s.lib.Checkpoint(x=3), "`Checkpoint` was expecting x to "
         "be a trackable object (an object derived from `Trackable`), got 3"),
    "checkpoint_v1_argument_not_trackable":
        (lambda s: s.lib.CheckpointV1(x=3), "`Checkpoint` was expecting a "
         "trackable object (an object derived from `Trackable`), got 3"),
    "state_timestamps_do_not_match_paths":
        (lambda s: s.lib.checkpoint_management.generate_checkpoint_state_proto(
            s.directory,
            "a",
            all_model_checkpoint_paths=["a", "b"],
            all_model_checkpoint_timestamps=[1.]),
         "Checkpoint timestamps, if provided, must match checkpoint paths"),
    "save_path_is_the_state_file":
        (lambda s: s.lib.checkpoint_management.update_checkpoint_state(
            s.directory, os.path.join(s.directory, "checkpoint")),
         "conflicts with path used for checkpoint state"),
}


def _public_type(error):
  """The error's type, or its first public base for a private error class."""
  return next(
      cls for cls in type(error).__mro__ if not cls.__name__.startswith("_"))


@pytest.mark.parametrize("name", SCENARIOS)
def test_errors_keep_tensorflows_type_and_phrase(tmp_path, name):
  action, phrase = SCENARIOS[name]
  errors = {}
  for impl in tl.IMPLS:
    os.makedirs(tmp_path / impl)
    errors[impl] = tl.outcome(action, Scenario(impl, str(tmp_path))).error
  assert errors["tf"] is not None and errors["ours"] is not None, errors
  assert _public_type(errors["ours"]) is _public_type(errors["tf"]), errors
  for impl, error in errors.items():
    assert phrase in str(error), f"{impl}: {error}"


@pytest.mark.parametrize("operation", _LIST_OPERATIONS)
def test_unsaveable_list_wrappers_name_the_operation(tmp_path, operation):
  """TensorFlow's whole sentence, then which operation it was."""
  os.makedirs(tmp_path / "ours")
  error = tl.outcome(_saved_list_after(_LIST_OPERATIONS[operation]),
                     Scenario("ours", str(tmp_path))).error
  assert isinstance(error, ValueError), error
  message = str(error)
  assert message.startswith("Unable to save the object ListWrapper(")
  assert ("(a list wrapper constructed to track trackable TensorFlow "
          f"objects). {_REPLACED}: here by {operation}") in message


def test_unused_attributes_name_the_object_as_tensorflow_does(tmp_path):
  os.makedirs(tmp_path / "ours")
  error = tl.outcome(_unused_attribute, Scenario("ours", str(tmp_path))).error
  assert "\n  (root).v1: v1 .b () float32" in str(error), error


def test_saver_dtype_errors_add_python_dtype_names(tmp_path):
  os.makedirs(tmp_path / "ours")
  error = tl.outcome(_saver_restore_of_another_dtype(graph=False),
                     Scenario("ours", str(tmp_path))).error
  assert str(error).startswith("Restoring from checkpoint failed.")
  assert ("checkpoint key 'v': expected dtype int32 does not equal original "
          "dtype float; the checkpoint holds dtype float32 but int32 is "
          "expected") in str(error)


# Warnings: (what to do, TensorFlow's phrase).


def _eager_saver(s):
  s.lib.Saver([tf.Variable(1.)])


def _async_save_in_a_graph(s):
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("v", initializer=1.)
    session.run(variable.initializer)
    s.lib.Checkpoint(v=variable).write(
        s.path("async"),
        options=tf.train.CheckpointOptions(
            experimental_enable_async_checkpoint=True))


def _name_based_restore_of_object_based(s):
  path = _tensorflow_checkpoint(s, "object_based", v=tf.Variable(1., name="v"))
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.get_variable("v", initializer=2.)
    s.lib.Saver({"v": variable}).restore(session, path)


WARNINGS = {
    "eager_saver": (_eager_saver, "Saver is deprecated, please switch to "
                    "tf.train.Checkpoint"),
    "async_save_in_a_graph":
        (_async_save_in_a_graph, "Saving async checkpoint in graph mode is "
         "currently not supported; switching to regular sync checkpoint "
         "instead"),
    "name_based_restore_of_object_based":
        (_name_based_restore_of_object_based, "Restoring an object-based "
         "checkpoint using a name-based saver."),
}


@pytest.mark.parametrize("name", WARNINGS)
def test_warnings_keep_tensorflows_phrase(tmp_path, name):
  action, phrase = WARNINGS[name]
  for impl in tl.IMPLS:
    os.makedirs(tmp_path / impl)
    with tl.captured_logs() as messages:
      action(Scenario(impl, str(tmp_path)))
    assert any(phrase in message for message in messages), (impl, messages)
