"""Run as `python -m tests.export_rss TABLE CHECKPOINT OUT [CHECKPOINT OUT
...]`: exports each in turn, then prints [{"rss_growth": bytes, "steps": n},
...] as JSON.

A process of its own, so that its memory is the exports'. Importing
TensorFlow peaks higher than an export runs, so before each export the peak
(VmHWM) is reset (`/proc/self/clear_refs`, Linux >= 4.0), and its growth is
the peak during the export above the RSS before it. Memory an earlier export
freed is reused by a later one: pass the largest checkpoint first, so that
the comparison is not in its favour. The export's buffers (a window of rows,
a batch of chunk records: 8 MB each; a file's blocks read and inflated: 1
and 4 MB) are made small, so that checkpoints of a few MB already fill them:
what grows beyond is what grows with the checkpoint.
"""

import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def status(field: str) -> int:
  """A memory field of /proc/self/status ('VmRSS', 'VmHWM'), in bytes."""
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith(f'{field}:'):
        return int(line.split()[1]) * 1024
  raise KeyError(field)


def measured_export(table: str, checkpoint: str, out: str) -> dict:
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')  # Resets VmHWM to the current RSS.
  before = status('VmRSS')
  report = rlds_reverb.export(table, out, checkpoint=checkpoint)
  return {'rss_growth': status('VmHWM') - before, 'steps': report.steps}


def main(table: str, *pairs: str) -> None:
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  from rlds_reverb.checkpoints import records  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.exporter import episodes  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.exporter import store  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  episodes.WINDOW_BYTES = store.BATCH_BYTES = 1 << 20
  records.READ_BYTES, records.INFLATED_BYTES = 64 << 10, 256 << 10
  print(json.dumps([measured_export(table, pairs[i], pairs[i + 1])
                    for i in range(0, len(pairs), 2)]))


if __name__ == '__main__':
  main(*sys.argv[1:])
