"""The catalog sweep of tests/test_catalog.py over the structures at odd
positions: the same tests (imported, so pytest runs them here with this
file's `case`), in a file of its own so that the slow tier's two workers
share the sweep."""

import pytest

from tests import catalog_checks
from tests import test_catalog
from tests.test_catalog import test_conversion_gives_the_rules_values
from tests.test_catalog import test_directory_has_the_structure_features
from tests.test_catalog import test_push_reads_back_equal_item_by_item
from tests.test_catalog import test_spec_matches_the_data
from tests.test_catalog import test_statistics_give_every_length_and_return
from tests.test_catalog import test_validation_finds_nothing_and_counts_every_step

# Collected here as this file's tests: what pytest runs is a module's test_*.
SWEEP = (test_directory_has_the_structure_features,
         test_validation_finds_nothing_and_counts_every_step,
         test_statistics_give_every_length_and_return,
         test_spec_matches_the_data, test_conversion_gives_the_rules_values,
         test_push_reads_back_equal_item_by_item)


@pytest.fixture(scope='module', params=test_catalog.structure_params(1))
def case(request, tmp_path_factory) -> catalog_checks.Case:
  return test_catalog.prepare(request, tmp_path_factory)
