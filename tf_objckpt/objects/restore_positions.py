"""What a trackable asks of the checkpoint position it is handed.

A restore hands each trackable a position: a node of the checkpoint being
restored. TensorFlow's positions and ours offer TensorFlow's methods
(`restore`, `is_simple_variable`, `restore_uid`, ...); ours also offer what
`RestorePosition` declares, which our trackables and variable creation
ask for. So the objects layer restores through the position it is given and
imports nothing of the restore walk, which is the layer above
(`restoring.checkpoint_position` implements this protocol).
"""

import abc


class RestorePosition(abc.ABC):
  """A node of a checkpoint being restored, as trackables see ours."""

  __slots__ = ()

  @abc.abstractmethod
  def is_simple_variable(self):
    """Whether the value fits in a variable initializer (one tensor)."""

  @property
  @abc.abstractmethod
  def restore_uid(self):
    """The restore this position belongs to; later restores win."""

  @abc.abstractmethod
  def initial_value_callable(self):
    """A variable initializer that reads this node's value."""

  @abc.abstractmethod
  def check_initial_value(self, shape=None, dtype=None):
    """Raises unless the value can initialize a variable of shape and dtype.

    Raises:
      ValueError: Naming the checkpoint key and object path, if the
        checkpointed shape or dtype differs (None: not checked).
    """

  @abc.abstractmethod
  def restore_descendants(self):
    """Restores the bound object and what it reaches (the restore walk).

    Returns:
      Restore ops when graph building, else an empty list.
    """
