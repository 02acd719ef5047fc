"""The lines TensorFlow, gym and Reverb print that the package drops, and
which of them a process's stderr holds (tests/test_quiet_library.py,
tests/test_imports.py)."""

# What TensorFlow 2.15, gym 0.23 and dm-reverb 0.14 print that the package
# drops (a part of each line; Reverb's come once per 100 chunk records).
LIBRARY_LINES = {
    'TensorFlow': (
        'Unable to register cuDNN factory',
        'Unable to register cuFFT factory',
        'Unable to register cuBLAS factory',
        'TF-TRT Warning: Could not find TensorRT',
        'oneDNN custom operations are on',
        'Could not find cuda drivers on your machine',
        'This TensorFlow binary is optimized',
        'To enable the following instructions',
    ),
    'gym': (
        'Gym has been unmaintained since 2022',
        'Please upgrade to Gymnasium',
        'See the migration guide at https://gymnasium.farama.org',
    ),
    'Reverb': (
        'tfrecord_checkpointer.cc',
    ),
}


def library_lines(stderr: str):
  return {library: [part for part in parts if part in stderr]
          for library, parts in LIBRARY_LINES.items()}
