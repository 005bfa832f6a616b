"""Large eager restores read and assign a piece of the values at a time.

A restore of more than twice `tuning.TUNING.restore_piece_bytes` holds
one piece of values at a time rather than a copy of the whole model, and
reuses the memory each piece frees. Every piece but the last is read once
beforehand, so a damaged value still fails the restore before anything is
assigned. These tests shrink the piece size to split small models, compare
with `tf.train.Checkpoint` and damage values in each piece; the peak memory
of real restores is measured by `tests/reliability/restore_memory_test.py`.

Covers: tf_objckpt.engine.reads, tf_objckpt.engine.read_plan,
tf_objckpt.engine.tuning.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
from tf_objckpt.engine import reads
from tf_objckpt.engine import tuning

_PIECE_BYTES = 16 << 10
_SHAPE = [32, 32]  # 4 KiB of float32.


@pytest.fixture(name="small_pieces")
def _small_pieces(monkeypatch):
  """Shrinks pieces to 16 KiB; yields the piece counts of each restore."""
  monkeypatch.setattr(tuning.TUNING, "restore_piece_bytes", _PIECE_BYTES)
  counts = []
  split = reads.CheckpointValues._pieces  # pylint: disable=protected-access

  def counting(values, units):
    pieces, piece_bytes = split(values, units)
    counts.append(len(pieces))
    return pieces, piece_bytes

  monkeypatch.setattr(reads.CheckpointValues, "_pieces", counting)
  return counts


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
    tl.IMPLS[impl].Checkpoint(module=module).read(path).assert_consumed()
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


@pytest.mark.parametrize("damaged_index", [1, 20, 39])
def test_damage_in_any_piece_restores_nothing(tmp_path, small_pieces,
                                              damaged_index):
  """A value failing its checksum, in the first, a middle or the last piece.

  Both libraries raise `DataLossError`; ours names the damaged key and
  leaves every object as it was, although pieces are assigned in turn.
  """
  path = tl.IMPLS["ours"].Checkpoint(module=_state(3.)).write(
      str(tmp_path / "ckpt"))
  _damage_value(path, np.full(_SHAPE, 3. * damaged_index, np.float32))
  errors = {}
  for impl in tl.IMPLS:
    module = _state(1.)
    before = _state_values(module)
    errors[impl] = tl.outcome(tl.IMPLS[impl].Checkpoint(module=module).read,
                              path).error
    if impl == "ours":
      after = _state_values(module)
      np.testing.assert_array_equal(after[0], before[0])
      assert after[1:] == before[1:]
  tl.assert_same_error_type(errors, tf.errors.DataLossError)
  assert f"module/weights/{damaged_index}/" in str(errors["ours"])
  assert max(small_pieces) > 4
