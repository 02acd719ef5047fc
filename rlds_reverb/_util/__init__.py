"""Plumbing: what every part of the package leans on, none of it a feature.

    wording      how messages read: counts, sizes, one line
    quiet        TensorFlow's, absl's, gym's and Reverb's logs silenced (the
                 command line), or chosen lines dropped (`lines_dropped`)
    files        files written safely: checked first, replaced whole
    lazy         package names that import their module on first use
    clean_exit   scripts end without "Exception ignored in __del__"
    wire         protobuf's wire format and TFRecord's framing
    lifeline     worker processes that end when their parent dies

Private (the underscore): no public name is defined here. Each module imports
nothing of `rlds_reverb` and knows nothing of RLDS, Reverb or TF-Agents, so
every layer may use it; `import rlds_reverb` imports `clean_exit` and
`quiet` only (the lines it drops are named in `rlds_reverb.known_lines`).
"""
