"""`restore_or_initialize()` restores the newest intact checkpoint.

Three checkpoints hold values 1, 2 and 3 (`ckpt-1` to `ckpt-3`). Real damage
on their files (a truncated data file, a missing `.index`, bytes flipped
inside a value, a damaged object graph, a missing shard of a sharded v1
`Saver` save) hits the newest one, two or all three. The manager then
restores the newest intact one, returns its path, makes it
`latest_checkpoint`, leaves the damaged ones out of `checkpoints`, and warns
once per skipped checkpoint in `verify`'s words; with all three damaged it
raises the newest one's error and assigns nothing. Eagerly into existing
objects, eagerly into objects created after the restore, and graph
building; TensorFlow's classes too while patched. TensorFlow's manager
fails on a damaged newest checkpoint.

Covers: tf_objckpt.api.self_healing, tf_objckpt.checkpoint_management,
tf_objckpt.inspection.verify_checkpoint, tf_objckpt.api.checkpoint_manager.
"""

import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import bundle_index
from tf_objckpt.engine import tuning
from tf_objckpt.tools import cli

_SIZE = 64
_VALUE_KEY = "model/v/.ATTRIBUTES/VARIABLE_VALUE"
_SKIPPED = "Skipped damaged checkpoint"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """A directory of `ckpt-1` .. `ckpt-3`, each holding its number."""
  directory = str(tmp_path_factory.mktemp("saved") / "checkpoints")
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=model),
                                         directory,
                                         max_to_keep=3)
  for number in (1, 2, 3):
    model.v.assign(np.full([_SIZE], number, np.float32))
    manager.save()
  return directory


def _truncate_data_file(prefix):
  data_file = prefix + ".data-00000-of-00001"
  os.truncate(data_file, os.path.getsize(data_file) // 2)
  return "data file is truncated"


def _remove_index(prefix):
  os.remove(prefix + ".index")
  return "index file is missing"


def _flip_value(prefix):
  entry = bundle_index.read_bundle_index(prefix).entries[_VALUE_KEY]
  with open(prefix + ".data-00000-of-00001", "r+b") as f:
    f.seek(entry.offset + entry.size // 2)
    f.write(b"\xa5\xa5\xa5\xa5")
  return f"{_VALUE_KEY}: cannot be read: DataLossError"


def _damage_object_graph(prefix):
  """Rewrites the checkpoint (checksums intact) with a child out of range."""
  reader = tf.train.load_checkpoint(prefix)
  values = {
      key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
  }
  graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
      values[tl.OBJECT_GRAPH_KEY])
  graph.nodes[0].children[0].node_id = 99
  values[tl.OBJECT_GRAPH_KEY] = graph.SerializeToString()
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    session.run(
        tf.raw_ops.SaveV2(prefix=prefix,
                          tensor_names=list(values),
                          shape_and_slices=[""] * len(values),
                          tensors=list(values.values())))
  return "node 0"


_DAMAGE = {
    "truncated": _truncate_data_file,
    "no_index": _remove_index,
    "flipped": _flip_value,
    "object_graph": _damage_object_graph
}


def _damaged_copy(saved, tmp_path, damage, count):
  """A copy of `saved` whose newest `count` checkpoints are damaged.

  Returns:
    The directory, and the words `verify` uses for the damage.
  """
  directory = str(tmp_path / "checkpoints")
  shutil.copytree(saved, directory)
  words = None
  for number in range(3, 3 - count, -1):
    words = _DAMAGE[damage](os.path.join(directory, f"ckpt-{number}"))
  return directory, words


def _unlist(directory, name):
  """Removes `name` from the directory's state file."""
  state_file = os.path.join(directory, "checkpoint")
  with open(state_file) as f:
    lines = [line for line in f if f'"{name}"' not in line]
  with open(state_file, "w") as f:
    f.writelines(lines)


def _skip_warnings(messages):
  return [message for message in messages if message.startswith(_SKIPPED)]


def _check_warnings(warnings, directory, count, words):
  """One warning per skipped checkpoint, newest first, naming the damage."""
  assert len(warnings) == count, warnings
  for warning, number in zip(warnings, (3, 2, 1)):
    assert warning.startswith(
        f"{_SKIPPED} {os.path.join(directory, f'ckpt-{number}')}: error: ")
    assert words in warning, warning


def _restore_eagerly(directory, on_create):
  """Restores through a manager; returns (path or error, value, manager)."""
  model = tf.Module()
  if not on_create:
    model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  checkpoint = tf_objckpt.Checkpoint(model=model)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=3)
  try:
    result = manager.restore_or_initialize()
  except tf.errors.OpError as e:
    result = e
  if on_create:
    model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  return result, model.v.numpy(), manager, checkpoint


