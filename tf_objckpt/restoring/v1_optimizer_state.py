"""A v1 optimizer's values in a name-based checkpoint, for Keras 3 optimizers.

A `tf.compat.v1.train` optimizer keeps a slot per trained variable, saved
under the variable's name and the optimizer's (`dense/kernel/Adam` and
`dense/kernel/Adam_1` for Adam's first and second moments), and
`AdamOptimizer` keeps its step count only as `beta1_power` (`beta_1 ** (t +
1)` after t steps) and `beta2_power`. A Keras 3 optimizer names its slots
after the variable's path (`adam/sequential_dense_kernel_momentum`) and
counts steps in `iterations`. TensorFlow restores none of these into Keras 3;
`name_based` restores them with this module (a departure in API.md):

- a slot takes the value of the v1 slot of the same meaning, keyed by the
  checkpoint key its variable matched (so `assignment_map` applies to
  slots too); `v1_slot_suffixes` says which, per Keras 3 optimizer. Keras
  3 `SGD`'s momentum is v1 `Momentum`'s accumulator times -learning_rate,
  converted when the learning rate is a constant;
- `iterations` takes the step count from `beta1_power` (checked against
  `beta2_power`), else from a `global_step` value, unless its own name
  matched a key (`assignment_map={"global_step": "adam/iteration"}`);
- the learning rate, which v1 optimizers do not save, keeps its value
  unless a key matches its name.

Keras 3 versions name optimizer variables differently (Keras 3.3 names
Adagrad's accumulators just `accumulator`, and keeps `iterations` as a
plain attribute rather than `_iterations`), so they are recognized by the
optimizer's structure: `iterations` is the optimizer's own variable, and a
slot is element i of a list the optimizer keeps parallel to its
`_trainable_variables`, the slot of variable i. Only the slot's kind is
read from its name, which ends with the name the optimizer gave it
(`momentum`). A slot made while an optimizer is built after `restore()` is
in no list yet: it is matched as it is made, by its name when that holds
its variable's path, else by how many slots of its kind the build made
before it. `leftover_keys` names the v1 optimizer values that found no home.
"""

import math
import re
import sys
from typing import NamedTuple, Optional

import numpy as np

from tf_objckpt.foundation import identity_containers as object_identity

_KERAS3_OPTIMIZER_MODULE = "keras.src.optimizers.base_optimizer"
BETA_POWERS = ("beta1_power", "beta2_power")
GLOBAL_STEP = "global_step"
# A Keras 3 optimizer's lists of the variables it trains and of those it
# owns (its slots among them), and where it keeps its step count (Keras
# 3.3 sets `iterations`; later versions `_iterations`, read by a property).
_TRAINED = "_trainable_variables"
_OWNED = "_variables"
_ITERATIONS_ATTRIBUTES = ("_iterations", "iterations")

# Keras 3 optimizer class -> (v1 optimizer name, Keras 3 slot names in the
# order the v1 optimizer creates its slots). The v1 slots are named
# `<variable>/<name>`, `<variable>/<name>_1`, ... in creation order.
_V1_SLOTS = {
    "Adam": ("Adam", ("momentum", "velocity")),
    "SGD": ("Momentum", ("momentum",)),  # Scaled, see `_slot_scale`.
    "Adagrad": ("Adagrad", ("accumulator",)),
    "Ftrl": ("Ftrl", ("accumulator", "linear")),
    "Adadelta": ("Adadelta", ("accumulated_grad", "accumulated_delta_var")),
}
# v1 optimizers' default names: a key `<variable>/<name>[_<n>]` is a slot.
_V1_OPTIMIZER_NAMES = ("Adam", "Momentum", "Adagrad", "RMSProp", "Ftrl",
                       "Adadelta", "ProximalAdagrad", "AdagradDA",
                       "ProximalGradientDescent")
# float32 rounds each product `power * beta` within this relative error.
_FLOAT32_ROUNDING = 2.0**-24


def is_keras3_optimizer(obj):
  """Whether `obj` is a Keras 3 optimizer (without importing Keras)."""
  module = sys.modules.get(_KERAS3_OPTIMIZER_MODULE)
  base = getattr(module, "BaseOptimizer", None)
  return base is not None and isinstance(obj, base)


