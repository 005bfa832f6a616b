"""A v1 `Saver` for an imported meta graph: `import_meta_graph`.

`import_meta_graph` imports a `MetaGraphDef` into the default graph
(`meta_graphs.imported`) and returns our `Saver` of it: the meta graph's
`SaverDef`, or every imported variable when there is none. Meta graphs
written by TensorFlow's `Saver` work as well as ours. TensorFlow's name for
the module of these functions is `saver`, which re-exports them.
"""

from typing import Any, Optional

from tensorflow.python.platform import tf_logging as logging

from tf_objckpt.foundation import module_names
from tf_objckpt.v1 import meta_graphs
from tf_objckpt.v1 import name_based_saver
from tf_objckpt.v1 import saver_builders


def import_meta_graph(meta_graph_or_file: Any,
                      clear_devices: bool = False,
                      import_scope: Optional[str] = None,
                      **kwargs: Any) -> Any:
  """Imports a `MetaGraphDef` into the default graph and returns its saver.

  Nodes and collections are added to the current graph (under
  `import_scope`); the returned `Saver` uses the meta graph's `saver_def`, or
  covers every imported variable when there is none. Meta graphs written by
  TensorFlow's `Saver` work as well as ours.

  Args:
    meta_graph_or_file: a `MetaGraphDef` or the path of a file holding one.
    clear_devices: drop device placements while importing.
    import_scope: name scope to import under.
    **kwargs: passed to `import_scoped_meta_graph_with_return_elements`.

  Returns:
    A `Saver`, or None when the graph has no variables to restore.

  Raises:
    RuntimeError: when executing eagerly.
  """
  saver, _ = _import_meta_graph_with_return_elements(meta_graph_or_file,
                                                     clear_devices,
                                                     import_scope, **kwargs)
  return saver


def _import_meta_graph_with_return_elements(
    meta_graph_or_file: Any,
    clear_devices: bool = False,
    import_scope: Optional[str] = None,
    return_elements: Optional[list] = None,
    **kwargs: Any) -> tuple:
  """`import_meta_graph` that also returns the requested graph elements.

  TensorFlow's name, kept: TensorFlow's SavedModel loader calls it.
  """
  meta_graphs.convert_savers(name_based_saver.Saver)
  meta_graph_def, imported_vars, elements = meta_graphs.imported(
      meta_graph_or_file, clear_devices, import_scope, return_elements,
      **kwargs)
  return (_create_saver_from_imported_meta_graph(meta_graph_def, import_scope,
                                                 imported_vars), elements)


def _create_saver_from_imported_meta_graph(meta_graph_def: Any,
                                           import_scope: Optional[str],
                                           imported_vars: dict) -> Any:
  """A `Saver` for the variables of a just-imported meta graph, or None.

  TensorFlow's name, kept for code that calls it from the `saver` module.
  """
  if meta_graph_def.HasField("saver_def"):
    scope = import_scope
    if imported_vars:
      # The scope actually used may have been uniquified (e.g. "scope_1").
      key, var = next(iter(imported_vars.items()))
      scope = var.name[:-len(key)]
    return name_based_saver.Saver(name=scope,
                                  saver_def=meta_graph_def.saver_def)
  if saver_builders.all_saveables(scope=import_scope):
    return name_based_saver.Saver()
  logging.info("Saver not created because there are no variables in the "
               "graph to restore")
  return None


module_names.keep_module_name("tf_objckpt.saver", import_meta_graph,
                              _import_meta_graph_with_return_elements,
                              _create_saver_from_imported_meta_graph)
