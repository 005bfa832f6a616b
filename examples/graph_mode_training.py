"""Train in a tf.compat.v1 Session, checkpointing every step; resume later.

The TF1 pattern of `CheckpointV1`: restore the latest checkpoint (if any)
before building the training op, let `initialize_or_restore` initialize
what the checkpoint does not hold, train, and save each step with the
session. A first run trains a linear model for a few steps; a second run,
in the same process but a new graph (as after a restart), resumes from the
latest checkpoint, optimizer slots included. Then TensorFlow's own
`tf.compat.v1.train.Checkpoint` restores the final checkpoint and must find
the same values, and the saves must not have grown the graph.

Run: python examples/graph_mode_training.py
"""

import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import autotrackable

import tf_objckpt


def build(directory,
          checkpoint_cls=tf_objckpt.CheckpointV1,
          module_cls=tf_objckpt.AutoTrackable):
  """A graph with a linear model, Adam, a checkpoint and its restore status."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(0)  # The same first run every time.
    model = module_cls()
    model.w = tf.compat.v1.get_variable("w", [3, 1])
    model.b = tf.compat.v1.get_variable("b", [1])
    step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
    checkpoint = checkpoint_cls(model=model, optimizer=optimizer, step=step)
    status = checkpoint.restore(tf_objckpt.latest_checkpoint(directory))
    x = tf.constant(np.random.RandomState(0).rand(32, 3), tf.float32)
    y = tf.reduce_sum(x, axis=1, keepdims=True)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, model.w) + model.b - y))
    train_op = optimizer.minimize(loss, global_step=step)
  return graph, checkpoint, status, train_op, loss


def train(directory, steps):
  """Resumes from `directory` (if it has a checkpoint), trains, saves."""
  graph, checkpoint, status, train_op, loss = build(directory)
  with graph.as_default(), tf.compat.v1.Session() as session:
    status.initialize_or_restore(session)
    ops_before = None
    for _ in range(steps):
      session.run(train_op)
      path = checkpoint.save(directory + "/ckpt", session=session)
      ops_after = len(graph.get_operations())
      assert ops_before in (None, ops_after), "saving grew the graph"
      ops_before = ops_after
    step, final_loss = session.run([tf.compat.v1.train.get_global_step(), loss])
    variables = session.run(tf.compat.v1.global_variables())
  return path, step, final_loss, variables


def main():
  with tempfile.TemporaryDirectory() as directory:
    _, step, first_loss, _ = train(directory, steps=5)
    print(f"First run: step {step}, loss {first_loss:.4f}")
    path, step, loss, variables = train(directory, steps=5)
    print(f"Resumed run: step {step}, loss {loss:.4f}, saved {path}")
    assert step == 10, step
    assert loss < first_loss, (loss, first_loss)

    # TensorFlow's CheckpointV1 restores the same values from our file.
    graph, checkpoint, _, _, _ = build(directory, tf.compat.v1.train.Checkpoint,
                                       autotrackable.AutoTrackable)
    with graph.as_default(), tf.compat.v1.Session() as session:
      checkpoint.restore(path).assert_consumed().run_restore_ops(session)
      restored = session.run(tf.compat.v1.global_variables())
    for want, got in zip(variables, restored):
      np.testing.assert_allclose(got, want)
    print(f"TensorFlow restored all {len(restored)} variables; values match.")


if __name__ == "__main__":
  main()
