"""What every layer shares: identity containers and checkpoint key names.

Layer 0 of 6 (foundation), with `version`. Here: containers keyed on object
identity (`identity_containers`, behind TensorFlow's name
`object_identity`), the names of checkpoint keys (`checkpoint_keys`, behind
`trackable_utils`), and how a class that moved out of a TensorFlow-named
module keeps that module's name (`module_names`). It uses Python and
TensorFlow only, nothing else of tf_objckpt.
"""
