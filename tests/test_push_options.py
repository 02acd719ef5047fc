"""`PushOptions`: what a push writes, one frozen value, checked when made,
the same whether given as keywords or whole."""

import dataclasses
import os
import pickle

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

EPISODES = [rlds_data.flat_episode(length, seed)
            for seed, length in enumerate((5, 2, 7))]
# Nothing listens there: every call below fails before it is asked.
NOWHERE = 'localhost:1'

OPTIONS, STORAGE = rlds_reverb.PushOptions, rlds_reverb.ImageStorage
BAD_VALUES = {  # name -> (what is made, with what, the one line)
    'sequence_length_zero': (
        OPTIONS, dict(sequence_length=0),
        'sequence_length and stride_length must be >= 1, got 0 and 1.'),
    'sequence_length_float': (OPTIONS, dict(sequence_length=2.5),
                              'sequence_length must be an int, got 2.5.'),
    'stride_bool': (OPTIONS, dict(stride_length=True),
                    'stride_length must be an int, got True.'),
    'end_of_episode': (OPTIONS, dict(end_of_episode='cut'),
                       "end_of_episode must be one of ['drop', 'pad', "
                       "'tile'], got 'cut'."),
    'priority': (OPTIONS, dict(priority=float('nan')),
                 'priority must be finite and >= 0, got nan.'),
    'priority_text': (OPTIONS, dict(priority='high'),
                      "priority must be a number, got 'high'."),
    'chunk_length': (OPTIONS, dict(chunk_length=0),
                     'chunk_length must be a positive int, got 0.'),
    'chunk_length_by_path': (OPTIONS, dict(chunk_length={'observation': 2.5}),
                             "chunk_length['observation'] must be a positive "
                             'int, got 2.5.'),
    'image_storage': (OPTIONS, dict(image_storage='pixels'),
                      "images must be one of ['raw', 'encoded'], got "
                      "'pixels'."),
    'strict': (OPTIONS, dict(strict='yes'),
               "strict must be True or False, got 'yes'."),
    'timeout': (OPTIONS, dict(timeout=float('inf')),
                'timeout must be a finite number of seconds > 0, got inf.'),
    'image_format': (STORAGE, dict(mode='encoded', format='gif'),
                     "image_format must be one of ['png', 'jpeg'], got "
                     "'gif'."),
    'image_format_of_raw': (STORAGE, dict(mode='raw', format='jpeg'),
                            "image_fields and image_format apply to "
                            "images='encoded' only."),
    'image_fields_a_string': (STORAGE, dict(mode='encoded', fields='pixels'),
                              'image_fields must be a sequence of step field '
                              "paths, got the string 'pixels'."),
}


@pytest.mark.parametrize('case', BAD_VALUES)
def test_a_bad_value_is_one_line_when_the_options_are_made(case):
  made, keywords, message = BAD_VALUES[case]
  with pytest.raises(ValueError) as error:
    made(**keywords)
  assert str(error.value) == message


def test_options_are_frozen_normalized_and_pickle():
  options = rlds_reverb.PushOptions(
      sequence_length=3, end_of_episode='pad', chunk_length={'reward': 4},
      image_storage=rlds_reverb.ImageStorage('encoded', 'jpeg',
                                             ['observation/pixels']))
  assert options.end_of_episode is rlds_reverb.EndOfEpisode.PAD
  assert options.image_storage.fields == ('observation/pixels',)
  with pytest.raises(dataclasses.FrozenInstanceError):
    options.priority = 2.0  # pytype: disable=not-writable
  assert pickle.loads(pickle.dumps(options)) == options


def test_keywords_and_options_write_the_same_items(make_server):
  keywords = dict(sequence_length=3, stride_length=2, end_of_episode='pad',
                  priority=0.5, chunk_length=4)
  server = make_server([reverb_tables.fifo_table('by_keywords'),
                        reverb_tables.fifo_table('by_options')])
  address = reverb_tables.address(server)
  by_keywords = rlds_reverb.push(rlds_data.as_rlds(EPISODES), address,
                                 'by_keywords', **keywords)
  by_options = rlds_reverb.push(rlds_data.as_rlds(EPISODES), address,
                                'by_options',
                                options=rlds_reverb.PushOptions(**keywords))
  assert by_options.items == by_keywords.items == 6
  reverb_tables.assert_same_flat_items(
      reverb_tables.drain_flat(address, 'by_options'),
      reverb_tables.drain_flat(address, 'by_keywords'))


TWICE = ('sequence_length is given both as a keyword (4) and in options (3); '
         'give it in one of them.')
GIVEN_TWICE = {
    'push': (lambda options: rlds_reverb.push(
        rlds_data.as_rlds(EPISODES), NOWHERE, 't', options=options,
        sequence_length=4), TWICE),
    'push_shards': (lambda options: rlds_reverb.push_shards(
        'bundled:cartpole', NOWHERE, 't', workers=2, options=options,
        sequence_length=4), TWICE),
    'nstep': (lambda options: rlds_reverb.push_nstep_transitions(
        rlds_data.as_rlds(EPISODES), NOWHERE, 't', n=2, discount=0.9,
        options=options, timeout=5.0),
              'timeout is given both as a keyword (5.0) and in options '
              '(30.0); give it in one of them.'),
}


@pytest.mark.parametrize('call, message', GIVEN_TWICE.values(),
                         ids=GIVEN_TWICE.keys())
def test_a_setting_given_as_a_keyword_and_in_options_is_refused(call,
                                                                message):
  with pytest.raises(ValueError) as error:
    call(rlds_reverb.PushOptions(sequence_length=3))
  assert str(error.value) == message


def test_push_shards_checks_its_settings_before_any_process_starts():
  """Made in the parent, the options fail there, in one line: not once per
  worker after each started TensorFlow (nothing listens at NOWHERE: the
  servers are checked after the options)."""
  with pytest.raises(ValueError) as error:
    rlds_reverb.push_shards('bundled:cartpole', NOWHERE, 't', workers=2,
                            priority=-1.0)
  assert str(error.value) == 'priority must be finite and >= 0, got -1.0.'
  with pytest.raises(TypeError) as error:
    rlds_reverb.push_shards('bundled:cartpole', NOWHERE, 't', workers=2,
                            sequence_lenght=3)
  assert str(error.value).startswith(
      "'sequence_lenght' is no push setting; they are sequence_length, ")


def test_nstep_refuses_options_whose_item_settings_do_not_apply():
  with pytest.raises(ValueError) as error:
    rlds_reverb.push_nstep_transitions(
        rlds_data.as_rlds(EPISODES), NOWHERE, 't', n=2, discount=0.9,
        options=rlds_reverb.PushOptions(end_of_episode='pad'))
  assert str(error.value) == (
      "push_nstep_transitions writes one item per transition: "
      "end_of_episode does not apply (options has end_of_episode='pad').")
