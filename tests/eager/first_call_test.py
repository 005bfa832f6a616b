"""The first save and restore of a process, whose ops have many tensors.

TensorFlow runs every eager op as a one-op function, built on the op's first
call with one graph node per tensor; for a `SaveV2`, `RestoreV2` or
`_ReadVariablesOp` of thousands of tensors that costs seconds. Ours run such
ops on plain kernels (`variable_batches.direct_kernels`) and then give
TensorFlow its setting back. Each test runs in a fresh process, as a job's
first save does, or checks the setting from the function library the
wrapping leaves behind: a wrapped op adds a function named `__wrapped__<op>`.

Covers: tf_objckpt.engine.variable_batches.
"""

import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

import testlib as tl
from tf_objckpt.engine import variable_batches

_FRESH_PROCESS_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
import testlib as tl

impl, prefix, mode = sys.argv[1:]
count = 1000
module = tf.Module()
module.variables_list = [
    tf.Variable(tl.mixed_value(i, 1 if mode == "write" else 5))
    for i in range(count)]
checkpoint = tl.IMPLS[impl].Checkpoint(module=module)
if mode == "write":
  checkpoint.write(prefix)
else:
  checkpoint.read(prefix).assert_consumed()
  expected = [tf.Variable(tl.mixed_value(i, 1)) for i in range(count)]
  tl.assert_variables_equal(tl.variable_values(expected),
                            tl.variable_values(module.variables_list))
tf.constant([1., 2.]) - tf.constant(1.)
print("WRAPPED", sorted({name.split("_device_")[0] for name in
                         context.context().list_function_names()}))
"""


def _wrapped_ops(impl, prefix, mode):
  """The ops a fresh process wrapped while `impl` wrote or read `prefix`."""
  result = tl.run_python(_FRESH_PROCESS_SCRIPT, impl, prefix, mode)
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [
      line for line in result.stdout.splitlines() if line.startswith("WRAPPED ")
  ]
  return set(eval(line[len("WRAPPED "):]))  # pylint: disable=eval-used


def test_first_write_and_read_skip_the_wrapping_and_restore_it(tmp_path):
  wrapped = {
      (impl, mode): _wrapped_ops(impl, tmp_path / impl, mode)
      for impl in tl.IMPLS for mode in ("write", "read")
  }
  tl.assert_same_checkpoint(tmp_path / "tf", tmp_path / "ours")
  # Names go on with the op's attributes: "__wrapped__SaveV2_dtypes_1000".
  big_ops = ("__wrapped__SaveV2_", "__wrapped__RestoreV2_",
             "__wrapped____ReadVariablesOp_")
  assert [name for name in wrapped["tf", "write"] if name.startswith(big_ops)
         ] == ["__wrapped__SaveV2_dtypes_1001"]
  for mode in ("write", "read"):
    assert [name for name in wrapped["ours", mode] if name.startswith(big_ops)
           ] == []
    # The op run after ours is wrapped again: the setting is TensorFlow's.
    assert "__wrapped__Sub" in wrapped["ours", mode]


def _wrapped_after(op_fn):
  """The ops `op_fn` wrapped in functions (eager op types new to it)."""
  before = set(context.context().list_function_names())
  op_fn()
  return {
      name.split("_device_")[0]
      for name in set(context.context().list_function_names()) - before
  }


def _ints():
  return tf.constant(np.arange(6, dtype=np.int16))


def test_direct_kernels_in_threads_restores_the_setting_when_all_leave():
  inside, leave = threading.Barrier(2), threading.Event()

  def hold():
    with variable_batches.direct_kernels(1000):
      inside.wait()
      leave.wait()

  holder = threading.Thread(target=hold)
  holder.start()
  with variable_batches.direct_kernels(1000):
    inside.wait()
  # The other thread is still inside: a new op is not wrapped.
  while_inside = _wrapped_after(lambda: tf.math.floormod(_ints(), 4))
  leave.set()
  holder.join()
  after = _wrapped_after(lambda: tf.math.floordiv(_ints(), 4))
  assert "__wrapped__FloorMod" not in while_inside
  assert "__wrapped__FloorDiv" in after


_SMALL_OPS_AND_GRAPHS_SCRIPT = """
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tf_objckpt.engine import variable_batches

def wrapped_after(op_fn):
  before = set(context.context().list_function_names())
  op_fn()
  return {name.split("_device_")[0] for name in
          set(context.context().list_function_names()) - before}

ints = tf.constant(np.arange(6, dtype=np.int16))
with variable_batches.direct_kernels(2):
  small = wrapped_after(lambda: tf.math.maximum(ints, 4))
with tf.Graph().as_default():
  with variable_batches.direct_kernels(1000):
    pass
after_graph = wrapped_after(lambda: tf.math.minimum(ints, 4))
print("SMALL", "__wrapped__Maximum" in small)
print("AFTER_GRAPH", "__wrapped__Minimum" in after_graph)
"""


def test_direct_kernels_leave_small_ops_and_graphs_alone():
  # A fresh process: in a long test run, an earlier test may have wrapped
  # these ops already, and a wrapped op is not wrapped again.
  result = tl.run_python(_SMALL_OPS_AND_GRAPHS_SCRIPT)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "SMALL True" in result.stdout
  assert "AFTER_GRAPH True" in result.stdout
