"""`rlds-reverb recover`: make a dataset whose recorder was killed readable.

    DIR (a recorder or EpisodeWriter killed mid-run; also TFDS's
         SequentialWriter and EnvLogger's directories; a copy cut short)
      -> torn last record cut, open shards registered in dataset_info.json
      -> registered shards that end early cut to their last whole record,
         the finished episodes they lost named (exit 1)
      -> every whole episode readable; the next episode id printed

The same as `rlds_reverb.recover(DIR)`, and as what `RldsRecorder(DIR,
..., append=True)` runs before recording more. Running it again changes
nothing. Not while a recorder is writing to DIR.
"""

import argparse
import json

from rlds_reverb.cli import output

HELP = 'make a dataset whose recorder was killed readable again'
DESCRIPTION = ('Cuts a torn last record and registers the shards a killed '
               'recorder left open, so every finished episode reads back. A '
               'registered shard that ends before its registered episodes '
               '(a copy cut short) is cut to its last whole record, and the '
               'finished episodes lost are named by their index in the split '
               "(a recorder's episode_id).")
EPILOG = """\
examples:
  rlds-reverb recover /data/run1
  rlds-reverb recover /data/actor0 /data/actor1 --json

exit status: 0 recovered with no finished episode lost (or nothing to do),
1 recovered, but finished episodes were lost (named in the output), 2 not a
dataset directory that can be recovered.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('directory', nargs='+', metavar='DIR',
                      help="a dataset's version directory (dataset_info.json "
                           'in it)')
  parser.add_argument('--split', default='train', help='the split (train)')
  parser.add_argument('--json', action='store_true',
                      help='print what was done as JSON, one object per DIR')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb.errors import DatasetDirectoryError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.tfds_out import recover  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  results = []
  for directory in args.directory:
    try:
      results.append(recover(directory, args.split))
    except DatasetDirectoryError as e:
      raise output.CliError(str(e), output.EXIT_USAGE) from e
  if args.json:
    print(json.dumps([_as_dict(result) for result in results], indent=1))
  else:
    for result in results:
      print(result)
  lost = any(result.lost_episodes for result in results)
  return output.EXIT_FAILURE if lost else output.EXIT_OK


def _as_dict(result) -> dict:
  return {'directory': result.directory, 'split': result.split,
          'episodes': result.episodes,
          'recovered_episodes': result.recovered_episodes,
          'registered_shards': list(result.registered_shards),
          'cut_bytes': result.cut_bytes,
          'removed_files': list(result.removed_files),
          'shortened_shards': list(result.shortened_shards),
          'lost_episodes': list(result.lost_episodes),
          'changed': result.changed}