def v1_slot_suffixes(optimizer):
  """`{Keras 3 slot name: v1 slot suffix}` for `optimizer`; {} if none map.

  RMSprop's slots depend on `centered` (v1 creates `mg` before `momentum`).
  """
  for cls in type(optimizer).__mro__:
    if cls.__name__ == "RMSprop":
      slots = ("velocity",) + (("average_gradient",) if optimizer.centered else
                               ()) + ("momentum",)
      return _numbered("RMSProp", slots)
    if cls.__name__ in _V1_SLOTS:
      return _numbered(*_V1_SLOTS[cls.__name__])
  return {}


def _numbered(v1_name, slots):
  return {
      slot: v1_name if index == 0 else f"{v1_name}_{index}"
      for index, slot in enumerate(slots)
  }


class Source(NamedTuple):
  """Where a Keras 3 variable's value is in a name-based checkpoint.

  Attributes:
    key: The checkpoint key.
    scale: None to restore the value as is, else a factor to apply.
    note: How the value was converted, for reports.
  """
  key: str
  scale: Optional[float] = None
  note: Optional[str] = None


def _slot_scale(optimizer):
  """The factor from a v1 slot to `optimizer`'s, or None if they are equal.

  v1 `Momentum` accumulates gradients (`a = momentum * a + g; w -= lr * a`)
  where Keras 3 `SGD` accumulates steps (`m = momentum * m - lr * g;
  w += m`): with a constant learning rate, `m == -lr * a`.

  Raises:
    ValueError: If the learning rate changes by step (a schedule).
  """
  if v1_slot_suffixes(optimizer).get("momentum") != "Momentum":
    return None
  learning_rate = optimizer._learning_rate  # pylint: disable=protected-access
  if callable(learning_rate):
    raise ValueError(
        "Keras 3 SGD's momentum is v1 Momentum's accumulator times "
        "-learning_rate, which a learning-rate schedule does not fix")
  return -float(learning_rate.numpy())


class StepCount(NamedTuple):
  """A Keras 3 `iterations` value found in a v1 checkpoint.

  Attributes:
    value: The number of steps taken.
    notes: `{checkpoint key: how it gave (or checked) the count}`, the
      keys read, in order.
  """
  value: int
  notes: dict


def adam_step_count(powers, betas):
  """The steps a v1 `AdamOptimizer` took, from its beta powers.

  v1 Adam starts each power at its beta and multiplies it by the beta after
  every step: after t steps `beta1_power == beta_1 ** (t + 1)`, in float32.
  The count comes from the most precise power (usually `beta1_power`) and
  must agree with the other, within float32 rounding; a power that has
  underflowed (after ~800 steps for 0.9) is not used.

  Args:
    powers: `{"beta1_power": value, "beta2_power": value}` (either may lack).
    betas: `{"beta1_power": beta_1, "beta2_power": beta_2}`, the Keras 3
      optimizer's.

  Returns:
    A `StepCount`.

  Raises:
    ValueError: Saying why no count can be trusted.
  """
  estimates = []
  for key in BETA_POWERS:
    if key not in powers:
      continue
    power, beta = float(powers[key]), float(np.float32(betas[key]))
    if not 0 < beta < 1:
      raise ValueError(f"{key} cannot count steps with beta {beta}")
    if not np.finfo(np.float32).tiny <= power < 1:
      continue  # Underflowed (or not a power of a beta in (0, 1)).
    exponent = math.log(power) / math.log(beta)
    spread = 2 * (exponent + 1) * _FLOAT32_ROUNDING / -math.log(beta)
    estimates.append((spread, key, exponent))
  if not estimates:
    raise ValueError(f"{' and '.join(BETA_POWERS)} have underflowed")
  estimates.sort()
  spread, source, exponent = estimates[0]
  exponent_count = round(exponent)
  if spread >= 0.5 or abs(exponent - exponent_count) > spread + 1e-6:
    raise ValueError(
        f"{source} = {powers[source]} is no integer power of "
        f"beta {betas[source]} (exponent {exponent:.4f}); were the betas "
        "the same?")
  steps = exponent_count - 1
  beta_name = {"beta1_power": "beta_1", "beta2_power": "beta_2"}[source]
  notes = {
      source: f"iterations = {steps}: {source} = "
              f"{beta_name} ** ({steps} + 1)"
  }
  for spread, key, exponent in estimates[1:]:
    if abs(exponent - exponent_count) > spread + 1e-6:
      raise ValueError(
          f"{key} (exponent {exponent:.4f}) disagrees with {source} "
          f"(exponent {exponent_count}); were the betas the same?")
    notes[key] = f"agrees with iterations = {steps}"
  return StepCount(steps, notes)


