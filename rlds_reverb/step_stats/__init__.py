"""Dataset statistics for normalization: `statistics(rlds_data)`.

    reading.py   one pass: episodes -> blocks of steps -> numpy accumulators
    moments.py   count, mean, std, min, max; blocks merged by Chan's rule
    sketch.py    percentiles to a relative accuracy, in fixed memory
    result.py    DatasetStatistics (numpy arrays by field path), its JSON file

Not named `statistics`: that is the function `rlds_reverb.statistics`.
"""

from rlds_reverb.step_stats.reading import statistics
from rlds_reverb.step_stats.result import DatasetStatistics
from rlds_reverb.step_stats.result import FieldStatistics
from rlds_reverb.step_stats.result import Summary
