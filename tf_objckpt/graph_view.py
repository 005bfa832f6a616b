"""`ObjectGraphView`, by TensorFlow's name for the module.

Walking the object graph is in `objects.graph_walk`; describing it as a
`TrackableObjectGraph` proto, with the objects' saveables, in
`objects.graph_serialization`.
"""

# pylint: disable=unused-import
from tf_objckpt.objects.graph_serialization import full_name_for_variable
from tf_objckpt.objects.graph_walk import ObjectGraphView
from tf_objckpt.objects.graph_walk import WeakTrackableReference
# pylint: enable=unused-import
