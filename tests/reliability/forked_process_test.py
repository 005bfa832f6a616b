"""A child made by `os.fork` saves and restores with its own threads.

Parallel reads and writes and asynchronous saves run on thread pools kept
for the process (`engine.thread_pools`). A forked child has none
of its parent's threads, so a pool the parent made would queue the child's
work forever. Each test uses every pool in a real process, forks, and
makes the child use them again under a deadline.

Covers: tf_objckpt.engine.thread_pools, tf_objckpt.engine.async_checkpoint.
"""

import testlib as tl

_SCRIPT = """
import os
import signal
import sys

import numpy as np
import tensorflow as tf

import tf_objckpt
from tf_objckpt.engine import tuning

directory = sys.argv[1]
tuning.TUNING.parallel_read_min_bytes = 0  # Reads use the read pool.
tuning.TUNING.read_threads = 2


def use_every_pool(value):
  module = tf.Module()
  module.weights = [tf.Variable(np.full([64], value, np.float32))
                    for _ in range(8)]
  checkpoint = tf_objckpt.Checkpoint(module=module)
  manager = tf_objckpt.CheckpointManager(checkpoint, directory,
                                         max_to_keep=2)
  options = tf.train.CheckpointOptions(
      experimental_enable_async_checkpoint=True)
  manager.save(options=options)  # The asynchronous writes' pool.
  checkpoint.sync()
  for weight in module.weights:
    weight.assign(tf.zeros([64]))
  assert manager.restore_or_initialize()  # The read pool.
  assert all(float(weight[0]) == value for weight in module.weights)


use_every_pool(1.)
child = os.fork()
if child == 0:
  signal.alarm(60)  # A hung pool ends the child with SIGALRM.
  use_every_pool(2.)
  os._exit(0)
_, status = os.waitpid(child, 0)
print("child status", status)
sys.exit(0 if status == 0 else 1)
"""


def test_forked_child_saves_and_restores(tmp_path):
  completed = tl.run_python(_SCRIPT, tmp_path)
  assert completed.returncode == 0, (completed.stdout[-1000:],
                                     completed.stderr[-3000:])
  assert "child status 0" in completed.stdout
