"""Repository-wide pytest setup: quiet TensorFlow's C++ logging."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
