"""Messages: counts singular for exactly one; text on one line."""

import pytest

from rlds_reverb import wording

CASES = [  # (number, singular, plural, text)
    (0, 'episode', None, '0 episodes'),
    (1, 'episode', None, '1 episode'),
    (2, 'item', None, '2 items'),
    (1, 'malformed episode', None, '1 malformed episode'),
    (3, 'batch', 'batches', '3 batches'),
    (1, 'batch', 'batches', '1 batch'),
]


@pytest.mark.parametrize('number, singular, plural, text', CASES)
def test_count(number, singular, plural, text):
  assert wording.count(number, singular, plural) == text


def test_noun_alone():
  assert [wording.noun(n, 'it', 'them') for n in (1, 2)] == ['it', 'them']


def test_one_line():
  assert wording.one_line('  Cannot read\n  x.tfrecord:\tcorrupt  ') == (
      'Cannot read x.tfrecord: corrupt')
