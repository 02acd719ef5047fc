"""A Reverb table (of a checkpoint, or of a running server) out as an RLDS
dataset: the way back from a replay table to data other tools read.

    table.py     the table's settings and item spec (trajectories only)
    items.py     one pass over the items: which column each chunk holds
    store.py     one pass over the chunks: the wanted ones set aside on disk
    episodes.py  rows rebuilt, cut into episodes, merged in the order written
    report.py    what came back and what could not
    job.py       `export`: the whole job, written beside OUT, renamed at the end
"""

from rlds_reverb.exporter.job import export
from rlds_reverb.exporter.report import ExportReport
from rlds_reverb.exporter.report import Fragments