def _slot_kind(variable, kinds):
  """The kind in `kinds` that `variable` is named after, or None.

  Keras 3 names a slot by its kind (`accumulator`), after its variable's
  path in most versions (`sequential_dense_kernel_accumulator`).
  """
  name = variable.name
  named = [kind for kind in kinds if name == kind or name.endswith("_" + kind)]
  return max(named, key=len) if named else None


class _OptimizerStructure:
  """Which variable each slot of a Keras 3 optimizer belongs to.

  Read from the optimizer's lists: element i of a list as long as
  `_trainable_variables` that holds variables the optimizer owns is the
  slot of trained variable i.
  """

  def __init__(self, optimizer, signature):
    self.signature = signature
    self._name = optimizer.name
    self._trained = list(getattr(optimizer, _TRAINED, ()))
    self._owned = list(getattr(optimizer, _OWNED, ()))
    self._positions = {
        id(owned): position for position, owned in enumerate(self._owned)
    }
    self._by_path = {
        variable.path.replace("/", "_"): variable for variable in self._trained
    }
    self._slot_index = {}
    for name, value in vars(optimizer).items():
      if (name in (_TRAINED, _OWNED) or not isinstance(value, list) or
          len(value) != len(self._trained)):
        continue
      for index, element in enumerate(value):
        if id(element) in self._positions:
          self._slot_index.setdefault(id(element), index)

  @staticmethod
  def signature(optimizer):
    """What changes when the optimizer's lists do."""
    return tuple((name, id(value), len(value))
                 for name, value in vars(optimizer).items()
                 if isinstance(value, list))

  def slot_of(self, variable, kinds):
    """`(trained variable, kind)` if `variable` is a slot of a kind in `kinds`.

    None if it is not one of the optimizer's slots of those kinds.
    """
    kind = _slot_kind(variable, kinds)
    if kind is None:
      return None
    index = self._slot_index.get(id(variable))
    if index is not None:
      return self._trained[index], kind
    if self._name in variable.path.split("/")[:-1]:
      return self._slot_being_built(variable, kind)
    return None

  def _slot_being_built(self, variable, kind):
    """The variable of a slot made under the optimizer's name, in no list.

    A build makes the slots of a kind in the order of
    `_trainable_variables`, and tracks each as it is made, before it adds it
    to `_variables` or to a slot list. The slot is named after its
    variable's path, or follows as many of its kind as the variables before
    its own.
    """
    reference = self._by_path.get(variable.name[:-len(kind) - 1])
    if reference is not None:
      return reference, kind
    position = self._positions.get(id(variable), len(self._owned))
    index = sum(
        _slot_kind(owned, (kind,)) is not None
        for owned in self._owned[:position])
    if index < len(self._trained):
      return self._trained[index], kind
    return None


