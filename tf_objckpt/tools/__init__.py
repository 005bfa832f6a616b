"""What users run around their programs: the command line and adoption.

Layer 6 of 6 (tools), the top: the `tf-objckpt` commands (`inspect`,
`verify`, `diff`, `convert`, `run`) and `patch_tensorflow()`, which makes
TensorFlow's own names use tf_objckpt. It may use every layer.
"""
