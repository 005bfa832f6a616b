"""What a checkpoint object offers the `CheckpointManager` that manages it.

A manager plans each save (the prefix and its number, the state file) and
records it; the checkpoint object writes it. Our `Checkpoint` and
`CheckpointV1` implement `ManagedCheckpoint`, so a manager runs their saves
as one save transaction and restores the newest intact checkpoint through
them. Other checkpoint objects (TensorFlow's) are written through their own
`write`, and restored as TensorFlow's manager restores them.
"""

import abc
from typing import Any, Callable, Iterable, List, Optional, Tuple


class ManagedCheckpoint(abc.ABC):
  """A checkpoint object whose saves and restores a manager runs."""

  __slots__ = ()

  @abc.abstractmethod
  def save_planned(self,
                   plan: Any,
                   options: Any,
                   record: Optional[Callable] = None) -> Any:
    """Runs steps 2 to 4 of a save planned by a manager.

    Args:
      plan: The manager's `save_transaction.SavePlan`.
      options: Optional `tf.train.CheckpointOptions`.
      record: Step 4, `record(path, save)`: the manager records the
        checkpoint in its state file and sweeps old ones.

    Returns:
      The path written.
    """

  @abc.abstractmethod
  def restore_newest_intact(self,
                            candidates: Iterable[str],
                            options: Any = None) -> Tuple[str, List[str]]:
    """Restores the first intact checkpoint of `candidates` (newest first).

    Each candidate is restored all or nothing: a damaged one assigns
    nothing and is skipped (see `self_healing`). `options`: the restore's
    `CheckpointOptions`, if any.

    Returns:
      The restored path, and the damaged paths skipped.

    Raises:
      The newest candidate's error, if every candidate is damaged.
    """
