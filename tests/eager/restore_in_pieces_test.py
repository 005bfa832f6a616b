"""Eager restores read each value once under their memory limit, in pieces over.

A restore whose values fit under its memory limit (`max_restore_memory`,
or half the available memory) reads every value once, with one read per
thread, and assigns once all are read. Over the limit it holds one piece
of values at a time rather than a copy of the whole model, and reuses the
memory each piece frees; every piece but the last is read once
beforehand. Either way a damaged value fails the restore before anything
is assigned. These tests set small limits to split small models, count
the values each `RestoreV2` reads, compare with `tf.train.Checkpoint` and
damage values in each piece; the peak memory of real restores is
measured by `tests/reliability/restore_memory_test.py`.

Covers: tf_objckpt.engine.reads, tf_objckpt.engine.read_plan,
tf_objckpt.engine.tuning, tf_objckpt.engine.restore_memory.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import reads
from tf_objckpt.engine import restore_memory

_PIECE_BYTES = 16 << 10
_LIMIT = 2 * _PIECE_BYTES  # Pieces of half the limit.
_SHAPE = [32, 32]  # 4 KiB of float32.


@pytest.fixture(name="small_pieces")
def _small_pieces(monkeypatch):
  """Yields the piece counts of each restore."""
  counts = []
  split = reads.CheckpointValues._pieces  # pylint: disable=protected-access

  def counting(values, units):
    pieces, piece_bytes = split(values, units)
    counts.append(len(pieces))
    return pieces, piece_bytes

  monkeypatch.setattr(reads.CheckpointValues, "_pieces", counting)
  return counts


@pytest.fixture(name="times_read")
def _times_read(monkeypatch):
  """Yields a Counter of how many times our `RestoreV2`s read each key."""
  counter = collections.Counter()
  restore_v2 = reads.restore_v2

  def counting(file_prefix, names, slices, dtypes_):
    counter.update(
        name.decode() if isinstance(name, bytes) else name for name in names)
    return restore_v2(file_prefix, names, slices, dtypes_)

  monkeypatch.setattr(reads, "restore_v2", counting)
  return counter


def _limited(limit):
  """Our options with `max_restore_memory=limit` (None: automatic)."""
  return tf_objckpt.CheckpointOptions(max_restore_memory=limit)


def _state(scale):
  """40 variables of 4 KiB, Python state and a table's own tensors."""
  module = tf.Module()
  module.weights = [
      tf.Variable(np.full(_SHAPE, scale * i, np.float32)) for i in range(40)
  ]
  module.step = tf.Variable(int(scale), dtype=tf.int64)
  module.counter = tl.Counter(int(scale))
  module.table = tf.lookup.experimental.MutableHashTable(tf.string,
                                                         tf.int64,
                                                         default_value=-1)
  module.table.insert(["a", "b"], [int(scale), 2 * int(scale)])
  return module


def _state_values(module):
  return ([w.numpy() for w in module.weights],
          module.step.numpy(), module.counter.count,
          module.table.lookup(tf.constant(["a", "b"])).numpy().tolist())


def test_pieces_restore_what_tensorflow_restores(tmp_path, small_pieces):
  expected = _state_values(_state(3.))
  path = tl.IMPLS["tf"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  restored = {}
  for impl in tl.IMPLS:
    module = _state(0.)
    options = _limited(_LIMIT) if impl == "ours" else None
    tl.IMPLS[impl].Checkpoint(module=module).read(
        path, options=options).assert_consumed()
    restored[impl] = _state_values(module)
  for impl in tl.IMPLS:
    np.testing.assert_array_equal(restored[impl][0], expected[0])
    assert restored[impl][1:] == expected[1:]
  assert max(small_pieces) > 4  # The restore was split.


def _damage_value(path, value):
  """Overwrites the bytes of `value` in the data file with other bytes."""
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "rb") as f:
    data = f.read()
  start = data.index(value.tobytes())
  with open(data_file, "r+b") as f:
    f.seek(start + 4)
    f.write(b"\x7f" * 8)


@pytest.mark.parametrize("limit", [None, _LIMIT], ids=["one_pass", "pieces"])
@pytest.mark.parametrize("damaged_index", [1, 20, 39])
def test_damage_in_any_piece_restores_nothing(tmp_path, small_pieces,
                                              damaged_index, limit):
  """A value failing its checksum, in the first, a middle or the last piece.

  Both libraries raise `DataLossError`; ours names the damaged key and
  leaves every object as it was, whether it reads once (under the
  automatic limit) or in pieces assigned in turn.
  """
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  _damage_value(path, np.full(_SHAPE, 3. * damaged_index, np.float32))
  errors = {}
  for impl in tl.IMPLS:
    module = _state(1.)
    before = _state_values(module)
    options = _limited(limit) if impl == "ours" else None
    errors[impl] = tl.outcome(tl.IMPLS[impl].Checkpoint(module=module).read,
                              path,
                              options=options).error
    if impl == "ours":
      after = _state_values(module)
      np.testing.assert_array_equal(after[0], before[0])
      assert after[1:] == before[1:]
  tl.assert_same_error_type(errors, tf.errors.DataLossError)
  assert f"module/weights/{damaged_index}/" in str(errors["ours"])
  if limit is None:
    assert small_pieces == [1]
  else:
    assert max(small_pieces) > 4


def _weight_keys(count=40):
  return [
      f"module/weights/{index}/.ATTRIBUTES/VARIABLE_VALUE"
      for index in range(count)
  ]


