"""Meta graphs for the v1 `Saver`: export, import, and SAVERS round trips.

`export_meta_graph` writes a graph's `MetaGraphDef`; `imported` imports one
into the default graph (`saver_imports.import_meta_graph` returns a `Saver`
for it). Savers in the graph's SAVERS collection convert themselves on
export; on import they become ours inside our import and TensorFlow's
otherwise, so `tf.compat.v1.train.import_meta_graph` behaves unchanged.
TensorFlow keeps these conversions in one registry for the whole process:
`convert_savers` takes them over, when the first of our `Saver`s is made
or a meta graph is imported through us (never on import). TensorFlow's
name for the module of these functions is `saver`, which re-exports them.
"""

import contextlib
import threading
from typing import Any, Optional

from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import meta_graph
from tensorflow.python.framework import ops

from tf_objckpt.foundation import module_names

# Depth of `import_meta_graph` calls in progress on this thread: savers
# recreated from SAVERS collections meanwhile are ours, not TensorFlow's.
_IMPORTING = threading.local()

# Held while the SAVERS conversion is taken over (`convert_savers`).
_CONVERSION_LOCK = threading.Lock()
# Our v1 `Saver` class, once `convert_savers` made SAVERS convert to it.
_converting_to = None

NO_GRAPH_WHEN_EAGER = (
    "Exporting/importing meta graphs is not supported when eager execution "
    "is enabled. No graph exists when eager execution is enabled.")


def imported(meta_graph_or_file,
             clear_devices=False,
             import_scope=None,
             return_elements=None,
             **kwargs):
  """Imports a `MetaGraphDef` (or the file holding one) into the graph.

  Savers of its SAVERS collection are made ours (see `convert_savers`,
  which must have been called).

  Returns:
    The `MetaGraphDef`, the imported variables by name, and the requested
    graph elements.
  """
  if context.executing_eagerly():
    raise RuntimeError(NO_GRAPH_WHEN_EAGER)
  meta_graph_def = meta_graph_or_file
  if not isinstance(meta_graph_def, meta_graph_pb2.MetaGraphDef):
    meta_graph_def = meta_graph.read_meta_graph_file(meta_graph_def)
  with _importing():
    imported_vars, elements = (
        meta_graph.import_scoped_meta_graph_with_return_elements(
            meta_graph_def,
            clear_devices=clear_devices,
            import_scope=import_scope,
            return_elements=return_elements,
            **kwargs))
  return meta_graph_def, imported_vars, elements


@contextlib.contextmanager
def _importing():
  _IMPORTING.depth = getattr(_IMPORTING, "depth", 0) + 1
  try:
    yield
  finally:
    _IMPORTING.depth -= 1


def export_meta_graph(filename: Optional[str] = None,
                      meta_info_def: Any = None,
                      graph_def: Any = None,
                      saver_def: Any = None,
                      collection_list: Any = None,
                      as_text: bool = False,
                      graph: Any = None,
                      export_scope: Optional[str] = None,
                      clear_devices: bool = False,
                      clear_extraneous_savers: bool = False,
                      strip_default_attrs: bool = False,
                      save_debug_info: bool = False,
                      **kwargs: Any) -> meta_graph_pb2.MetaGraphDef:
  """Returns a `MetaGraphDef` of a graph, optionally writing it to a file.

  Args:
    filename: file to write the proto to, if any.
    meta_info_def: a `MetaInfoDef` to include.
    graph_def: the `GraphDef` to include (default: from `graph`).
    saver_def: the `SaverDef` to include.
    collection_list: collections to include (default: all).
    as_text: write the text format.
    graph: the graph (default: the default graph).
    export_scope: only export this name scope, stripped from names.
    clear_devices: remove device placements.
    clear_extraneous_savers: drop the ops and SaverDefs of other savers.
    strip_default_attrs: drop default-valued attributes.
    save_debug_info: also write the GraphDebugInfo.
    **kwargs: passed to `export_scoped_meta_graph`.

  Raises:
    ValueError: if the `GraphDef` is larger than 2GB.
    RuntimeError: when executing eagerly, unless `graph_def` and `graph` are
      both given.
  """
  if context.executing_eagerly() and (graph_def is None or graph is None):
    raise RuntimeError(NO_GRAPH_WHEN_EAGER)
  exported, _ = meta_graph.export_scoped_meta_graph(
      filename=filename,
      meta_info_def=meta_info_def,
      graph_def=graph_def,
      saver_def=saver_def,
      collection_list=collection_list,
      as_text=as_text,
      graph=graph,
      export_scope=export_scope,
      clear_devices=clear_devices,
      clear_extraneous_savers=clear_extraneous_savers,
      strip_default_attrs=strip_default_attrs,
      save_debug_info=save_debug_info,
      **kwargs)
  return exported


def _saver_to_proto(saver, export_scope=None):
  # Either kind of saver (ours or TensorFlow's) converts itself.
  return saver.to_proto(export_scope=export_scope)


def convert_savers(saver_class):
  """Makes SAVERS collections round-trip with `saver_class`es (idempotent).

  TensorFlow registers its own conversion for the SAVERS collection, in a
  registry of the whole process. We take the registration over
  (`saver_class.from_proto` makes our savers): each saver converts itself
  on export, and on import the savers become ours inside `imported` and
  TensorFlow's otherwise, so `tf.compat.v1.train.import_meta_graph`
  behaves unchanged. Called when our first `Saver` is made (it may enter a
  SAVERS collection) and before our imports.
  """
  global _converting_to  # pylint: disable=global-statement
  with _CONVERSION_LOCK:
    if _converting_to is not saver_class:
      _take_over_conversion(saver_class)
      _converting_to = saver_class


def _take_over_conversion(saver_class):
  """Registers `saver_class`'s conversion of SAVERS collections."""
  our_from_proto = saver_class.from_proto
  key = ops.GraphKeys.SAVERS
  registry = ops._proto_function_registry  # pylint: disable=protected-access
  try:
    tf_from_proto = registry.lookup(key)[2]
  except LookupError:
    tf_from_proto = None
  # After a reload of this module, delegate to TensorFlow's, not our old one.
  tf_from_proto = getattr(tf_from_proto, "tf_from_proto", tf_from_proto)

  def saver_from_proto(saver_def, import_scope=None):
    if getattr(_IMPORTING, "depth", 0) or tf_from_proto is None:
      return our_from_proto(saver_def, import_scope=import_scope)
    return tf_from_proto(saver_def, import_scope=import_scope)

  saver_from_proto.tf_from_proto = tf_from_proto
  registry._registry.pop(key, None)  # pylint: disable=protected-access
  ops.register_proto_function(key,
                              proto_type=saver_pb2.SaverDef,
                              to_proto=_saver_to_proto,
                              from_proto=saver_from_proto)


module_names.keep_module_name("tf_objckpt.saver", export_meta_graph)
