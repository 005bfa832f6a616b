"""The saveables a name-based restore gives a Keras 3 optimizer's variables.

A v1 optimizer's values (`restoring.v1_optimizer_state` says which) do not
restore into a Keras 3 optimizer as they are: a slot of Keras 3 `SGD` is v1
`Momentum`'s accumulator times a factor (`ScaledSaveable`), and the step
count is computed from v1 `Adam`'s beta powers (`IterationsSaveable`).
"""

from tensorflow.python.eager import context
from tensorflow.python.framework import ops

from tf_objckpt.engine import saveable_objects


class ScaledSaveable(saveable_objects.SaveableObject):
  """Restores another saveable's value multiplied by a factor."""

  def __init__(self, saveable, source):
    """Restores `saveable` with its value times `source.scale`.

    Args:
      saveable: The saveable of the value's Keras 3 variable.
      source: Where the value comes from (`v1_optimizer_state.Source`):
        its `scale`, and its `note` for the restore report.
    """
    super().__init__(saveable.op, saveable.specs, saveable.name)
    self._saveable = saveable
    self._scale = source.scale
    self._var_shape = getattr(saveable, "_var_shape", None)  # Checked.
    self.notes = {spec.name: source.note for spec in saveable.specs}

  def restore(self, restored_tensors, restored_shapes=None):
    return self._saveable.restore(
        [tensor * self._scale for tensor in restored_tensors], restored_shapes)


class IterationsSaveable(saveable_objects.SaveableObject):
  """Restores a Keras 3 `iterations` variable with a `StepCount`.

  Its specs are the checkpoint values the count came from (restoring reads
  them, so they are checked and reported like any value); the count itself
  was computed from them when the saveable was made.
  """

  def __init__(self, variable, count, dtypes):
    """Restores `count` into `variable` (a `tf.Variable`).

    Args:
      variable: The `tf.Variable` of the Keras 3 `iterations`.
      count: A `v1_optimizer_state.StepCount`: the `value` and the `notes`
        (`{checkpoint key: how it gave the count}`).
      dtypes: `{checkpoint key: DType}` of the keys in `count.notes`.
    """
    specs = [
        saveable_objects.SaveSpec(lambda: None,
                                  "",
                                  key,
                                  dtype=dtypes[key],
                                  device="/cpu:0") for key in count.notes
    ]
    super().__init__(variable, specs, variable.name)
    self.count = count

  @property
  def notes(self):
    return self.count.notes

  def restore(self, restored_tensors, restored_shapes=None):
    del restored_tensors, restored_shapes  # The count was read from them.
    assigned = self.op.assign(
        ops.convert_to_tensor(self.count.value, self.op.dtype))
    return None if context.executing_eagerly() else assigned.op