def test_under_the_limit_each_value_is_read_once(tmp_path, small_pieces,
                                                 times_read):
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  module = _state(0.)
  tf_objckpt.Checkpoint(module=module).read(path).assert_consumed()
  assert small_pieces == [1]
  assert [times_read[key] for key in _weight_keys()] == [1] * 40
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)


def test_over_the_limit_pieces_but_the_last_are_read_twice(
    tmp_path, small_pieces, times_read):
  """Pieces of half the limit: 160 KiB of weights in pieces of 16 KiB."""
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  module = _state(0.)
  tf_objckpt.Checkpoint(module=module).read(
      path, options=_limited(_LIMIT)).assert_consumed()
  pieces, = small_pieces
  assert pieces >= 160 // 16
  counts = [times_read[key] for key in _weight_keys()]
  assert set(counts) == {1, 2}
  assert counts.count(1) <= 4  # The last piece, of at most 16 KiB.
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)


def test_the_automatic_limit_is_half_the_available_memory(
    tmp_path, small_pieces, monkeypatch):
  """The same restore, with 64 KiB available: in pieces of 16 KiB."""
  monkeypatch.setattr(restore_memory, "available_bytes", lambda: 2 * _LIMIT)
  assert restore_memory.restore_memory_limit() == _LIMIT
  assert restore_memory.restore_memory_limit(_limited(5)) == 5
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  module = _state(0.)
  tf_objckpt.Checkpoint(module=module).read(path).assert_consumed()
  assert max(small_pieces) >= 10
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)


def test_available_memory_is_at_most_what_the_system_reports():
  """What `/proc/meminfo` says is available bounds the automatic limit."""
  with open("/proc/meminfo", encoding="ascii") as meminfo:
    available_kib = next(
        int(line.split()[1])
        for line in meminfo
        if line.startswith("MemAvailable:"))
  available = restore_memory.available_bytes()
  # Other processes allocate meanwhile: allow 256 MiB of drift.
  assert 0 <= available <= (available_kib << 10) + (256 << 20)
  assert restore_memory.restore_memory_limit() <= available // 2 + 1


@pytest.mark.parametrize("limit", [-1, 1.5, "1", True])
def test_max_restore_memory_must_be_bytes(limit):
  with pytest.raises(ValueError, match="max_restore_memory"):
    tf_objckpt.CheckpointOptions(max_restore_memory=limit)
  assert tf_objckpt.CheckpointOptions(
      max_restore_memory=np.int64(7)).max_restore_memory == 7


def test_tensorflows_classes_accept_options_with_a_limit(tmp_path):
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  module = _state(0.)
  tf.train.Checkpoint(module=module).read(
      path, options=_limited(_LIMIT)).assert_consumed()
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)


@pytest.fixture(name="keys_per_read")
def _keys_per_read(monkeypatch):
  """Yields the keys of each of our `RestoreV2`s, a list per op."""
  calls = []
  restore_v2 = reads.restore_v2

  def recording(file_prefix, names, slices, dtypes_):
    calls.append([
        name.decode() if isinstance(name, bytes) else name
        for name in names.numpy()
    ] if hasattr(names, "numpy") else list(names))
    return restore_v2(file_prefix, names, slices, dtypes_)

  monkeypatch.setattr(reads, "restore_v2", recording)
  return calls


@pytest.mark.parametrize("limit", [None, _LIMIT], ids=["one_pass", "pieces"])
def test_restore_or_initialize_honours_max_restore_memory(
    tmp_path, times_read, limit):
  """It reads every value before assigning: once, or twice over the limit."""
  manager = tf_objckpt.CheckpointManager(
      tf_objckpt.Checkpoint(module=_state(3.)), str(tmp_path), max_to_keep=1)
  manager.save()
  times_read.clear()
  module = _state(0.)
  restored = tf_objckpt.CheckpointManager(
      tf_objckpt.Checkpoint(module=module), str(tmp_path),
      max_to_keep=1).restore_or_initialize(options=_limited(limit))
  assert restored == manager.latest_checkpoint
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)
  counts = [times_read[key] for key in _weight_keys()]
  if limit is None:
    assert counts == [1] * 40
  else:  # Checked a piece at a time; 32 KiB of it kept.
    assert counts.count(2) >= 30, counts


@pytest.mark.parametrize("limit", [None, _LIMIT], ids=["automatic", "limit"])
def test_restore_on_create_reads_ahead_within_max_restore_memory(
    tmp_path, keys_per_read, limit):
  """Values waiting for variables are read ahead within the limit."""
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  module = tf.Module()
  tf_objckpt.Checkpoint(module=module).read(
      path, options=_limited(limit)).expect_partial()
  module.weights = []
  keys_per_read.clear()
  for _ in range(40):  # Each restored as it is tracked.
    module.weights.append(tf.Variable(np.zeros(_SHAPE, np.float32)))
  np.testing.assert_array_equal(module.weights[39].numpy(), 3. * 39)
  weight_reads = [
      [key for key in keys if key in _weight_keys()] for keys in keys_per_read
  ]
  weight_reads = [keys for keys in weight_reads if keys]
  assert sorted(key for keys in weight_reads for key in keys) == sorted(
      _weight_keys())  # Each value read once.
  largest = max(map(len, weight_reads))
  if limit is None:
    assert largest == 40
  else:  # 32 KiB: its own value and 8 of 4 KiB ahead at most.
    assert largest <= 9, weight_reads
