"""A command for tests/test_warm_process.py's stand-in: says it is warm
(TensorFlow already imported), then exits with a code or waits for a
signal, printing its pid; a Ctrl-C exits 130, as `rlds-reverb` does."""

import os
import sys
import time

if __name__ == '__main__':
  print('warm' if 'tensorflow' in sys.modules else 'cold', flush=True)
  if sys.argv[1] == 'exit':
    sys.exit(int(sys.argv[2]))
  try:  # Before the pid is out: a Ctrl-C may follow it at once.
    print(os.getpid(), flush=True)
    time.sleep(120)
  except KeyboardInterrupt:
    sys.exit(130)
