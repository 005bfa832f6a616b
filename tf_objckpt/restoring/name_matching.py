"""Matching a program's variables to the keys of a name-based checkpoint.

A v1 `Saver` checkpoint keys each value by a global variable name
(`dense/kernel`). Keras 3 names a variable by its `path`, which starts with
the model's name (`sequential/dense/kernel`). A `NameMatcher` finds, for a
variable's name, the checkpoint key holding its value, trying in order:

1. `"exact"`: the name itself;
2. `"without_model_name"`: the name without its first scope, the Keras 3
   model's name (`sequential/dense/kernel` -> `dense/kernel`);
3. `"assignment_map"`: a mapping the user gives, following the
   `assignment_map` convention of `tf.compat.v1.train.init_from_checkpoint`:
   keys are checkpoint names, values the program's names (a string or a
   variable); `{"old_scope/": "new_scope/"}` maps a whole scope, `"/"` is the
   root scope on either side.

A variable below an object an `object_map` maps to a checkpoint scope
(`{"backbone": "bert/encoder/"}`) is matched by `match_in_scope` instead
(rule `"object_map"`): the scope followed by its name, or by its name
without its first scope (the Keras 3 model's, or the program's scope of the
new model: `new_encoder/dense/kernel` -> `bert/encoder/dense/kernel`).

`match_names` matches many names at once and reports what matched, which
names found no key and which keys no name used. Only names are compared
here: shapes and dtypes are checked by the restore's read plan before a restore
assigns anything. `name_based` (restoring name-based checkpoints through
`Checkpoint.restore`) and the `convert` command use this module.
"""

import collections
from typing import Iterable, Mapping, Optional, Tuple, Union

EXACT = "exact"
WITHOUT_MODEL_NAME = "without_model_name"
ASSIGNMENT_MAP = "assignment_map"
OBJECT_MAP = "object_map"

# The rules, in the order they are tried.
RULES = (EXACT, WITHOUT_MODEL_NAME, ASSIGNMENT_MAP)

# The checkpoint key found for a name, and the rule (one of `RULES`) that
# found it.
Match = collections.namedtuple("Match", ["checkpoint_key", "rule"])


class MatchReport(
    collections.namedtuple("MatchReport",
                           ["matched", "unmatched_names", "unused_keys"])):
  """What `match_names` found.

  Attributes:
    matched: `{name: Match}` for every name that found a key.
    unmatched_names: The names that found no key, in the order given.
    unused_keys: Checkpoint keys no name matched, sorted.
  """


def variable_name(variable) -> str:
  """The name a variable is matched by.

  A Keras 3 variable's `path`; otherwise the graph name without its output
  index (`dense/kernel:0` -> `dense/kernel`).
  """
  path = getattr(variable, "path", None)
  if isinstance(path, str):
    return path
  name = variable.name
  return name[:-2] if name.endswith(":0") else name


def without_model_name(name: str) -> Optional[str]:
  """`name` without its first scope, or None if it has no scope."""
  _, separator, rest = name.partition("/")
  return rest if separator and rest else None


def _is_scope(name: str) -> bool:
  return name.endswith("/")


def _normalized_assignment_map(assignment_map) -> Tuple[Tuple[str, str], ...]:
  """`assignment_map` as sorted (checkpoint name, program name) pairs.

  Raises:
    ValueError: If a checkpoint scope maps to a single name or the other
      way round (as `init_from_checkpoint` refuses it).
  """
  if assignment_map is None:
    return ()
  items = (assignment_map.items()
           if isinstance(assignment_map, Mapping) else assignment_map)
  pairs = []
  for checkpoint_name, target in items:
    program_name = target if isinstance(target, str) else variable_name(target)
    if _is_scope(checkpoint_name) != _is_scope(program_name):
      raise ValueError(
          f"Assignment map entry {checkpoint_name!r}: {program_name!r} mixes "
          "a scope and a single name. Map 'scope/' to 'other_scope/', or a "
          "name to a name.")
    pairs.append((checkpoint_name, program_name))
  return tuple(sorted(pairs))


def _mapped_key(name: str, checkpoint_name: str,
                program_name: str) -> Optional[str]:
  """The checkpoint key one assignment map entry gives `name`, or None."""
  if not _is_scope(program_name):
    return checkpoint_name if name == program_name else None
  if program_name == "/":
    rest = name
  elif name.startswith(program_name):
    rest = name[len(program_name):]
  else:
    return None
  return rest if checkpoint_name == "/" else checkpoint_name + rest


class NameMatcher:
  """Finds the checkpoint key of a variable name (see the module docstring).

  Example:

    matcher = NameMatcher(["dense/kernel", "dense/bias"])
    matcher.match("sequential/dense/kernel")
    # Match(checkpoint_key="dense/kernel", rule="without_model_name")
  """

  def __init__(self,
               checkpoint_keys: Iterable[str],
               assignment_map: Union[Mapping, Iterable, None] = None):
    """Matches names against `checkpoint_keys`.

    Args:
      checkpoint_keys: The keys of the checkpoint's values.
      assignment_map: Optional `{checkpoint name or scope: program name,
        scope or variable}`, as for `init_from_checkpoint`; tried last.

    Raises:
      ValueError: If `assignment_map` maps a scope to a single name.
    """
    self._keys = frozenset(checkpoint_keys)
    self._assignment_map = _normalized_assignment_map(assignment_map)

  def candidates(self, name: str, strip_model_name: bool = True):
    """Yields `Match`es for `name` in rule order, present or not.

    Args:
      name: A variable's name (see `variable_name`).
      strip_model_name: Whether the name starts with a model's name (a
        Keras 3 path) that rule 2, and the assignment map, may drop.
    """
    yield Match(name, EXACT)
    stripped = without_model_name(name) if strip_model_name else None
    if stripped is not None:
      yield Match(stripped, WITHOUT_MODEL_NAME)
    for checkpoint_name, program_name in self._assignment_map:
      for candidate in (name, stripped):
        key = candidate and _mapped_key(candidate, checkpoint_name,
                                        program_name)
        if key:
          yield Match(key, ASSIGNMENT_MAP)

  def match_in_scope(self, name: str, scope: str) -> Optional[Match]:
    """The key of `name` in checkpoint scope `scope` ("bert/encoder/"), or None.

    The scope followed by the name, or by the name without its first scope.
    """
    stripped = without_model_name(name)
    for candidate in (name, stripped):
      if candidate is not None and scope + candidate in self._keys:
        return Match(scope + candidate, OBJECT_MAP)
    return None

  def match(self, name: str, strip_model_name: bool = True) -> Optional[Match]:
    """The first candidate of `name` the checkpoint holds, or None."""
    for candidate in self.candidates(name, strip_model_name):
      if candidate.checkpoint_key in self._keys:
        return candidate
    return None


def match_names(names: Iterable[str],
                checkpoint_keys: Iterable[str],
                assignment_map=None) -> MatchReport:
  """Matches every name in `names` to a checkpoint key; see `NameMatcher`."""
  checkpoint_keys = list(checkpoint_keys)
  matcher = NameMatcher(checkpoint_keys, assignment_map)
  matched, unmatched = {}, []
  for name in names:
    found = matcher.match(name)
    if found is None:
      unmatched.append(name)
    else:
      matched[name] = found
  used = {found.checkpoint_key for found in matched.values()}
  return MatchReport(matched, unmatched, sorted(set(checkpoint_keys) - used))
