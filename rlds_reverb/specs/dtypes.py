"""A spec's dtype as numpy holds its values: what the recorder's columns,
the exporter's rows and the dataset writer's Tensor features are made of.

    tf.string            -> object (bytes, as TFDS and Reverb give them back)
    any other (TF or np) -> its numpy dtype
"""

import numpy as np
import tensorflow as tf


def numpy_dtype(dtype) -> np.dtype:
  """The numpy dtype of values of `dtype` (a TensorFlow or numpy dtype)."""
  dtype = tf.as_dtype(dtype)
  return np.dtype(object if dtype == tf.string else dtype.as_numpy_dtype)
