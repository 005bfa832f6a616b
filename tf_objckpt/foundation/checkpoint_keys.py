"""How object paths and attribute names become checkpoint keys.

Object-based checkpoints key each value by the path of local names from the
root object, so these rules are part of the on-disk format and must match
TensorFlow's byte for byte:

  <escaped/path>/.ATTRIBUTES/<escaped attribute>
  <variable path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot name>

A "." in a name is doubled and a "/" becomes ".S", so user names can never
collide with the reserved ".ATTRIBUTES" and ".OPTIMIZER_SLOT" segments.
TensorFlow's name for this module is `trackable_utils`, which re-exports it.
"""

ESCAPE_CHAR = "."
OBJECT_ATTRIBUTES_NAME = ESCAPE_CHAR + "ATTRIBUTES"
OPTIMIZER_SLOTS_NAME = ESCAPE_CHAR + "OPTIMIZER_SLOT"
# The attribute name of a variable's value.
VARIABLE_VALUE_KEY = "VARIABLE_VALUE"
# The attribute name of a trackable that saves through
# `_serialize_to_tensors`; its tensors are keyed directly under .ATTRIBUTES/.
SERIALIZE_TO_TENSORS_NAME = ESCAPE_CHAR + "TENSORS"


def escape_local_name(name: str) -> str:
  """Escapes a local name so it can be one segment of a checkpoint key."""
  if ESCAPE_CHAR not in name and "/" not in name:  # Most names.
    return name
  return name.replace(ESCAPE_CHAR,
                      ESCAPE_CHAR * 2).replace("/", ESCAPE_CHAR + "S")


def checkpoint_key(object_name: str, attribute_name: str) -> str:
  """The key of attribute `attribute_name` of the object at `object_name`."""
  if attribute_name == SERIALIZE_TO_TENSORS_NAME:
    suffix = ""
  else:
    suffix = escape_local_name(attribute_name)
  return f"{object_name}/{OBJECT_ATTRIBUTES_NAME}/{suffix}"


def slot_variable_key(variable_path: str, optimizer_path: str,
                      slot_name: str) -> str:
  """The object name of an optimizer's slot variable for a variable."""
  return (f"{variable_path}/{OPTIMIZER_SLOTS_NAME}/{optimizer_path}/"
          f"{escape_local_name(slot_name)}")


def object_path_of_key(key: str) -> str:
  """The object path part of a checkpoint key (before "/.ATTRIBUTES")."""
  marker = "/" + OBJECT_ATTRIBUTES_NAME
  return key[:key.index(marker)] if marker in key else key


def saveable_name(key: str) -> str:
  """The key up to and including ".ATTRIBUTES/": the name of a saveable
  restoring every attribute of one object (`_serialize_to_tensors`)."""
  segment = OBJECT_ATTRIBUTES_NAME + "/"
  return key[:key.index(segment) + len(segment)]
