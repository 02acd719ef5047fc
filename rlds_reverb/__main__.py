"""`python -m rlds_reverb`: the `rlds-reverb` command."""

import sys

from rlds_reverb.cli import main

if __name__ == '__main__':
  sys.exit(main())
