"""`rlds-reverb export`: a Reverb table out as an RLDS dataset directory.

From a checkpoint on disk (`--checkpoint`), or from a running server that
writes one on request (`--server`). Exit 0 when written (losses listed), 1
when the table cannot be exported or `--strict` met a loss, 2 for bad usage
or a checkpoint that cannot be read.
"""

import argparse

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output

HELP = 'write a Reverb table (of a checkpoint) as an RLDS dataset'
IMAGE_ENCODINGS = ('png', 'jpeg', 'none')
DESCRIPTION = ('Rebuilds the episodes of a Reverb table of TF-Agents '
               'trajectories from a checkpoint, and writes them as an RLDS '
               'TFDS dataset directory, in the order they were written to '
               'the table.')
EPILOG = """\
examples:
  rlds-reverb export --checkpoint /tmp/reverb_ckpt --table replay --out DIR
  rlds-reverb export --server localhost:8000 --table replay --out DIR --json
  rlds-reverb validate --dataset DIR     # then read, inspect or push it

--checkpoint takes one checkpoint directory, or serve's --checkpoint-dir
(its newest complete checkpoint). --server asks the server for a checkpoint
(its --checkpoint-dir must be readable here) and exports that: it stays
there as the server's newest, or, from a server without --checkpoint-dir
(Reverb writes it to a temporary directory), it is removed after. Fields a
table holds encoded (push --images encoded) come back as Image features
holding the stored PNG/JPEG bytes as they are; --image-encoding (or its
older name --images) applies to raw frames. Each episode gets the metadata
a recording has: episode_id (its place in the export), episode_length,
episode_return and terminated.
Steps that did not survive in the table (evicted, sampled away with their
chunks) are left out with their episode, never exported with a hole, and
counted; --strict makes any loss an error. OUT must not exist (or be
empty): the dataset is written beside it and renamed at the end.
exit status: 0 written, 1 table not exportable or a loss with --strict,
2 bad usage or an unreadable checkpoint.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument('--checkpoint', metavar='DIR',
                      help=('a Reverb checkpoint directory, or the directory '
                            'a server checkpoints into (its newest complete '
                            'checkpoint)'))
  source.add_argument('--server', metavar='HOST:PORT',
                      type=options.server_address,
                      help=('a running Reverb server: checkpoint it now and '
                            'export that checkpoint'))
  parser.add_argument('--table', required=True, metavar='NAME',
                      help='the table to export')
  parser.add_argument('--out', required=True, metavar='DIR',
                      help='the dataset directory to create')
  parser.add_argument('--name', default=None,
                      help="the dataset's name (default: the table's)")
  parser.add_argument('--image-encoding', default='png',
                      choices=IMAGE_ENCODINGS,
                      help=('how raw uint8 [H, W, C] fields are stored '
                            '(default: %(default)s, lossless); fields the '
                            'table holds encoded keep their bytes'))
  parser.add_argument('--images', dest='image_encoding',
                      choices=IMAGE_ENCODINGS, default=argparse.SUPPRESS,
                      help=argparse.SUPPRESS)  # --image-encoding's old name.
  parser.add_argument('--strict', action='store_true',
                      help=('fail, writing nothing, if any step or episode '
                            'cannot come back'))
  parser.add_argument('--timeout', type=options.seconds, default=30.0,
                      metavar='SEC',
                      help='seconds to wait for --server (default: %(default)s)')
  options.add_json_flag(parser, 'the counts and losses')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb import errors  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import exporter  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    report = exporter.export(
        args.table, args.out, checkpoint=args.checkpoint, server=args.server,
        name=args.name, image_encoding=args.image_encoding, strict=args.strict,
        timeout=args.timeout)
  except (errors.CheckpointError, errors.TableNotFoundError,
          errors.AddressError, errors.DatasetDirectoryError) as e:
    raise output.CliError(output.error_line(e), output.EXIT_USAGE) from e
  except errors.RldsReverbError as e:
    raise output.CliError(output.error_line(e)) from e
  except ValueError as e:  # --name unusable.
    raise output.CliError(output.error_line(e), output.EXIT_USAGE) from e
  if args.json:
    output.print_json(report.as_dict())
  else:
    _print_text(report)
  return output.EXIT_OK


def _print_text(report) -> None:
  print(f'exported {wording.count(report.episodes, "episode")} '
        f'({wording.count(report.steps, "step")}) of table '
        f"'{report.table}' to {report.out} in {report.seconds:.1f} s")
  print(f'from checkpoint {report.checkpoint}: '
        f'{wording.count(report.items, "item")}; the table had removed '
        f'{report.items_removed:,} before it (evicted or sampled away)')
  losses = report.loss_lines()
  for line in losses:
    print(f'lost: {line}')
  if report.padding_rows:
    print(f'skipped {wording.count(report.padding_rows, "padding step")} '
          f'(PAD/TILE boundary steps, not data)')
  if not losses:
    print('nothing lost: every step in the checkpoint came back')
  if report.checkpoint_removed:
    print('removed that checkpoint: the server has no checkpoint directory '
          'of its own (Reverb wrote it to a temporary one)')
  elif report.checkpoint_written:
    print("that checkpoint stays, the newest in the server's checkpoint "
          'directory: Reverb loads it at a restart')