@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("damage", sorted(_DAMAGE))
@pytest.mark.parametrize("on_create", [False, True],
                         ids=["existing", "on_create"])
def test_eager_restore_falls_back_to_newest_intact(saved, tmp_path, damage,
                                                   count, on_create):
  directory, words = _damaged_copy(saved, tmp_path, damage, count)
  with tl.captured_logs(logging.WARNING) as messages:
    result, value, manager, checkpoint = _restore_eagerly(directory, on_create)
  _check_warnings(_skip_warnings(messages), directory, count, words)
  if count == 3:  # All damaged: the newest error, nothing assigned.
    assert isinstance(result, tf.errors.OpError), result
    assert "ckpt-3" in str(result)
    np.testing.assert_array_equal(value, 0.)
    assert int(checkpoint.save_counter) == 0
    return
  expected = os.path.join(directory, f"ckpt-{3 - count}")
  assert result == expected
  assert manager.latest_checkpoint == expected
  assert manager.checkpoints == [
      os.path.join(directory, f"ckpt-{number}")
      for number in range(1, 4 - count)
  ]
  np.testing.assert_array_equal(value, 3 - count)
  assert int(checkpoint.save_counter) == 3 - count
  for number in range(4 - count, 4):  # Damaged files stay.
    assert f"ckpt-{number}.data-00000-of-00001" in tl.files_under(directory)


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
def test_graph_mode_falls_back_before_building_restore_ops(
    saved, tmp_path, damage):
  directory, words = _damaged_copy(saved, tmp_path, damage, 2)
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    model = tf.Module()
    checkpoint = tf_objckpt.Checkpoint(model=model)
    manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=3)
    with tl.captured_logs(logging.WARNING) as messages:
      restored = manager.restore_or_initialize()
    _check_warnings(_skip_warnings(messages), directory, 2, words)
    assert restored == manager.latest_checkpoint == os.path.join(
        directory, "ckpt-1")
    model.v = tf.Variable(np.zeros([_SIZE], np.float32))  # Restored on create.
    checkpoint.restore(restored).initialize_or_restore(session)
    np.testing.assert_array_equal(session.run(model.v), 1.)


@pytest.mark.parametrize("on_create", [False, True],
                         ids=["existing", "on_create"])
def test_checkpoints_beyond_two_pieces_are_checked_a_piece_at_a_time(
    saved, tmp_path, monkeypatch, on_create):
  # Too large to keep: checked a piece at a time, then read again.
  monkeypatch.setattr(tuning.TUNING, "restore_piece_bytes", _SIZE)
  monkeypatch.setattr(tuning.TUNING, "default_max_restore_memory", 2 * _SIZE)
  directory, words = _damaged_copy(saved, tmp_path, "flipped", 1)
  with tl.captured_logs(logging.WARNING) as messages:
    result, value, _, _ = _restore_eagerly(directory, on_create)
  _check_warnings(_skip_warnings(messages), directory, 1, words)
  assert result == os.path.join(directory, "ckpt-2")
  np.testing.assert_array_equal(value, 2.)


@pytest.mark.parametrize(
    "manager_class", [tf.train.CheckpointManager, tf_objckpt.CheckpointManager],
    ids=["tensorflow", "ours"])
def test_manager_of_tensorflows_checkpoint_stops_at_damaged_newest(
    saved, tmp_path, manager_class):
  """It raises, and the model keeps its values.

  TensorFlow's `Checkpoint` has restored its save counter by then.
  """
  directory, _ = _damaged_copy(saved, tmp_path, "flipped", 1)
  model = tf.Module()
  model.v = tf.Variable(np.full([_SIZE], 7., np.float32))
  checkpoint = tf.train.Checkpoint(model=model)
  manager = manager_class(checkpoint, directory, max_to_keep=3)
  with pytest.raises(tf.errors.DataLossError):
    manager.restore_or_initialize()
  np.testing.assert_array_equal(model.v.numpy(), 7.)
  assert checkpoint.save_counter.numpy() == 3


def test_tensorflow_classes_fall_back_while_patched(saved, tmp_path):
  directory, words = _damaged_copy(saved, tmp_path, "truncated", 1)
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  with tl.tensorflow_patched(), tl.captured_logs(logging.WARNING) as messages:
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                         directory,
                                         max_to_keep=3)
    restored = manager.restore_or_initialize()
  _check_warnings(_skip_warnings(messages), directory, 1, words)
  assert restored == os.path.join(directory, "ckpt-2")
  np.testing.assert_array_equal(model.v.numpy(), 2.)


