"""The issue 21 goal's counts: every RLDS structure of TFDS's catalog, ours and TF-Agents'.

For each structure of `tests/catalog.py` (every offline builder config grouped
by identical features, plus rlu_rwrl and Open X-Embodiment from the catalog
pages), a small synthetic TFDS directory with exactly its features is written
and checked twice on the same data (`tests/catalog_checks.py`):

    ours       validate, episode_stats, create_trajectory_data_spec,
               convert_rlds_to_trajectories, push of 2-step items read back
    TF-Agents  create_trajectory_data_spec, convert_rlds_to_trajectories,
               push_rlds_to_reverb through a ReverbAddTrajectoryObserver

A row says 'yes' when every check passed, else the first failure on one line.

    python scripts/catalog_sweep.py                   # every structure (~10 min)
    python scripts/catalog_sweep.py --fast            # one per family
    python scripts/catalog_sweep.py --family rlu_rwrl --family mt_opt
"""

import argparse
import contextlib
import io
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from rlds_reverb._util import quiet  # pylint: disable=g-import-not-at-top,g-bad-import-order

quiet.silence()

from tests import catalog  # pylint: disable=g-import-not-at-top
from tests import catalog_checks  # pylint: disable=g-import-not-at-top


def main() -> int:
  args = parse_args()
  quiet.quiet_absl()
  structures = catalog.fast_structures() if args.fast else catalog.structures()
  if args.family:
    structures = [s for s in structures if s.family in args.family]
  print_catalog_counts()
  print('| family | structure | configs | ours | TF-Agents |')
  print('|---|---|---|---|---|')
  ok = {'ours': [], 'tfa': []}
  started = time.monotonic()
  for structure in structures:
    ours, tfa = sweep_one(structure)
    ok['ours'] += [structure] if ours is None else []
    ok['tfa'] += [structure] if tfa is None else []
    print(f'| {structure.family} | {structure.name} | '
          f'{len(structure.configs)} | {ours or "yes"} | {tfa or "yes"} |',
          flush=True)
  total = len(structures)
  print(f'\nours {len(ok["ours"])} of {total}, TF-Agents {len(ok["tfa"])} of '
        f'{total} structures ({time.monotonic() - started:.0f} s)')
  configs = lambda chosen: sum(len(s.configs) for s in chosen
                               if s.family != catalog.OPEN_X)
  print(f'builder configs (Open X-Embodiment left out): ours '
        f'{configs(ok["ours"])} of {configs(structures)}, TF-Agents '
        f'{configs(ok["tfa"])} of {configs(structures)}')
  return 0 if len(ok['ours']) == total else 1


def parse_args() -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--fast', action='store_true',
                      help='one structure per family (the CI subset)')
  parser.add_argument('--family', action='append', choices=catalog.FAMILIES,
                      help='only this family (repeatable)')
  return parser.parse_args()


def print_catalog_counts() -> None:
  structures = catalog.structures()
  offline = [s for s in structures if s.origin == 'builder']
  pages = [s for s in structures if s.origin != 'builder']
  open_x = [s for s in pages if s.family == catalog.OPEN_X]
  rwrl = [s for s in pages if s.family == catalog.RWRL]
  print(f'TFDS catalog: {sum(len(s.configs) for s in offline)} RLDS builder '
        f'configs built offline -> {len(offline)} structures; rlu_rwrl '
        f'{sum(len(s.configs) for s in rwrl)} configs -> {len(rwrl)} '
        f'structures; Open X-Embodiment {len(catalog.OPEN_X_FEATURES)} sets '
        f'x PNG/JPEG -> {len(open_x)} structures; {len(structures)} in all, '
        f'{len(catalog.FAMILIES)} families.\n')


def sweep_one(structure: catalog.Structure):
  """(ours, TF-Agents): None if every check passed, else the first failure."""
  with tempfile.TemporaryDirectory() as data_dir:
    try:
      with contextlib.redirect_stdout(io.StringIO()):  # TFDS's writer talks.
        case = catalog_checks.prepare(structure, data_dir)
    except Exception as e:  # pylint: disable=broad-except
      failure = f'writing the dataset: {type(e).__name__}: ' + (
          catalog_checks.last_line(e))
      return failure, failure
    return (catalog_checks.first_failure(catalog_checks.OURS, case),
            catalog_checks.first_failure(catalog_checks.TF_AGENTS, case))


if __name__ == '__main__':
  sys.exit(main())
