"""The implementations under test: TensorFlow (the oracle) and tf_objckpt.

Tests are differential: they do the same thing with TensorFlow and with
tf_objckpt, and compare. `IMPLS` holds each one's classes and modules by
TensorFlow's names; `by_impl` and `agreed` run one scenario with both, and
`assert_agree` compares their results, naming each side when they differ.
"""

import contextlib
import typing

import numpy as np
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint
from tensorflow.python.checkpoint import checkpoint_management as tf_management
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import data_structures as tf_data_structures
from tensorflow.python.training import checkpoint_utils as tf_checkpoint_utils
from tensorflow.python.training import saver as tf_saver

import tf_objckpt
from tf_objckpt import checkpoint_management
from tf_objckpt import checkpoint_utils
from tf_objckpt import data_structures
from tf_objckpt import saver
from tf_objckpt import util


class Impl(typing.NamedTuple):
  """One implementation's classes and modules, by TensorFlow's names.

  `checkpoint` is the module of `list_objects`, `gather_initializers`,
  `streaming_restore`, `frozen_saver`, `add_variable` and
  `capture_dependencies`; `saver` the module of the v1 `Saver` and its
  builders; `checkpoint_utils` the module of `load_checkpoint`,
  `list_variables`, `load_variable`, `checkpoints_iterator` and
  `init_from_checkpoint`.
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
  checkpoint_utils: typing.Any


# The implementations under test, by the names tests give them.
IMPLS = {
    "tf":
        Impl(Checkpoint=tf.train.Checkpoint,
             CheckpointV1=tf.compat.v1.train.Checkpoint,
             CheckpointManager=tf.train.CheckpointManager,
             AutoTrackable=tf_autotrackable.AutoTrackable,
             Saver=tf.compat.v1.train.Saver,
             import_meta_graph=tf.compat.v1.train.import_meta_graph,
             checkpoint=tf_checkpoint,
             checkpoint_management=tf_management,
             data_structures=tf_data_structures,
             saver=tf_saver,
             checkpoint_utils=tf_checkpoint_utils),
    "ours":
        Impl(Checkpoint=tf_objckpt.Checkpoint,
             CheckpointV1=tf_objckpt.CheckpointV1,
             CheckpointManager=tf_objckpt.CheckpointManager,
             AutoTrackable=tf_objckpt.AutoTrackable,
             Saver=saver.Saver,
             import_meta_graph=saver.import_meta_graph,
             checkpoint=util,
             checkpoint_management=checkpoint_management,
             data_structures=data_structures,
             saver=saver,
             checkpoint_utils=checkpoint_utils),
}
# Objects to attach variables to: ours, and one of TensorFlow's.
OWNERS = {"ours": tf_objckpt.AutoTrackable, "tf_module": tf.Module}
# Every (writer, reader) pair of implementations.
PAIRS = [(writer, reader) for writer in IMPLS for reader in IMPLS]


def other(impl):
  """The implementation that is not `impl`."""
  return "ours" if impl == "tf" else "tf"


def by_impl(scenario, *args):
  """`{impl: scenario(impl, *args)}` for TensorFlow and for us."""
  return {impl: scenario(impl, *args) for impl in IMPLS}


def assert_agree(results):
  """Asserts `results["ours"]` equals `results["tf"]`.

  They are compared with `np.testing.assert_equal`, so they may hold
  arrays; the failure message shows TensorFlow's and ours, each named.
  """
  try:
    np.testing.assert_equal(results["ours"], results["tf"])
  except AssertionError as e:
    raise AssertionError(
        f"tf_objckpt's result differs from TensorFlow's (numpy's ACTUAL is "
        f"ours, DESIRED TensorFlow's):\n"
        f"TensorFlow's: {results['tf']!r}\nours:         {results['ours']!r}"
        f"\n{e}") from None


def agreed(scenario, *args):
  """What `scenario(impl, *args)` returns with both, asserted equal.

  Results are compared by `assert_agree`, so they may hold arrays. Returns
  ours.
  """
  results = by_impl(scenario, *args)
  assert_agree(results)
  return results["ours"]


@contextlib.contextmanager
def tensorflow_patched():
  """`tf_objckpt.patch_tensorflow()` for the block, unpatched after it."""
  tf_objckpt.patch_tensorflow()
  try:
    yield
  finally:
    tf_objckpt.unpatch_tensorflow()