def test_mismatch_raises_without_fallback(saved, tmp_path):
  """A value that does not fit is no damage: it raises, assigning nothing."""
  directory, _ = _damaged_copy(saved, tmp_path, "flipped", 0)
  model = tf.Module()
  model.v = tf.Variable(np.full([_SIZE + 1], 7., np.float32))
  checkpoint = tf_objckpt.Checkpoint(model=model)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=3)
  with tl.captured_logs(logging.WARNING) as messages:
    with pytest.raises(ValueError, match="ckpt-3"):
      manager.restore_or_initialize()
  assert not _skip_warnings(messages)
  np.testing.assert_array_equal(model.v.numpy(), 7.)
  assert checkpoint.save_counter.numpy() == 0


def test_named_path_never_falls_back(saved, tmp_path):
  directory, _ = _damaged_copy(saved, tmp_path, "flipped", 1)
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  checkpoint = tf_objckpt.Checkpoint(model=model)
  for read in (checkpoint.restore, checkpoint.read):
    with pytest.raises(tf.errors.DataLossError):
      read(os.path.join(directory, "ckpt-3"))
  np.testing.assert_array_equal(model.v.numpy(), 0.)


@pytest.mark.parametrize("state", ["missing", "garbage"])
def test_missing_or_unreadable_state_file_uses_the_directory(
    saved, tmp_path, state):
  directory, _ = _damaged_copy(saved, tmp_path, "truncated", 1)
  state_file = os.path.join(directory, "checkpoint")
  os.remove(state_file)
  if state == "garbage":
    with open(state_file, "wb") as f:
      f.write(b"model_checkpoint_path: {not a state")
  with tl.captured_logs(logging.WARNING) as messages:
    result, value, manager, _ = _restore_eagerly(directory, on_create=False)
  assert result == manager.latest_checkpoint == os.path.join(
      directory, "ckpt-2")
  np.testing.assert_array_equal(value, 2.)
  assert any("state file" in message and "missing or unreadable" in message
             for message in messages), messages
  assert len(_skip_warnings(messages)) == 1


def test_checkpoints_beyond_the_state_file_are_candidates(saved, tmp_path):
  # ckpt-1 is no longer listed, as if kept by keep_checkpoint_every_n_hours.
  directory, _ = _damaged_copy(saved, tmp_path, "no_index", 2)
  _unlist(directory, "ckpt-1")
  result, value, manager, _ = _restore_eagerly(directory, on_create=False)
  assert result == manager.latest_checkpoint == os.path.join(
      directory, "ckpt-1")
  assert manager.checkpoints == []
  np.testing.assert_array_equal(value, 1.)


def test_next_save_replaces_the_damaged_one_whole(tmp_path):
  directory = str(tmp_path / "checkpoints")
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  model.w = tf.Variable(np.zeros([_SIZE], np.float32))
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=model),
                                         directory,
                                         max_to_keep=3)
  several_shards = tf.train.CheckpointOptions(
      experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
          max_shard_size=_SIZE * 4))
  for number in (1, 2, 3):
    model.v.assign(np.full([_SIZE], number, np.float32))
    manager.save(options=several_shards if number == 3 else None)
  stale = {
      name for name in tl.files_under(directory)
      if name.startswith("ckpt-3.data")
  }
  assert len(stale) > 1
  _remove_index(os.path.join(directory, "ckpt-3"))
  result, value, manager, _ = _restore_eagerly(directory, on_create=False)
  assert result.endswith("ckpt-2")
  np.testing.assert_array_equal(value, 2.)
  assert manager.save() == os.path.join(directory, "ckpt-3")
  assert {
      name for name in tl.files_under(directory) if name.startswith("ckpt-3")
  } == {"ckpt-3.index", "ckpt-3.data-00000-of-00001"}
  assert manager.checkpoints == [
      os.path.join(directory, f"ckpt-{number}") for number in (1, 2, 3)
  ]


