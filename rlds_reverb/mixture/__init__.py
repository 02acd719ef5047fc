"""N-way replay mixtures with exact per-batch shares (`replay.py`).

    sources.py   buffers or (address, table) -> checked sources, one spec
    weights.py   numbers, schedules or 'size' -> each batch's weights
    rounding.py  weights -> rows per source (largest remainder, carried)
    choices.py   rows per source -> one source index per row, per iterator
    watchdog.py  a server silent or a table starved for `timeout` fails it
    at_exit.py   the calls from tf.data into Python, settled at exit
    replay.py    replay_mixture: the streams chosen row by row, batched
"""
