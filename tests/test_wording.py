"""Messages: counts singular for exactly one; sizes; text on one line."""

import pytest

from rlds_reverb._util import wording

CASES = [  # (number, singular, plural, text)
    (0, 'episode', None, '0 episodes'),
    (1, 'episode', None, '1 episode'),
    (2, 'item', None, '2 items'),
    (1, 'malformed episode', None, '1 malformed episode'),
    (3, 'batch', 'batches', '3 batches'),
    (1, 'batch', 'batches', '1 batch'),
    (19362, 'item', None, '19,362 items'),
    (1_000_000, 'step', None, '1,000,000 steps'),
    (-1500, 'byte', None, '-1,500 bytes'),
]


@pytest.mark.parametrize('number, singular, plural, text', CASES)
def test_count(number, singular, plural, text):
  assert wording.count(number, singular, plural) == text


def test_number_alone():
  assert [wording.number(n) for n in (0, 999, 1000, 124881)] == [
      '0', '999', '1,000', '124,881']


def test_noun_alone():
  assert [wording.noun(n, 'it', 'them') for n in (1, 2)] == ['it', 'them']


def test_one_line():
  assert wording.one_line('  Cannot read\n  x.tfrecord:\tcorrupt  ') == (
      'Cannot read x.tfrecord: corrupt')


SIZES = [  # (bytes, text): decimal units, about two digits.
    (0, '0 B'),
    (915, '915 B'),
    (994, '994 B'),
    (996, '1.0 KB'),
    (1807.6, '1.8 KB'),
    (22826, '23 KB'),
    (903_781, '904 KB'),
    (999_600, '1.0 MB'),
    (1.8e9, '1.8 GB'),
    (1.84e12, '1.8 TB'),
    (2.5e15, '2,500 TB'),
]


@pytest.mark.parametrize('num_bytes, text', SIZES)
def test_size(num_bytes, text):
  assert wording.size(num_bytes) == text