def _write_sharded_saves(directory):
  """Three v1 `Saver(sharded=True)` saves over two devices: model-1..3."""
  os.makedirs(directory)
  with tf.Graph().as_default():
    variables = []
    for index, name in enumerate("ab"):
      with tf.device(f"/cpu:{index}"):
        variables.append(
            tf.compat.v1.get_variable(name,
                                      initializer=np.zeros([_SIZE],
                                                           np.float32)))
    number = tf.compat.v1.placeholder(tf.float32, [])
    assign = [
        variable.assign(tf.fill([_SIZE], number)) for variable in variables
    ]
    saver = tl.IMPLS["ours"].Saver(sharded=True, max_to_keep=3)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    with tf.compat.v1.Session(config=config) as session:
      for step in (1, 2, 3):
        session.run(assign, {number: step})
        saver.save(session,
                   os.path.join(directory, "model"),
                   global_step=step,
                   write_meta_graph=False)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_missing_shard_of_sharded_saver_save(tmp_path, count):
  directory = str(tmp_path / "checkpoints")
  _write_sharded_saves(directory)
  for step in range(3, 3 - count, -1):
    os.remove(os.path.join(directory, f"model-{step}.data-00001-of-00002"))
  a = tf.Variable(np.zeros([_SIZE], np.float32), name="a")
  b = tf.Variable(np.zeros([_SIZE], np.float32), name="b")
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(a=a, b=b),
                                         directory,
                                         max_to_keep=3,
                                         checkpoint_name="model")
  with tl.captured_logs(logging.WARNING) as messages:
    try:
      result = manager.restore_or_initialize()
    except tf.errors.OpError as e:
      result = e
  warnings = _skip_warnings(messages)
  assert len(warnings) == count
  assert all("data file is missing" in warning for warning in warnings)
  if count == 3:
    assert isinstance(result, tf.errors.OpError)
    np.testing.assert_array_equal(a.numpy(), 0.)
    np.testing.assert_array_equal(b.numpy(), 0.)
    return
  assert result == manager.latest_checkpoint == os.path.join(
      directory, f"model-{3 - count}")
  np.testing.assert_array_equal(a.numpy(), 3 - count)
  np.testing.assert_array_equal(b.numpy(), 3 - count)


def test_verify_all_reports_every_checkpoint_of_a_directory(
    saved, tmp_path, capsys):
  assert cli.main(["verify", saved, "--all"]) == 0
  assert capsys.readouterr().out.splitlines() == [
      f"{os.path.join(saved, f'ckpt-{number}')}: intact" for number in (3, 2, 1)
  ]
  directory, _ = _damaged_copy(saved, tmp_path, "flipped", 1)
  _remove_index(os.path.join(directory, "ckpt-2"))
  _unlist(directory, "ckpt-1")  # Found by its files.
  assert cli.main(["verify", directory, "--all"]) == 1
  ckpt_3, ckpt_2, ckpt_1 = capsys.readouterr().out.splitlines()
  assert ckpt_3.startswith(f"{os.path.join(directory, 'ckpt-3')}: damaged: ")
  assert f"{_VALUE_KEY}: cannot be read: DataLossError" in ckpt_3
  assert ckpt_2 == (f"{os.path.join(directory, 'ckpt-2')}: damaged: error: "
                    f"{os.path.join(directory, 'ckpt-2.index')}: index file "
                    "is missing")
  assert ckpt_1 == f"{os.path.join(directory, 'ckpt-1')}: intact"


class _RecordedNumber(tf.train.experimental.PythonState):
  """A number that records every value a restore gives it."""

  def __init__(self):
    self.number = 0
    self.restored = []

  def serialize(self):
    return str(self.number)

  def deserialize(self, string_value):
    self.number = int(string_value)
    self.restored.append(self.number)


def _model_with_python_state():
  model = tf.Module()
  model.v = tf.Variable(np.zeros([_SIZE], np.float32))
  model.number = _RecordedNumber()
  return model


def test_graph_building_assigns_nothing_from_a_damaged_checkpoint(tmp_path):
  """Python state, restored while restore ops are built, never sees ckpt-3.

  Its value in the damaged checkpoint reads fine: only the variable's is
  damaged. The candidate must be known damaged before the restore of it
  is built, not after.
  """
  directory = str(tmp_path)
  model = _model_with_python_state()
  manager = tf_objckpt.CheckpointManager(tf_objckpt.Checkpoint(model=model),
                                         directory,
                                         max_to_keep=3)
  for number in (1, 2, 3):
    model.v.assign(np.full([_SIZE], number, np.float32))
    model.number.number = number
    manager.save()
  _flip_value(os.path.join(directory, "ckpt-3"))
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    model = _model_with_python_state()
    checkpoint = tf_objckpt.Checkpoint(model=model)
    manager = tf_objckpt.CheckpointManager(checkpoint, directory, max_to_keep=3)
    restored = manager.restore_or_initialize()
    assert restored == os.path.join(directory, "ckpt-2")
    checkpoint.restore(restored).initialize_or_restore(session)
    np.testing.assert_array_equal(session.run(model.v), 2.)
  assert 3 not in model.number.restored, model.number.restored
  assert model.number.number == 2
