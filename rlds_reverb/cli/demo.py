"""`rlds-reverb demo`: the whole path on the bundled dataset, in one process.

    bundled CartPole RLDS -> validate -> spec -> in-process Reverb table
      -> push (sequence_length 2) -> sample a batch through TF-Agents'
      ReverbReplayBuffer -> summary

No downloads and no server to start: the README's first command.

Every wait is bounded: the push by its timeout; the sample is not started on
a table the push left empty (Reverb's sampler would wait for an item without
end), and waits at most SAMPLE_TIMEOUT_S for its batch.
"""

import argparse
import time

from rlds_reverb import tables
from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output

TABLE = 'demo'
SEQUENCE_LENGTH = 2
SAMPLE_TIMEOUT_S = 30

HELP = 'push the bundled dataset into an in-process server and sample it'
DESCRIPTION = ('Validates an RLDS dataset (the bundled CartPole one by '
               'default), pushes it into a Reverb table of an in-process '
               "server and samples a batch back through TF-Agents' "
               'ReverbReplayBuffer.')
EPILOG = """\
examples:
  rlds-reverb demo
  rlds-reverb demo --batch-size 8
  rlds-reverb demo --dataset ~/tensorflow_datasets/my_rlds/1.0.0
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser, required=False)
  parser.add_argument('--batch-size', type=options.positive_int, default=4,
                      help='items in the sampled batch (default: %(default)s)')


def run(args: argparse.Namespace) -> int:
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  if args.dataset is None:
    args.dataset = [sources.BUNDLED]
  rlds_data = options.load(args)
  step_format, spec = options.step_format(args, rlds_data)
  with options.reading(args):
    report = validation.validate(rlds_data)
  if report.problems:
    first = report.problems[0]
    raise output.CliError(
        f'{wording.count(len(report.problems), "problem")} in the dataset; '
        f'the first: {first.message} (episode {first.episode}, step '
        f'{first.step}). '
        "Run 'rlds-reverb validate' for all of them.")
  print(f"dataset   {' '.join(args.dataset)} (split {args.split}): "
        f'{wording.count(report.episodes, "episode")}, '
        f'{wording.count(report.steps, "step")}, valid{_skipped_text(report)}')
  for message in step_format.notes():
    print(f'note      {message}')
  print(f'spec      {output.spec_text(spec)}')

  server = reverb.Server([tables.table(
      tables.uniform(TABLE, max_size=max(report.steps, 1)),
      specs.table_signature(spec))])
  try:
    address = f'localhost:{server.port}'
    print(f"server    in-process Reverb at {address}, table '{TABLE}' "
          'signed with the trajectory spec')
    result = rlds_reverb.push(rlds_data, address, TABLE,
                              sequence_length=SEQUENCE_LENGTH)
    rate = result.trajectories / max(result.seconds, 1e-9)
    print(f'pushed    {wording.count(result.episodes, "episode")}, '
          f'{wording.count(result.trajectories, "step")}, '
          f'{wording.count(result.items, "item")} of {SEQUENCE_LENGTH} steps '
          f'in {result.seconds:.2f} s ({rate:,.0f} steps/s)')
    if result.items == 0:
      raise output.CliError(
          f'nothing to sample: the push wrote no item of {SEQUENCE_LENGTH} '
          f'steps ({_why_no_items(result)}).')
    started = time.perf_counter()
    batch = _sample_batch(spec, server, args.batch_size)
    print(f'sampled   a batch in {time.perf_counter() - started:.2f} s: '
          f'{_shapes_text(batch)}')
  finally:
    server.stop()
  return output.EXIT_OK


def _skipped_text(report) -> str:
  """'; 2 empty and 1 flagged invalid episodes, which the push skips'."""
  parts = []
  if report.empty_episodes:
    parts.append(f'{wording.number(len(report.empty_episodes))} empty')
  if report.flagged_invalid:
    parts.append(
        f'{wording.number(len(report.flagged_invalid))} flagged invalid')
  if not parts:
    return ''
  skipped = len(report.empty_episodes) + len(report.flagged_invalid)
  return (f'; {" and ".join(parts)} '
          f'{wording.noun(skipped, "episode")}, which the push skips')


def _why_no_items(result) -> str:
  if result.episodes == 0:
    return 'every episode was skipped'
  return (f'{wording.count(result.episodes, "episode")} pushed, none of '
          f'{SEQUENCE_LENGTH} steps or more')


def _sample_batch(spec, server, batch_size: int,
                  timeout_s: float = SAMPLE_TIMEOUT_S):
  """One batch through TF-Agents' replay buffer, as a TF-Agents user would;
  within `timeout_s` (Reverb ends the dataset then, instead of waiting)."""
  from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  replay = reverb_replay_buffer.ReverbReplayBuffer(
      spec, TABLE, sequence_length=SEQUENCE_LENGTH, local_server=server,
      rate_limiter_timeout_ms=round(timeout_s * 1000))
  dataset = replay.as_dataset(sample_batch_size=batch_size,
                              num_steps=SEQUENCE_LENGTH)
  batch = next(iter(dataset), None)
  if batch is None:
    raise output.CliError(
        f"table '{TABLE}' of the in-process server gave no batch of "
        f'{batch_size} within {timeout_s:g} s.')
  trajectories, _ = batch
  return trajectories


def _shapes_text(trajectories) -> str:
  parts = []
  for name, value in trajectories._asdict().items():
    for path, leaf in _leaves(name, value):
      parts.append(f'{path} {tuple(leaf.shape)}')
  return ', '.join(parts)


def _leaves(name, value):
  from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return paths.flatten_with_paths(value, name)

