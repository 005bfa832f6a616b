"""Which checkpoints a manager keeps: pure functions of its checkpoint list.

A `CheckpointManager` manages its active checkpoints, `(prefix, timestamp)`
pairs oldest first, and decides from them alone, as TensorFlow's does:

- A save appends its checkpoint (a rewrite of a prefix moves it to the
  end). While more than `max_to_keep` are active, the oldest leaves the
  active set: it is preserved (kept on disk, no longer managed) if it is at
  least `keep_checkpoint_every_n_hours` younger than the last preserved
  one, which it then becomes; otherwise it is deleted.
- A manager starting anew takes the state file's checkpoints newer than its
  last preserved one as active; the others were preserved.

Nothing here reads a clock or touches a file: the manager passes the time
and deletes what it is told, so the rules are tested without either.
"""

import dataclasses
from typing import Optional, Sequence, Tuple

# A checkpoint: its prefix and when it was saved (seconds since the Epoch).
Checkpoint = Tuple[str, float]


@dataclasses.dataclass(frozen=True)
class Policy:
  """A manager's retention settings.

  Attributes:
    max_to_keep: How many checkpoints stay active; None (or 0) keeps all.
    keep_checkpoint_every_n_hours: Preserve a checkpoint leaving the active
      set this many hours after the last preserved one; None preserves none.
  """
  max_to_keep: Optional[int]
  keep_checkpoint_every_n_hours: Optional[float] = None

  @property
  def preserve_interval(self) -> Optional[float]:
    """Seconds between preserved checkpoints, or None."""
    if not self.keep_checkpoint_every_n_hours:
      return None
    return self.keep_checkpoint_every_n_hours * 3600.


@dataclasses.dataclass(frozen=True)
class Retained:
  """What a manager keeps.

  Attributes:
    active: The active checkpoints, oldest first.
    last_preserved_timestamp: When the last preserved checkpoint was saved.
    deleted: Prefixes of checkpoints to delete, oldest first.
  """
  active: Tuple[Checkpoint, ...]
  last_preserved_timestamp: float
  deleted: Tuple[str, ...] = ()


def after_save(active: Sequence[Checkpoint], saved: Checkpoint,
               last_preserved_timestamp: float, policy: Policy) -> Retained:
  """What a manager keeps once `saved` is written.

  Args:
    active: The active checkpoints before the save, oldest first.
    saved: The new checkpoint, and when it was saved.
    last_preserved_timestamp: When the last preserved checkpoint was saved.
    policy: The retention settings.

  Returns:
    The active checkpoints (`saved` last), the new last preserved time, and
    the checkpoints to delete.
  """
  kept = [checkpoint for checkpoint in active if checkpoint[0] != saved[0]]
  kept.append(saved)
  deleted = []
  interval = policy.preserve_interval
  while policy.max_to_keep and len(kept) > policy.max_to_keep:
    path, timestamp = kept.pop(0)
    if interval and timestamp - interval >= last_preserved_timestamp:
      last_preserved_timestamp = timestamp
    else:
      deleted.append(path)
  return Retained(tuple(kept), last_preserved_timestamp, tuple(deleted))


def after_restart(paths: Sequence[str], timestamps: Sequence[float],
                  last_preserved_timestamp: float, now: float) -> Retained:
  """What a manager starting at `now` keeps of a state file's checkpoints.

  Args:
    paths: The state file's checkpoints, oldest first.
    timestamps: When each was saved; empty in state files of old writers.
    last_preserved_timestamp: The state file's last preserved time.
    now: The time now. A time from the future (a clock set back since) is
      taken as now.

  Returns:
    The active checkpoints, and the last preserved time; nothing to delete.
  """
  last_preserved_timestamp = min(last_preserved_timestamp, now)
  timestamps = list(timestamps) or [last_preserved_timestamp] * len(paths)
  active = tuple((path, min(timestamp, now))
                 for path, timestamp in zip(paths, timestamps)
                 if min(timestamp, now) > last_preserved_timestamp)
  return Retained(active, last_preserved_timestamp)
