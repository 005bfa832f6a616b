"""The version of tf_objckpt, the one place it is defined.

`setup.py` reads it from this file's text, without importing the package
(or TensorFlow).
"""

__version__ = "0.1.0"
