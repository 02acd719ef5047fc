"""The sweep over TFDS's own RLDS builders (`tests/catalog.py`).

Each structure of the installed catalog (every offline builder config,
grouped by identical features; the rlu_rwrl and Open X-Embodiment ones from
TFDS's catalog pages, images PNG and JPEG) is written as a small synthetic
TFDS directory with exactly its features, and taken through the public API
(`tests/catalog_checks.py`): validation finds nothing and counts every step,
statistics give every length and return, the spec matches the data,
conversion gives the rules' values, and a push of 2-step items into a real
Reverb table signed with the spec reads back equal to the source, item by
item. The source is what TFDS decodes from the directory (JPEG is lossy).

This file sweeps the structures at even positions of the catalog, and
tests/test_catalog_odd.py, with the same tests, those at odd positions: a
file runs whole in one xdist worker, and the slow tier's sweep (minutes)
is then shared by both.

    python -m pytest -q tests/test_catalog*.py            # one per family (default tier)
    python -m pytest -q -m slow tests/test_catalog*.py    # every other structure (slow tier)
    python scripts/catalog_sweep.py   # the table, and TF-Agents' own module's count
"""

import pytest
import tensorflow_datasets as tfds

from tests import catalog
from tests import catalog_checks


def structure_params(parity: int):
  """The structures at even (0) or odd (1) positions of the catalog; all but
  one per family (`fast_structures`, the default tier's) are slow tier: each
  family's structure with the most fields takes the default tier through
  the same checks."""
  fast = catalog.fast_structures()
  return [pytest.param(s, id=s.name,
                       marks=() if s in fast else pytest.mark.slow)
          for s in catalog.structures()[parity::2]]


def prepare(request, tmp_path_factory) -> catalog_checks.Case:
  return catalog_checks.prepare(
      request.param, str(tmp_path_factory.mktemp('catalog')))


@pytest.fixture(scope='module', params=structure_params(0))
def case(request, tmp_path_factory) -> catalog_checks.Case:
  return prepare(request, tmp_path_factory)


def test_directory_has_the_structure_features(case):
  written = tfds.builder_from_directory(case.directory).info.features
  assert catalog.structure_key(written) == catalog.structure_key(
      case.structure.features)


def test_validation_finds_nothing_and_counts_every_step(case):
  catalog_checks.check_validation(case)


def test_statistics_give_every_length_and_return(case):
  catalog_checks.check_statistics(case)


def test_spec_matches_the_data(case):
  catalog_checks.check_spec(case)


def test_conversion_gives_the_rules_values(case):
  catalog_checks.check_conversion(case)


def test_push_reads_back_equal_item_by_item(case):
  catalog_checks.check_push(case)


# --- The catalog itself. -----------------------------------------------------

def test_every_family_has_structures():
  families = {s.family for s in catalog.structures()}
  assert families == set(catalog.FAMILIES)
  assert [s.family for s in catalog.fast_structures()] == list(
      catalog.FAMILIES)


def test_structures_are_distinct_and_configs_listed_once():
  structures = catalog.structures()
  builder_keys = [catalog.structure_key(s.features) for s in structures
                  if s.origin == 'builder']
  assert len(set(builder_keys)) == len(builder_keys)
  configs = [c for s in structures if s.family != catalog.OPEN_X
             for c in s.configs]
  assert len(set(configs)) == len(configs)


def test_rwrl_structures_cover_its_builder_configs():
  """The 40 configs the builder declares, 4 domains x 2 challenges."""
  declared = {f'{catalog.RWRL}/{c.name}'
              for c in tfds.builder_cls(catalog.RWRL).BUILDER_CONFIGS}
  rwrl = [s for s in catalog.structures() if s.family == catalog.RWRL]
  assert {c for s in rwrl for c in s.configs} == declared
  assert len(rwrl) == 8


def test_open_x_structures_come_in_both_encodings():
  names = [s.name for s in catalog.structures()
           if s.family == catalog.OPEN_X]
  assert sorted(names) == sorted(
      f'{name}:{encoding}' for name in catalog.OPEN_X_FEATURES
      for encoding in catalog.IMAGE_ENCODINGS)
