"""N-way replay mixtures with exact per-batch shares (`replay.py`).

    sources.py   buffers or (address, table) -> checked sources, one spec
    weights.py   numbers, schedules or 'size' -> each batch's weights
    rounding.py  weights -> rows per source (largest remainder, carried)
    replay.py    replay_mixture: the streams chosen row by row, batched
"""
