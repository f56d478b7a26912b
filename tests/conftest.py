"""Shared test setup."""

import os

# Quiet TensorFlow's C++ start-up messages in tests and in the scripts they start.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