class Keras3Optimizers:
  """The Keras 3 optimizers a name-based restore has seen, and their state.

  Example (inside `name_based`):

    optimizers = Keras3Optimizers(keys, match, values)
    optimizers.note(optimizer)
    optimizers.slot_source(slot_variable)  # Source("dense/kernel/Adam")
    optimizers.step_count(iterations)      # StepCount(3, {...}) or None
  """

  def __init__(self, checkpoint_keys, match, values):
    """Finds values among `checkpoint_keys`.

    Args:
      checkpoint_keys: The checkpoint's keys.
      match: Gives a Keras 3 path's checkpoint key, or None.
      values: Gives the `CheckpointValues` (for scalars and dtypes).
    """
    self._keys = frozenset(checkpoint_keys)
    self._match = match
    self._values = values
    self._optimizers = object_identity.ObjectIdentityWeakSet()
    # Optimizer -> its `_OptimizerStructure`.
    self._structures = object_identity.ObjectIdentityWeakKeyDictionary()
    # Checkpoint key -> why it found no home, for reports.
    self.unplaced = {}

  def seen(self):
    """Whether a Keras 3 optimizer was seen."""
    return bool(self._optimizers)

  def note(self, trackable):
    """Remembers `trackable` if it is a Keras 3 optimizer."""
    if is_keras3_optimizer(trackable):
      self._optimizers.add(trackable)

  def slot_source(self, variable):
    """The v1 slot's `Source` for a Keras 3 optimizer slot, or None.

    A slot is one of the variables a seen optimizer owns, of a kind
    `v1_slot_suffixes` knows, for one of the variables it trains (see the
    module docstring). A slot that needs converting but cannot be is None,
    with the reason in `unplaced`.
    """
    for optimizer in self._optimizers:
      suffixes = v1_slot_suffixes(optimizer)
      found = self._structure(optimizer).slot_of(variable, suffixes)
      if found is None:
        continue
      reference, kind = found
      key = self._match(reference.path)
      if not key:
        return None
      return self._converted(optimizer, f"{key}/{suffixes[kind]}")
    return None

  def _converted(self, optimizer, key):
    try:
      scale = _slot_scale(optimizer)
    except ValueError as e:
      self.unplaced[key] = str(e)
      return None
    if scale is None:
      return Source(key)
    return Source(key, scale, f"times -learning_rate = {scale:g}")

  def _structure(self, optimizer):
    """`optimizer`'s `_OptimizerStructure`, made again when its lists change."""
    signature = _OptimizerStructure.signature(optimizer)
    cached = self._structures.get(optimizer)
    if cached is None or cached.signature != signature:
      cached = _OptimizerStructure(optimizer, signature)
      self._structures[optimizer] = cached
    return cached

  def _optimizer_counting(self, variable):
    for optimizer in self._optimizers:
      if any(
          vars(optimizer).get(name) is variable
          for name in _ITERATIONS_ATTRIBUTES):
        return optimizer
    return None

  def step_count(self, variable):
    """The `StepCount` for `variable` if it is an optimizer's `iterations`.

    None if it is not, or if the checkpoint gives no count (then the keys
    that could have given it are in `unplaced`, with the reason).
    """
    optimizer = self._optimizer_counting(variable)
    if optimizer is None:
      return None
    values = self._values()
    powers = {
        key: values.python_value(key) for key in BETA_POWERS if key in self._keys
    }
    steps = None
    if GLOBAL_STEP in self._keys and values.dtypes[GLOBAL_STEP].is_integer:
      steps = int(values.python_value(GLOBAL_STEP))
    if powers and "Adam" in v1_slot_suffixes(optimizer).values():
      try:
        count = adam_step_count(powers, {
            "beta1_power": optimizer.beta_1,
            "beta2_power": optimizer.beta_2
        })
      except (ValueError, TypeError) as e:
        reason = f"gives no step count: {e}"
        self.unplaced.update((key, reason) for key in powers)
      else:
        if steps is not None:
          self.unplaced[GLOBAL_STEP] = (
              f"{steps}; iterations = {count.value} came from "
              f"{next(iter(count.notes))}, Adam's own count")
        return count
    if steps is not None:
      return StepCount(steps, {GLOBAL_STEP: f"iterations = {steps}"})
    return None

  def is_learning_rate(self, variable):
    """Whether `variable` is a seen optimizer's learning rate.

    v1 optimizers save none: when no key matches it by name, it keeps the
    value it was made with, and restores need not give it one.
    """
    return any(
        getattr(optimizer, "_learning_rate", None) is variable
        for optimizer in self._optimizers)

  def missing_reason(self, variable):
    """Why a Keras 3 optimizer's `iterations` found no value, or None."""
    if self._optimizer_counting(variable) is not None:
      reasons = sorted(
          {self.unplaced[key] for key in BETA_POWERS if key in self.unplaced})
      return "; ".join(reasons) or (
          f"no {', '.join(BETA_POWERS)} or {GLOBAL_STEP} gives the step count")
    return None

  def leftover_keys(self, restored_keys):
    """v1 optimizer values of the seen optimizers' variables not restored.

    The slots (`<variable key>/<v1 optimizer name>[_<n>]`) of the variables
    the optimizers train, and Adam's beta powers.
    """
    variable_keys = set()
    for optimizer in self._optimizers:
      for variable in getattr(optimizer, "_trainable_variables", ()):
        key = self._match(variable.path)
        if key:
          variable_keys.add(key)
    if not variable_keys:
      return []
    names = "|".join(_V1_OPTIMIZER_NAMES)
    slot = re.compile(rf"(.+)/(?:{names})(?:_\d+)?")
    leftover = []
    for key in sorted(self._keys - set(restored_keys)):
      found = slot.fullmatch(key)
      if key in BETA_POWERS or (found and found.group(1) in variable_keys):
        leftover.append(key)
    return leftover
